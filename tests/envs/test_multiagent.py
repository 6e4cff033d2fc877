"""The per-switch PettingZoo env: PettingZoo's own checks, and equality with the single-agent env.

The references are independent of the multi-agent code: the single-agent core stepped with the spray
baseline (an even split over every live candidate path, built without any switch weights) and the
single-agent ``ecmp_weights`` action mode given the same weight table.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import parallel_api_test, parallel_seed_test

import ainet_gym
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from tests._scenarios import small_spine_leaf

# one scenario of every fabric family, plus failures and churn (short episodes keep the tests quick)
FAMILIES = {
    "periodic-interference": {},
    "link-failure": {},
    "multi-tenant-churn": {},
    "fat-tree-k8-stride": {"agents": "all"},
    "rail-optimized-flat-ring": {},
    "clos3-2pods": {"agents": "all"},  # a user-defined graph fabric
}
RESULT_FIELDS = ("iterations", "step_time_s", "comm_time_s", "gpu_utilization", "efficiency", "link_bytes")


def _same_results(a, b) -> None:
    for f in RESULT_FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


@pytest.mark.parametrize("scenario", list(FAMILIES))
def test_pettingzoo_api_and_seed(scenario: str) -> None:
    kw = FAMILIES[scenario]
    env = ainet_gym.parallel_env(scenario=scenario, episode_steps=6, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo reports dead/live agent mismatches as warnings
        # but the env's own warning about the options PettingZoo's signature probe passes is expected
        warnings.filterwarnings("ignore", r"reset options = \['options'\]: not supported", UserWarning)
        parallel_api_test(env, num_cycles=20)
        parallel_seed_test(lambda: ainet_gym.parallel_env(scenario=scenario, episode_steps=6, **kw))


def test_aec_form() -> None:
    from pettingzoo.test import api_test

    env = ainet_gym.aec_env(scenario=small_spine_leaf(episode_steps=4))
    # PettingZoo's signature probe resets with options={"options": 1}: the env warns and goes on
    with pytest.warns(UserWarning, match=r"reset options = \['options'\]: not supported"):
        api_test(env, num_cycles=10)


@pytest.mark.parametrize(
    "scenario", ["periodic-interference", "link-failure", "fat-tree-k8-stride", "clos3-2pods"]
)
def test_equal_weights_are_spray(scenario: str) -> None:
    """Every agent playing equal weights routes exactly as the spray baseline (even split over live
    candidate paths), interval by interval, failures included (two-tier) or without them (fat-tree)."""
    env = ainet_gym.parallel_env(scenario=scenario, agents="all", episode_steps=12)
    ref = EnvCore(scenario, episode_steps=12)
    spray = get_policy("spray+bg")  # switch weights move all traffic, background included
    for seed in (0, 5):
        env.reset(seed=seed)
        ref.reset([seed])
        for _ in range(12):
            K = env.switches.K
            env.step({a: np.zeros(K, dtype=np.float32) for a in env.agents})
            ref.step_split(spray(ref.world, ref.last_result))
            _same_results(env.core.last_result, ref.last_result)


@pytest.mark.parametrize(
    ("scenario", "withdraw"),
    [("periodic-interference", True), ("fat-tree-k8-stride", True), ("link-failure", False)],
)
def test_wcmp_table_matches_ecmp_weights_mode(scenario: str, withdraw: bool) -> None:
    """Agents playing the entries of a WCMP table route exactly as the single-agent ``ecmp_weights``
    mode given the whole table (a new random table every interval)."""
    env = ainet_gym.parallel_env(scenario=scenario, agents="all", episode_steps=10, withdraw_dead=withdraw)
    ref = EnvCore(scenario, action_mode="ecmp_weights", episode_steps=10)
    sw = env.switches
    rng = np.random.default_rng(3)
    env.reset(seed=2)
    ref.reset([2])
    for _ in range(10):
        table = rng.uniform(-1, 1, size=ref.action_space.shape).astype(np.float32)
        acts = {
            a: np.where(sw.hop_valid[i], table[np.maximum(sw.hop_pos[i], 0)], 0.0)
            for i, a in enumerate(sw.names)
            if a in env.agents
        }
        assert len(acts) == sw.n_agents  # every switch with a knob is an agent here
        env.step(acts)
        ref.step(table)
        _same_results(env.core.last_result, ref.last_result)


def _failing(**failures: tuple[int, int | None]) -> dict:
    """The small 4-leaf x 2-spine fabric with scheduled failures {link: (at_step, until_step)}."""
    sc = small_spine_leaf(episode_steps=10)
    sched = [
        {"link": k.replace("_", "-"), "at_step": a, "factor": 0.0, "until_step": u}
        for k, (a, u) in failures.items()
    ]
    sc["dynamics"]["link_failures"] = {"scheduled": sched}
    return sc


def test_agents_leave_and_join_with_failures() -> None:
    """leaf0 loses one of its two up-links at step 3 (no choice left: it leaves for the rest of the
    episode, even after the repair at step 6); leaf1 has no choice from step 0 until the repair at step 4
    and joins then."""
    env = ainet_gym.parallel_env(scenario=_failing(leaf0_spine0=(3, 6), leaf1_spine1=(0, 4)))
    _, info = env.reset(seed=0)
    assert env.agents == ["leaf_0", "leaf_2", "leaf_3"]
    K = env.switches.K
    seen = []
    for t in range(1, 11):
        obs, rew, term, trunc, info = env.step({a: np.zeros(K, np.float32) for a in env.agents})
        seen.append(list(env.agents))
        if t == 3:  # the interval about to run (step 3) has leaf0-spine0 down
            assert term["leaf_0"] and not any(term[a] for a in ("leaf_2", "leaf_3"))
        if t == 4:
            assert "leaf_1" in obs and "leaf_1" not in term  # joined: first observation, no reward yet
            assert info["leaf_1"]["next_hop_mask"].tolist() == [True, True]
    assert seen[0] == seen[1] == ["leaf_0", "leaf_2", "leaf_3"]
    assert seen[2] == ["leaf_2", "leaf_3"]
    assert seen[3] == seen[8] == ["leaf_1", "leaf_2", "leaf_3"]  # leaf_0 stays out after its repair
    assert seen[9] == [] and all(trunc.values())


def test_dead_next_hop_is_masked_and_carries_nothing() -> None:
    """A failed up-link is masked in the observation and gets no traffic whatever the agent plays."""
    sc = small_spine_leaf(episode_steps=6)
    sc["fabric"]["spines"] = 4
    sc["dynamics"]["link_failures"] = {"scheduled": [{"link": "leaf0-spine2", "at_step": 0, "factor": 0.0}]}
    env = ainet_gym.parallel_env(scenario=sc)
    obs, info = env.reset(seed=1)
    sw = env.switches
    assert info["leaf_0"]["next_hop_mask"].tolist() == [True, True, False, True]
    lay = sw.obs_layout
    assert obs["leaf_0"][lay["next_hop_mask"]].tolist() == [1, 1, 0, 1]
    for _ in range(6):
        env.step({a: np.ones(sw.K, np.float32) for a in env.agents})  # full weight on every hop
        dead = sw.hop_link[0, 2]
        assert env.core.last_result.link_bytes[0, dead] == 0.0
        assert env.core.last_result.stalled_transfers[0] == 0


def test_observation_is_local() -> None:
    """An agent's newest utilisation block holds the utilisations of exactly the network links into and
    out of its switch (from the fabric's link table), and nothing of other links."""
    env = ainet_gym.parallel_env(scenario="periodic-interference")
    env.reset(seed=4)
    K = env.switches.K
    for _ in range(3):
        obs, *_ = env.step({a: np.zeros(K, np.float32) for a in env.agents})
    f = env.core.world.fabric
    lu = env.core.last_result.link_utilization[0]
    sw = env.switches
    L = sw.n_links
    for i, a in enumerate(sw.names):
        node = sw.nodes[i]
        mine = np.flatnonzero(((f.link_src == node) | (f.link_dst == node)) & f.network_links)
        newest = obs[a][sw.obs_layout["link_utilization"]][:L]
        np.testing.assert_allclose(
            np.sort(newest[: mine.size]), np.sort(np.minimum(lu[mine], 1.0)), rtol=1e-6
        )
        assert not newest[mine.size :].any()  # padding


def test_rewards_shared_local_and_mix() -> None:
    envs = {
        r: ainet_gym.parallel_env(scenario="periodic-interference", reward=r)
        for r in ("shared", "local", 0.25)
    }
    out = {}
    for r, env in envs.items():
        env.reset(seed=0)
        for _ in range(4):
            _, rew, *_ = env.step({a: np.zeros(env.switches.K, np.float32) for a in env.agents})
        out[r] = rew
    res = envs["local"].core.last_result
    sw = envs["local"].switches
    for i, a in enumerate(sw.names):
        assert out["shared"][a] == pytest.approx(
            float(res.gpu_utilization[0] @ res.job_gpus[0] / res.job_gpus[0].sum())
        )
        peak = res.link_utilization[0, sw.hop_link[i][sw.hop_valid[i]]].max()
        assert out["local"][a] == pytest.approx(1.0 - min(peak, 1.0))
        assert out[0.25][a] == pytest.approx(0.75 * out["shared"][a] + 0.25 * out["local"][a])


def test_bad_arguments_name_the_field(small_spine_leaf_scenario: dict) -> None:
    with pytest.raises(ValueError, match="agents = 'spine'"):
        ainet_gym.parallel_env(scenario="periodic-interference", agents="spine")
    with pytest.raises(ValueError, match="reward = 'global'"):
        ainet_gym.parallel_env(scenario="periodic-interference", reward="global")
    with pytest.raises(ValueError, match=r"reward = 1\.5"):
        ainet_gym.parallel_env(scenario="periodic-interference", reward=1.5)
    sc = small_spine_leaf_scenario
    sc["fabric"] = {"topology": "single_switch", "hosts": 4, "gpus_per_host": 4, "nic_gbps": 400}
    sc["workload"]["background"] = []
    with pytest.raises(ValueError, match="no switch of tier 'leaf'"):
        ainet_gym.parallel_env(scenario=sc)
    env = ainet_gym.parallel_env(scenario="periodic-interference")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions\['leaf_0'\]\[2\] = 1\.5"):
        env.step({"leaf_0": np.array([0, 0, 1.5, 0, 0, 0, 0, 0])})
    with pytest.raises(ValueError, match=r"actions key = 'leaf_9': no such agent; allowed: leaf_0, "):
        env.step({"leaf_9": np.zeros(8)})


def _marl_example():
    """``examples/marl_ppo.py`` as a module (it needs SuperSuit and SB3: the test is skipped without them)."""
    pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "marl_ppo", Path(__file__).parents[2] / "examples" / "marl_ppo.py"
    )
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex  # dataclasses resolve the module of their annotations
    spec.loader.exec_module(ex)
    return ex


def test_example_trains_and_evaluates_like_the_env(tmp_path) -> None:
    """The example trains and saves a shared policy; ``marl:PATH`` in the evaluator (all episodes in one
    batch) plays exactly what the same policy gets from the PettingZoo env, episode by episode."""
    from ainet_gym.agents.evaluate import EvalConfig, prepare, run_policy

    ex = _marl_example()
    sc = small_spine_leaf(episode_steps=8)
    path = ex.main(ex.Args(scenario=sc, timesteps=256, copies=2, out=str(tmp_path / "m.zip"), logdir=""))
    _, prepared = prepare(EvalConfig(scenario=sc, policies=[f"marl:{path}"], seeds=[1, 2], out=None))
    label, agent, core = prepared[0]
    assert label == f"marl:{path}" and agent.level == "engine"  # keyed as given
    run = run_policy(agent, core, [1, 2])
    for e, seed in enumerate([1, 2]):
        env = ainet_gym.parallel_env(scenario=sc)
        obs, _ = env.reset(seed=seed)
        for t in range(8):
            acts = {a: agent.model.predict(obs[a], deterministic=True)[0] for a in env.agents}
            obs, _, _, _, info = env.step({a: np.clip(x, -1, 1) for a, x in acts.items()})
            # float32 matmuls of a batch of 8 rows (evaluator) and of 1 row (here) differ in the last bits
            got = info[env.possible_agents[0]]["reward_gpu_utilization"]
            assert got == pytest.approx(run.gpu[e, t], rel=1e-6)


def test_a_marl_model_records_its_fabric_and_is_refused_on_another(tmp_path, capsys, one_line) -> None:
    """The example trains on the 4:1 graph scenario and saves the fingerprint of its fabric in the model's
    ``ainet_gym.json``; ``evaluate marl:PATH`` on the 2:1 copy (same name, switches and spaces) is one line
    (exit 2) naming the file, the field and both fingerprints, and plays on the 4:1 file; the same model without
    the field (saved before it) plays on the 2:1 copy, unchecked. Fails on the old code: the metadata had no
    ``fabric`` and the copy played."""
    from _scenarios import fp_graph_two_fabrics, scenario_fingerprint, zip_without_fabric

    from ainet_gym.agents.sb3_agents import read_metadata
    from ainet_gym.cli import main

    ex = _marl_example()
    four, two = fp_graph_two_fabrics(tmp_path)
    fp4, fp2 = scenario_fingerprint(four), scenario_fingerprint(two)
    assert fp4 != fp2
    path = ex.main(
        ex.Args(scenario=str(four), timesteps=16, copies=1, out=str(tmp_path / "m.zip"), logdir="")
    )
    assert read_metadata(path)["fabric"] == fp4

    def evaluate(scenario, model) -> int:
        capsys.readouterr()
        ev = ["evaluate", str(scenario), "--policies", f"marl:{model}", "--seeds", "1", "--steps", "2"]
        return main([*ev, "--out", str(tmp_path / "ev"), "--overwrite"])

    assert evaluate(two, path) == 2
    one_line(f"marl:{path}: field 'fabric' = '{fp4}' (the fabric it was trained on), the scenario played has "
             f"fabric '{fp2}'; allowed: the scenario it was trained on (the same links and capacities), or train "
             "a model on this fabric (examples/marl_ppo.py on it)")  # fmt: skip
    assert evaluate(four, path) == 0
    old = tmp_path / "old.zip"  # a model of before the field: no key 'fabric'
    zip_without_fabric(path, old)
    assert "fabric" not in read_metadata(old)
    assert evaluate(two, old) == 0


def test_marl_policy_rejects_other_models(tmp_path) -> None:
    from ainet_gym.agents.registry import make_agent

    with pytest.raises(FileNotFoundError, match="not found"):
        make_agent(f"marl:{tmp_path / 'missing.zip'}")


def test_missing_pettingzoo_names_the_extra(monkeypatch) -> None:
    import sys

    from ainet_gym.envs import multiagent

    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # import pettingzoo -> ImportError
    with pytest.raises(ImportError, match=r"ainet-gym\[pettingzoo\]"):
        multiagent._require_pettingzoo()


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(mode: str) -> None:
    from pettingzoo.test import render_test

    # PettingZoo's render test (AEC form; it asks for "human" only to read the metadata)
    render_test(
        lambda render_mode=None: ainet_gym.aec_env(
            "periodic-interference", render_mode=None if render_mode == "human" else render_mode
        )
    )
    env = ainet_gym.parallel_env("periodic-interference", render_mode=mode, episode_steps=3)
    env.reset(seed=0)
    env.step({a: env.action_space(a).sample() for a in env.agents})
    out = env.render()
    if mode == "ansi":
        assert out.startswith("step 1/3") and f"agents ({len(env.agents)}): leaf_0" in out
    else:
        from ainet_gym.envs.render import render_rgb

        # the single-agent picture of the same fabric state
        np.testing.assert_array_equal(out, render_rgb(env.core, 0))
        assert out.shape == (240, 640, 3) and out.dtype == np.uint8
    with pytest.raises(ValueError, match=r"render_mode = 'human': unknown; allowed: None, ansi, rgb_array"):
        ainet_gym.parallel_env("periodic-interference", render_mode="human")
