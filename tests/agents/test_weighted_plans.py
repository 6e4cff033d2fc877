"""The class ``jobs+bg+weights`` (issue-26zi): the weighted plans ``favour{j}+bg`` of ``choose_bg``, the static
weighted baselines through ``evaluate``, the twin with weighted candidates, the labels over weighted plans and
the one-line refusals. Reference by hand: two 2-GPU jobs whose sendrecv flows (4e8 B each) share one 400G
uplink each way, 10 ms compute; at weights 1:3 the heavy job runs at 37.5 GB/s and ends its communication
after 10.667 ms, the light one has moved 1.333e8 B by then and takes the whole 50 GB/s for the rest (5.333 ms):
step times 26.000 and 20.667 ms (unweighted: 25 GB/s each, 26 ms both)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _scenarios import collision_scenario, small_spine_leaf, spine_leaf_fabric

from ainet_gym.agents.evaluate import EvalConfig, agent_controls, evaluate, markdown_table, run_policy
from ainet_gym.agents.registry import make_agent
from ainet_gym.agents.twin import PURE_CANDIDATES, TwinAgent, parse_twin_arg
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.plans import FAVOUR_WEIGHT, plans_of_mode, weighted_plan

LIGHT_MS = 26.0
HEAVY_MS = 10.0 + 4e8 / 37.5e9 * 1e3  # 20.667


def _shared_uplink() -> dict:
    """Jobs a (GPUs 0, 2) and b (1, 3) on 2 leaves x 1 spine: each job's two sendrecv flows cross the one
    uplink of its leaf, one each way, beside the other job's (the collision scenario's jobs on one spine)."""
    fabric = spine_leaf_fabric(
        2, 1, 2, nic_gbps=400, uplink_gbps=400, hop_latency_us=0.0, link_efficiency=1.0
    )
    return {
        **collision_scenario(),
        "name": "weighted-check",
        "fabric": fabric,
        "dynamics": {"episode_steps": 3, "decision_interval_ms": 30},
        "routing": {"max_paths": 1},
    }


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_favour_plan_gives_the_hand_computed_step_times(backend: str) -> None:
    # favour1-w3+bg: job b (slot 1) at 3, job a at 1; favour0-w3+bg the other way; lp+bg unweighted
    core = EnvCore(
        _shared_uplink(), batch=3, action_mode="choose_bg", backend=backend,
        extra_plans=("favour0-w3+bg", "favour1-w3+bg"),
    )  # fmt: skip
    assert core.plan_class == "jobs+bg+weights"
    core.reset([0, 1, 2])
    k0, k1, klp = (
        core.plans.index("favour0-w3+bg"),
        core.plans.index("favour1-w3+bg"),
        core.plans.index("lp+bg"),
    )
    _, _, _, _, info = core.step(np.array([k1, k0, klp]))
    st = np.asarray(info["step_time_ms"])
    np.testing.assert_allclose(
        st, [[LIGHT_MS, HEAVY_MS], [HEAVY_MS, LIGHT_MS], [LIGHT_MS, LIGHT_MS]], rtol=1e-9
    )
    assert list(info["plan_class"]) == ["jobs+bg+weights"] * 3
    # a plain plan the next interval puts the scenario's weights back (all 1: the unweighted engine)
    core.step(np.array([klp, klp, klp]))
    assert core.world.sim.engine_state.unit_weight is None


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: EnvCore(_shared_uplink(), action_mode="choose_bg", extra_plans=("favour9+bg",)),
         ["'favour9+bg'", "job slot = 9", "0..7"]),
        (lambda: EnvCore(_shared_uplink(), action_mode="choose_bg", extra_plans=("favour0-w0.5+bg",)),
         ["'favour0-w0.5+bg'", "weight = '0.5'", "[1, 1e6]"]),
        (lambda: EnvCore(_shared_uplink(), action_mode="choose_bg", extra_plans=("favour0-wx+bg",)),
         ["weight = 'x'", "[1, 1e6]"]),
        (lambda: EnvCore(_shared_uplink(), action_mode="choose_bg", extra_plans=("favour0",)),
         ["'favour0'", "favour{j}+bg"]),
        (lambda: EnvCore(_shared_uplink(), action_mode="choose", extra_plans=("favour0+bg",)),
         ["'favour0+bg'", "not an extra plan of its class"]),
        (lambda: make_agent("favour8+bg"), ["'favour8+bg'", "job slot = 8"]),
        (lambda: make_agent("favour0-w2000000+bg"), ["weight = '2000000'", "[1, 1e6]"]),
        (lambda: make_agent("favour0+bg@choose_bg"), ["favour0+bg takes no argument or variant"]),
        (lambda: TwinAgent("best-w0.5"), ["weight = '0.5'", "[1, 1e6]"]),
        (lambda: TwinAgent("best-w4-w4"), ["'w4'", "twice"]),
    ],
)  # fmt: skip
def test_bad_weighted_plans_are_refused_in_one_line(make: object, words: list[str]) -> None:
    with pytest.raises(ValueError) as e:
        make()  # type: ignore[operator]
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def _small() -> dict:
    """16 GPUs, two ring jobs, periodic storage background (the twin tests' scenario, without failures)."""
    return small_spine_leaf(6, name="weighted-small")


def _plays_the_base_split_with_weights(
    name: str, jobs: list[float], background: float, split: Callable[[EnvCore], np.ndarray]
) -> np.ndarray:
    """The GPU utilisation (batch, steps) of the weighted plan ``name`` on :func:`_small` (seeds 1, 2), after
    checking that it equals an episode of the engine at those share weights (``jobs`` per job, ``background``)
    stepped with ``split(core)`` at every interval."""
    sc, seeds = _small(), [1, 2]
    g = run_policy(make_agent(name), EnvCore(sc, batch=2, info_keys=("collisions",)), seeds).gpu
    core = EnvCore(sc, batch=2)
    core.reset(seeds)
    ref = np.zeros_like(g)
    for t in range(core.episode_steps):
        core.set_share_weights(np.tile(jobs, (2, 1)), background)
        _, _, _, _, info = core.step_split(split(core))
        ref[:, t] = info["reward_gpu_utilization"]
    np.testing.assert_array_equal(g, ref)
    return g


def test_weighted_baselines_run_through_evaluate_in_their_class(evaluate_json: Callable) -> None:
    policies = "burst-lp+bg,favour0+bg,favour1-w4+bg"
    pol = evaluate_json("periodic-interference-jitter", policies, "--seeds", "1,2", "--steps", "3")[
        "policies"
    ]
    for name in ("favour0+bg", "favour1-w4+bg"):  # spelled as given, in their class, against the path LP
        assert pol[name]["controls"] == "jobs+bg+weights"
        assert pol[name]["lp_reference"] == "lp+bg"
        assert len(pol[name]["gpu_utilization"]["ci95"]) == 2
    assert pol["burst-lp+bg"]["controls"] == "jobs+bg"
    # the static plan is the base's split with the weights: its episode is the engine's with those weights
    base = make_agent("burst-lp+bg")
    _plays_the_base_split_with_weights("favour1+bg", [1.0, 16.0], 16.0, lambda core: base.act(core, None))


def test_a_table_of_the_class_lists_the_learned_policy_first_beside_its_baselines() -> None:
    r = evaluate(
        EvalConfig(scenario=_small(), policies=["favour0+bg", "solo-lp+bg"], seeds=[1], steps=2, out=None)
    )
    r["policies"]["favour0+bg"]["learned"] = True  # as a learned policy of the class would be
    rows = [line.split(" | ")[0].strip("| ") for line in markdown_table(r).splitlines()[2:]]
    assert rows[0] == "favour0+bg"
    assert "lp+bg" in r["policies"]  # the class's LP is run


def test_the_weighted_twin_is_at_least_as_good_as_each_candidate_on_every_seed() -> None:
    seeds = [1, 2, 3]
    sc = _small()
    twin = TwinAgent("k7-h2-best-w-w4")
    assert parse_twin_arg("k7-h2-best-w-w4")["weights"] == [16.0, 4.0]
    g_twin = run_policy(twin, EnvCore(sc, batch=len(seeds), info_keys=("collisions",)), seeds).gpu.mean(
        axis=1
    )
    names = [*PURE_CANDIDATES, "favour0+bg", "favour1+bg", "favour0-w4+bg", "favour1-w4+bg"]
    assert list(twin.plan_stats["scores"])[1:] == names
    for name in names:
        core = EnvCore(sc, batch=len(seeds), info_keys=("collisions",))
        core.reset(seeds)
        g = run_policy(make_agent(name), core, seeds).gpu.mean(axis=1)
        assert np.all(g_twin >= g - 1e-12), (name, g_twin, g)
        np.testing.assert_array_equal(
            g, twin.plan_stats["scores"][name]
        )  # the twin played it as evaluate does
    # the replay (weights included) is the planned trajectory, exactly
    scores = twin.plan_stats["scores"]
    best = np.array([scores[c][i] for i, c in enumerate(twin.plan_stats["chosen"])])
    np.testing.assert_array_equal(g_twin, best)


def test_labels_and_knn_pick_among_weighted_plans(tmp_path: object) -> None:
    from ainet_gym.agents.imitate import KnnAgent, fit_knn, lookahead_labels

    sc = _small()
    extra = ("favour0+bg", "favour1-w4+bg", "favour0-w1+bg")
    lab = lookahead_labels(sc, [1, 2], h=2, base="burst-lp+bg", steps=3, extra_plans=extra)
    assert list(lab["plans"][-3:]) == list(extra)
    # the lookahead ran each plan at its weights: the same split at weight 16 and at 1 scores differently
    assert not np.array_equal(lab["scores"][:, -3], lab["scores"][:, -1])
    path = tmp_path / "knn.npz"  # type: ignore[operator]
    fit_knn(lab, out=path, k=1, scenario=sc)
    agent = KnnAgent(str(path))
    assert agent.env_kwargs["extra_plans"] == extra
    assert agent_controls(agent) == "jobs+bg+weights"
    r = evaluate(EvalConfig(scenario=sc, policies=[f"knn:{path}"], seeds=[1, 2], steps=3, out=None))
    assert r["policies"][f"knn:{path}"]["controls"] == "jobs+bg+weights"
    # exported for shipping, its record names the same class (not the mode's, jobs+bg)
    from ainet_gym.agents.pretrained import export_knn
    from ainet_gym.pretrained import pretrained_metadata

    shipped = export_knn(path, str(lab["meta"][0]), ["imitate knn ..."], 0, dst=tmp_path / "ship.npz")  # type: ignore[operator]
    assert pretrained_metadata(shipped)["controls"] == "jobs+bg+weights"


def test_a_step_sets_the_weights_its_picked_plans_name() -> None:
    # the step indexes a table parsed once; it must equal set_plan_weights over the names, and a plain plan the
    # scenario's weights (here every job at 1: the engine stores None, the unweighted solvers)
    core = EnvCore(
        _shared_uplink(), batch=3, action_mode="choose_bg", backend="numpy",
        extra_plans=("favour0-w3+bg", "favour1+bg"),
    )  # fmt: skip
    core.reset([0, 1, 2])
    picked = [core.plans.index("favour1+bg"), core.plans.index("lp+bg"), core.plans.index("favour0-w3+bg")]
    core.step(np.array(picked))
    stepped = core.world.sim.engine_state.unit_weight.copy()
    core.set_plan_weights([core.plans[k] for k in picked])
    np.testing.assert_array_equal(core.world.sim.engine_state.unit_weight, stepped)
    ju = core.world.job_unit
    assert stepped[ju[0]].tolist() == [1.0, FAVOUR_WEIGHT]
    assert stepped[ju[1]].tolist() == [1.0, 1.0]
    assert stepped[ju[2]].tolist() == [3.0, 1.0]
    core.step(np.array([core.plans.index("lp+bg")] * 3))
    assert core.world.sim.engine_state.unit_weight is None


def test_every_shipped_knn_plays_in_the_class_its_record_names() -> None:
    # `pretrained` of a shipped k-NN over weighted plans (ingest-bursts) is of the class jobs+bg+weights in
    # evaluate's tables, as its record says, not of its mode's class (choose_bg: jobs+bg)
    from ainet_gym.agents.pretrained import PretrainedAgent
    from ainet_gym.pretrained import list_pretrained
    from ainet_gym.scenario import load_scenario

    classes = {}
    for name, meta in list_pretrained().items():
        if meta["file"].endswith(".npz"):
            agent = PretrainedAgent()
            agent.bind(load_scenario(name))
            assert agent_controls(agent) == meta["controls"], name
            classes[name] = meta["controls"]
    assert "jobs+bg+weights" in classes.values() and "jobs+bg" in classes.values(), classes


def test_twin_names_every_weight_so_that_it_parses_back() -> None:
    # issue-26zm: `twin:best-w1e6` spelled its candidates favour0-w1e+06+bg, which the plan parser refuses
    from ainet_gym.routing.plans import weighted_plan_name

    for w in (16.0, 1e6, 2.0, 4.5, 123456.7, 1.0000001):
        for j in (0, 7):
            wp = weighted_plan(weighted_plan_name(j, w))
            assert wp is not None and (wp.slot, wp.weight) == (j, w)
    assert weighted_plan_name(0, 16.0) == "favour0+bg"
    assert weighted_plan_name(1, 1e6) == "favour1-w1000000+bg"
    twin = TwinAgent("k7-h1-best-w1e6")
    core = EnvCore(_shared_uplink(), batch=1)
    core.reset([0])
    assert twin._weighted_plans(core) == ["favour0-w1000000+bg", "favour1-w1000000+bg"]


@pytest.mark.parametrize(
    ("arg", "words"),
    [
        ("k7-w-wbase", ["wbase", "best"]),
        ("best-wbase", ["wbase", "w part"]),
        ("best-w-wbases", ["weight = 'bases'"]),
    ],
)
def test_wbase_needs_best_and_weights(arg: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as e:
        TwinAgent(arg)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def _lp_then_favour0(sc: dict, seeds: list[int], second_weighted: bool) -> np.ndarray:
    """By hand on a fresh core: the jobs' progress over one interval of ``lp+bg`` at the scenario's weights,
    then one of ``favour0+bg``'s split at its weights (job 0 and the background at 16; the scenario's when
    not ``second_weighted``)."""
    lp, fav = make_agent("lp+bg"), make_agent("favour0+bg")
    core = EnvCore(sc, batch=len(seeds))
    core.reset(seeds)
    before = core.job_progress()
    core.step_split(lp.act(core, None))
    split = fav.act(core, None)  # sets favour0+bg's weights
    if not second_weighted:
        core.set_share_weights(None)
    core.step_split(split)
    return (core.job_progress() - before).sum(axis=1)


def test_wbase_rolls_out_over_the_best_weighted_plan_at_its_weights() -> None:
    # on the shared uplink favouring either job shortens its step (26 -> 20.667 ms), so a weighted plan is each
    # instance's best pure candidate (favour0+bg: ties keep the first) and, with wbase, its lookahead base
    sc = _shared_uplink()
    seeds = [0, 1]
    twin = TwinAgent("k7-h2-best-w-wbase")
    assert parse_twin_arg("k7-h2-best-w-wbase")["weighted_base"] is True
    g_twin = run_policy(twin, EnvCore(sc, batch=2, info_keys=("collisions",)), seeds).gpu.mean(axis=1)
    assert twin.plan_stats["bases"] == ["favour0+bg", "favour0+bg"]
    # decision 0, candidate lp+bg (the first): one interval of lp+bg at the scenario's weights, then the base's
    # interval at favour0+bg's weights (job 0 and the background at 16); by hand on a fresh core
    got = twin.plan_stats["lookahead_scores"][0][:, 0]
    np.testing.assert_allclose(got, _lp_then_favour0(sc, seeds, True), rtol=1e-12)
    assert not np.allclose(
        got, _lp_then_favour0(sc, seeds, False)
    )  # (the base run unweighted would score otherwise)
    # and the twin is still at least as good as each of its whole-episode candidates
    for name, sc_ in twin.plan_stats["scores"].items():
        assert np.all(g_twin >= np.asarray(sc_) - 1e-12), name


def test_labels_with_a_weighted_base_score_each_plan_against_that_plan_at_its_weights() -> None:
    # issue-26zm: `imitate label --base favour0+bg`: each plan one interval, then the base's split at the base's
    # weights (job 0 and the background at 16) for the rest of the lookahead; by hand for lp+bg at decision 0
    from ainet_gym.agents.imitate import lookahead_labels

    sc = _shared_uplink()
    seeds = [0, 1]
    lab = lookahead_labels(
        sc, seeds, h=2, base="favour0+bg", steps=3, extra_plans=("favour0+bg", "favour1+bg")
    )
    assert str(lab["meta"][5]) == "favour0+bg"
    k = list(lab["plans"]).index("lp+bg")
    got = lab["scores"][lab["t"] == 0][:, k]
    np.testing.assert_allclose(got, _lp_then_favour0(sc, seeds, True), rtol=1e-12)
    assert not np.allclose(got, _lp_then_favour0(sc, seeds, False))
    with pytest.raises(ValueError, match="favour9"):
        lookahead_labels(sc, seeds, h=2, base="favour9+bg", steps=3)


def test_a_weighted_plan_over_another_split_runs_that_split_at_its_weights() -> None:
    # issue-26zm: favour{j}[-w{W}]-{base}+bg: the split of base (here lp+bg), job j and the background at W
    from ainet_gym.routing.lp import lp_all
    from ainet_gym.routing.plans import plan_policy, weighted_plan_name

    assert weighted_plan("favour1-w4-lp+bg") == weighted_plan(weighted_plan_name(1, 4.0, "lp+bg"))
    assert (weighted_plan("favour1-w4-lp+bg").slot, weighted_plan("favour1-w4-lp+bg").base) == (1, "lp+bg")
    assert weighted_plan("favour0-solo-lp+bg").weight == FAVOUR_WEIGHT
    assert plan_policy("favour0-w4-lp+bg") is lp_all
    assert weighted_plan_name(0, 16.0, "burst-lp+bg") == "favour0+bg"
    with pytest.raises(ValueError, match="base one of burst-lp, lp"):
        weighted_plan("favour0-w4-foo+bg")
    with pytest.raises(ValueError, match="base = 'ecmp'"):
        weighted_plan_name(0, 4.0, "ecmp")
    g = _plays_the_base_split_with_weights(
        "favour0-w4-lp+bg", [4.0, 1.0], 4.0, lambda core: lp_all(core.routing_context, core.last_result)
    )
    # ... and not the default base's (burst-lp+bg) at those weights
    g_burst = run_policy(
        make_agent("favour0-w4+bg"), EnvCore(_small(), batch=2, info_keys=("collisions",)), [1, 2]
    ).gpu
    assert not np.array_equal(g, g_burst)
    # a choose_bg env carries it as an extra plan of the weighted class
    assert plans_of_mode("choose_bg", ("favour0-w4-lp+bg",))[0] == "jobs+bg+weights"


def test_the_twin_with_weighted_candidates_over_another_split_beats_each_candidate() -> None:
    seeds = [1, 2, 3]
    sc = _small()
    cfg = parse_twin_arg("k7-h2-best-w4-onlp-wbase")
    assert cfg["weight_bases"] == ["burst-lp+bg", "lp+bg"] and cfg["weighted_base"]
    twin = TwinAgent("k7-h2-best-w4-onlp-wbase")
    g_twin = run_policy(twin, EnvCore(sc, batch=len(seeds), info_keys=("collisions",)), seeds).gpu.mean(
        axis=1
    )
    names = [*PURE_CANDIDATES, "favour0-w4+bg", "favour1-w4+bg", "favour0-w4-lp+bg", "favour1-w4-lp+bg"]
    assert list(twin.plan_stats["scores"])[1:] == names
    for name in names[-2:]:
        core = EnvCore(sc, batch=len(seeds), info_keys=("collisions",))
        g = run_policy(make_agent(name), core, seeds).gpu.mean(axis=1)
        np.testing.assert_array_equal(g, twin.plan_stats["scores"][name])  # played as evaluate plays it
    for name, sc_ in twin.plan_stats["scores"].items():
        assert np.all(g_twin >= np.asarray(sc_) - 1e-12), name
    # decision 0: the lp-based weighted candidate's lookahead score is its own interval (lp+bg's split at its
    # weights) then the base's; the burst-based one at the same weights scores otherwise
    k = 7 + names[-4:].index("favour0-w4-lp+bg")
    k_burst = 7 + names[-4:].index("favour0-w4+bg")
    first = twin.plan_stats["lookahead_scores"][0]
    assert first.shape == (3, 11)
    assert not np.allclose(first[:, k], first[:, k_burst])
    for arg, word in (("best-onlp", "w part"), ("best-w-onfoo", "'onfoo'"), ("best-w-onlp-onlp", "once")):
        with pytest.raises(ValueError, match=word):
            TwinAgent(arg)
