"""The ns-3 cross-check: refusals and routing decisions (always), the smallest case against ns-3 (with the
optional extra ``ns3``; skipped without it). ``make check-ns3`` runs this file in a venv with the extra."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ainet_gym.checks.crosscheck import (
    TCP_HEADER_EFFICIENCY,
    CrosscheckConfig,
    CrosscheckError,
    Ns3NotInstalledError,
    _Conn,
    _ecmp_set_size,
    _inversions,
    _routing_of,
    crosscheck,
)
from ainet_gym.checks.crosscheck.config import check_config
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.loader import load_scenario

HAS_NS3 = importlib.util.find_spec("ns") is not None
needs_ns3 = pytest.mark.skipif(
    not HAS_NS3, reason="ns-3 bindings not installed (optional extra: pip install 'ainet-gym[ns3]')"
)
#: the repository root (the agents run in a fresh interpreter import the test helpers from it)
ROOT = Path(__file__).resolve().parents[2]


def _switch(gpus: int = 4, nbytes: float = 2e6, **fabric: object) -> dict:
    return {
        "name": "xc-test",
        "fabric": {
            "topology": "single_switch",
            "hosts": gpus,
            "gpus_per_host": 1,
            "nic_gbps": 10,
            "profile": "roce",
            "hop_latency_us": 0.8,
            **fabric,
        },
        "workload": {
            "jobs": [
                {
                    "name": "ring",
                    "gpus": gpus,
                    "compute_ms": 1.0,
                    "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": nbytes}],
                }
            ]
        },
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 8.0},
    }


# ------------------------------------------------------------------------------------------- refusals
def test_background_sources_are_planned_with_their_schedule_and_rate() -> None:
    """A periodic source of 4 flows at 5 Gb/s in all, on in intervals 1 and 4 of 6 (period 3, offset 1):
    the replay gets each connection's payload rate (5e9 / 8 / 4 bytes/s) and the intervals it is on, and
    the fluid run's storage-link bytes show the same schedule."""
    from ainet_gym.checks.crosscheck import _run_fluid

    sc = _switch(gpus=4)
    sc["fabric"]["storage"] = {"hosts": 1, "gbps": 10}
    sc["workload"]["background"] = [
        {"kind": "storage", "gbps": 5, "pattern": "periodic", "period_steps": 3, "duration_steps": 1,
         "offset_steps": 1, "flows_per_host": 4}
    ]  # fmt: skip
    sc["dynamics"]["episode_steps"] = 6
    scn = load_scenario(sc)
    run = _run_fluid(scn, "ecmp", 0, 6, CrosscheckConfig(fluid_repeats=0))
    (bg,) = run.backgrounds
    assert bg.on.tolist() == [False, True, False, False, True, False]
    assert bg.rate_bytes_per_s == pytest.approx([5e9 / 8 / 4] * 4)
    assert all(run.conns[c].src == 4 for c in bg.conns)  # the storage host (endpoint n_gpus + 0)
    up = int(run.fabric.endpoint_up[4])
    moved = run.link_bytes[:, up]
    interval = run.interval_s
    assert moved[[0, 2, 3, 5]].max() == 0
    assert moved[[1, 4]] == pytest.approx([5e9 / 8 * interval] * 2, rel=1e-9)


def test_refuses_fabrics_over_64_gpus() -> None:
    with pytest.raises(CrosscheckError, match=r"65 GPUs.*at most 64"):
        crosscheck(_switch(gpus=65))


def test_refuses_link_failures_and_bad_steps() -> None:
    sc = _switch()
    sc["dynamics"]["link_failures"] = {"rate_per_step": 0.1, "tiers": ["nic"]}
    with pytest.raises(CrosscheckError, match=r"dynamics\.link_failures"):
        crosscheck(sc)
    with pytest.raises(CrosscheckError, match=r"steps = 65: must be an integer in \[1, 64\]"):
        crosscheck(_switch(), steps=65)
    sc = _switch()
    sc["dynamics"]["episode_steps"] = 65  # the default span: every interval of the episode
    with pytest.raises(CrosscheckError, match=r"dynamics\.episode_steps = 65.*at most 64"):
        crosscheck(sc)
    sc = _switch()
    sc["fabric"] = {
        "topology": "spine_leaf",
        "leaves": 2,
        "spines": 2,
        "hosts_per_leaf": 2,
        "gpus_per_host": 1,
    }
    sc["dynamics"]["link_failures"] = {"scheduled": [{"link": "leaf0-spine1", "at_step": 0, "factor": 0.0}]}
    with pytest.raises(CrosscheckError, match=r"scheduled\[0\]\.factor = 0: a failed link.*allowed"):
        crosscheck(sc)
    sc = _switch()
    sc["fabric"].update(gpus_per_host=2, gpus_per_nic=2, hosts=2)
    with pytest.raises(CrosscheckError, match=r"fabric\.gpus_per_nic = 2.*allowed: 1"):
        crosscheck(sc)


def test_refuses_unknown_policies_naming_the_allowed_ones() -> None:
    with pytest.raises(CrosscheckError, match=r"policy = 'no-such': unknown; allowed: .*ecmp.*ppo:PATH"):
        crosscheck(_switch(), policy="no-such")


def test_refuses_chunked_pipelines_and_bad_ring_chunk() -> None:
    sc = _switch()
    sc["workload"]["jobs"][0]["collectives"] = [
        {"op": "allreduce", "algorithm": "tree", "bytes": 2e6, "chunks": 4}
    ]
    with pytest.raises(CrosscheckError, match=r"collectives\[0\]\.chunks = 4.*allowed: 1"):
        crosscheck(sc)
    for bad in (-1, "1M", True):
        with pytest.raises(CrosscheckError, match=r"ring_chunk_bytes = .*allowed"):
            crosscheck(_switch(), config=CrosscheckConfig(ring_chunk_bytes=bad))  # type: ignore[arg-type]


def test_refuses_collectives_in_rank_groups_naming_the_field() -> None:
    # the replay decomposes a collective over all the job's ranks: a grouped one would be replayed wrong
    sc = _switch(gpus=4)
    sc["workload"]["jobs"][0]["collectives"] = [
        {"op": "allreduce", "algorithm": "ring", "bytes": 2e6, "group_size": 2}
    ]
    with pytest.raises(CrosscheckError, match=r"collectives\[0\]\.group_size = 2: .*allowed: none"):
        crosscheck(sc)


def test_ring_plan_couples_each_hop_to_the_previous_one_step_ahead() -> None:
    """A p-GPU ring AllReduce of S bytes (Patarasuk & Yuan 2009; NCCL): p hops, each moving 2 (p-1)/p S
    in 2 (p-1) steps of S/p; hop r -> r+1 forwards what hop r-1 -> r delivered, S/p (one step) ahead."""
    from ainet_gym.checks.crosscheck import _run_fluid

    p, S = 4, 2e6
    run = _run_fluid(load_scenario(_switch(gpus=p, nbytes=S)), "ecmp", 0, 1, CrosscheckConfig())
    ((flow,),) = run.jobs[0].phases  # one phase, one flow: the ring
    assert len(flow) == p
    for c, nbytes, pred, lag in flow:
        assert nbytes == pytest.approx(2 * (p - 1) / p * S)
        assert lag == pytest.approx(S / p)
        assert run.conns[flow[pred][0]].dst == run.conns[c].src  # fed by the hop into its source


def test_refuses_bad_experiment_constants_naming_them() -> None:
    for field, bad in (
        ("fluid_repeats", -1),
        ("device_queue_packets", 0),
        ("device_queue_packets", 2.5),
        ("backlog_bytes", 0),
        ("mss", True),
        ("fq_flows", 0),
        ("fq_perturbation", -1),
    ):
        with pytest.raises(CrosscheckError, match=rf"{field} = {bad!r}: allowed: an integer >= "):
            crosscheck(_switch(), config=CrosscheckConfig(**{field: bad}))
    for field, bad in (
        ("min_rto_ms", 0.0),
        ("del_ack_timeout_ms", -1.0),
        ("wall_limit_s", float("inf")),
        ("max_ns3_bytes", -1.0),
    ):
        with pytest.raises(CrosscheckError, match=rf"{field} = {bad!r}: allowed: a finite number > 0"):
            crosscheck(_switch(), config=CrosscheckConfig(**{field: bad}))
    # the TCP window (send and receive buffer): at least one full segment, an integer; the default unchanged
    assert CrosscheckConfig().tcp_buffer_bytes == 1 << 20
    for bad, mss in ((0, 1448), (1447, 1448), (16384.0, 1448), (True, 1448), (8947, 8948)):
        with pytest.raises(
            CrosscheckError, match=rf"tcp_buffer_bytes = {bad!r}: allowed: an integer >= mss = {mss}"
        ):
            crosscheck(_switch(), config=CrosscheckConfig(tcp_buffer_bytes=bad, mss=mss))
    # the device counters' bin: None (off, the default) or a finite width > 0
    assert CrosscheckConfig().device_counter_bin_s is None
    for bad in (0.0, -1e-3, float("inf"), True, "1ms"):
        with pytest.raises(CrosscheckError, match=rf"device_counter_bin_s = {bad!r}: allowed: None"):
            crosscheck(_switch(), config=CrosscheckConfig(device_counter_bin_s=bad))
    check_config(CrosscheckConfig(device_counter_bin_s=1e-3))
    check_config(CrosscheckConfig(tcp_buffer_bytes=16384))  # issue-27zn/27zo's small window is accepted
    check_config(CrosscheckConfig(tcp_buffer_bytes=1448))
    # a delayed ACK held past the minimum RTO makes every lone segment a spurious timeout
    with pytest.raises(CrosscheckError, match=r"del_ack_timeout_ms = 5.0: allowed: below min_rto_ms = 5.0"):
        crosscheck(_switch(), config=CrosscheckConfig(del_ack_timeout_ms=5.0))


def test_ppo_rows_name_the_missing_checkpoint() -> None:
    from ainet_gym.checks.crosscheck import case_policy

    assert case_policy("xc-ring-8", "lp") == "lp"
    with pytest.raises(CrosscheckError, match=r"policy 'ppo' of case 'no-such-case': no model"):
        case_policy("no-such-case", "ppo")


def test_refuses_rail_topology() -> None:
    sc = _switch()
    sc["fabric"] = {"topology": "rail_optimized", "hosts": 2, "gpus_per_host": 2, "spines": 1}
    with pytest.raises(CrosscheckError, match=r"fabric\.topology = 'rail_optimized'.*allowed"):
        crosscheck(sc)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    xc = sys.modules["ainet_gym.checks.crosscheck.ns3"]  # the ns-3 side keeps the imported bindings
    monkeypatch.setattr(xc, "_NS", None)
    monkeypatch.setitem(sys.modules, "ns", None)  # `from ns import ns` raises ImportError
    with pytest.raises(Ns3NotInstalledError, match=r"ainet-gym\[ns3\]"):
        crosscheck(_switch())


# ------------------------------------------------------------------------------------------- routing
def test_ecmp_set_size_counts_parallel_links_and_fat_tree_paths() -> None:
    sl = load_scenario(
        {
            "name": "t",
            "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 3, "links_per_spine": 2,
                       "hosts_per_leaf": 1, "gpus_per_host": 1},
            "workload": {"jobs": [{"name": "j", "gpus": 2, "collectives": []}]},
        }
    )  # fmt: skip
    f = build_fabric(sl.fabric, max_paths=4)
    assert _ecmp_set_size(f, 0, 1) == 12  # 3 spines x 2 parallel links up x 2 down, over the 4 candidates
    assert len(f.paths(0, 1)) == 4
    ft = load_scenario(
        {
            "name": "t",
            "fabric": {"topology": "fat_tree", "k": 4, "gpus_per_host": 1},
            "workload": {"jobs": [{"name": "j", "gpus": 2, "collectives": []}]},
        }
    )
    f = build_fabric(ft.fabric, max_paths=8)
    # k=4 fat-tree (Al-Fares 2008): (k/2)^2 = 4 core paths across pods, k/2 = 2 within a pod, 1 on an edge
    assert _ecmp_set_size(f, 0, 15) == 4
    assert _ecmp_set_size(f, 0, 2) == 2
    assert _ecmp_set_size(f, 0, 1) == 1


def test_routing_of_pins_sprays_and_splits() -> None:
    conn = _Conn(0, 1, [[0], [1], [2], [3]], full_ecmp=4)
    assert _routing_of(np.array([0, 0, 1, 0, 0]), conn, "packet") == ("paths", [(2, 1.0)])
    assert _routing_of(np.full(4, 0.25), conn, "packet") == ("spray", [])
    kind, parts = _routing_of(np.full(4, 0.25), conn, "subflows")
    assert kind == "paths" and [p for p, _ in parts] == [0, 1, 2, 3]
    kind, parts = _routing_of(np.array([0.5, 0.5, 0, 0]), conn, "packet")
    assert kind == "paths" and parts == [(0, 0.5), (1, 0.5)]
    capped = _Conn(0, 1, [[0], [1]], full_ecmp=4)  # an even split over a capped set is not a spray
    assert _routing_of(np.array([0.5, 0.5]), capped, "packet")[0] == "paths"


def test_inversions_ignore_fluid_ties() -> None:
    assert _inversions({"a": 1.0, "b": 2.0}, {"a": 2.1, "b": 2.0}, 0.02) == ["a<b"]
    assert _inversions({"a": 1.0, "b": 1.01}, {"a": 2.0, "b": 1.0}, 0.02) == []


def test_cli_flags_reach_the_replay_config(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # without ns-3: the command's flags must arrive in the CrosscheckConfig the replay runs with
    import ainet_gym.checks.crosscheck as xc
    from ainet_gym.cli import main

    seen = {}

    def fake(scenario, policy, seed, steps, config):
        seen.update(scenario=scenario, seed=seed, steps=steps, config=config)
        return {"scenario": scenario, "policy": policy, "seed": seed, "steps": 1, "jobs": [], "fluid_wall_s": 0.0,
                "ns3_wall_s": 0.0}  # fmt: skip

    monkeypatch.setattr(xc, "crosscheck", fake)
    argv = ["crosscheck", "xc-switch-4", "--seed", "3", "--split-qps", "6", "--fq-flows", "1024", "--json"]
    assert main(argv) == 0
    cfg = seen["config"]
    assert (seen["seed"], cfg.split_qps, cfg.fq_flows) == (3, 6, 1024)
    assert main(["crosscheck", "xc-switch-4", "--json"]) == 0
    assert seen["config"].fq_flows == CrosscheckConfig().fq_flows == 65536  # the documented default
    with pytest.raises(SystemExit):
        main(["crosscheck", "xc-switch-4", "--fq-flows", "0"])
    assert "argument --fq-flows: 0 is out of range" in capsys.readouterr().err


def test_cli_wall_limit_and_volume_limit_reach_the_replay_config(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # without ns-3: a 64-GPU replay over 16 intervals carries more than the default 8 GB and runs past the
    # default 900 s of wall on a loaded machine (docs/fidelity-learning.md, the 3:1 copy); both are flags
    import ainet_gym.checks.crosscheck as xc
    from ainet_gym.cli import main

    seen = {}

    def fake(scenario, policy, seed, steps, config):
        seen.update(config=config)
        return {"scenario": scenario, "policy": policy, "seed": seed, "steps": 1, "jobs": [], "fluid_wall_s": 0.0,
                "ns3_wall_s": 0.0}  # fmt: skip

    monkeypatch.setattr(xc, "crosscheck", fake)
    assert main(["crosscheck", "xc-switch-4", "--wall-limit-s", "3000", "--max-ns3-gb", "20", "--json"]) == 0
    assert (seen["config"].wall_limit_s, seen["config"].max_ns3_bytes) == (3000.0, 20e9)
    assert main(["crosscheck", "xc-switch-4", "--json"]) == 0
    assert (seen["config"].wall_limit_s, seen["config"].max_ns3_bytes) == (
        900.0,
        8e9,
    )  # the documented defaults
    for flag, text in (("--wall-limit-s", "0"), ("--max-ns3-gb", "-1"), ("--max-ns3-gb", "nan")):
        with pytest.raises(SystemExit):
            main(["crosscheck", "xc-switch-4", flag, text])
        assert f"argument {flag}: {text} is out of range" in capsys.readouterr().err


def test_volume_refusal_names_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    # the refusal of a replay too large for max_ns3_bytes (after the fluid run, before ns-3 runs) names the
    # command-line flag that raises it; ns-3's import is skipped, so this runs without the extra
    import ainet_gym.checks.crosscheck.compare as compare

    monkeypatch.setattr(compare, "import_ns", lambda: None)
    with pytest.raises(CrosscheckError, match=r"--max-ns3-gb"):
        crosscheck(_switch(4, 2e6), config=CrosscheckConfig(max_ns3_bytes=1e6))


def test_the_3to1_bundle_copy_keeps_the_originals_shape() -> None:
    # scenarios/crosscheck/xc-spine-leaf-3to1-bundle-jitter-64.yaml (docs/fidelity-learning.md): half the GPUs,
    # one per host, every time over 4; the oversubscription, the ECMP set, each job's compute over its
    # communication at the link efficiency, and its start window over its compute are the original's
    from ainet_gym.checks.crosscheck.compare import resolve_scenario

    orig = load_scenario("spine-leaf-3to1-bundle-jitter")
    copy = load_scenario(resolve_scenario("xc-spine-leaf-3to1-bundle-jitter-64"))
    fo, fc = orig.fabric, copy.fabric

    def oversub(f: object) -> float:
        down = f.hosts_per_leaf * f.gpus_per_host * f.nic_gbps
        return down / (f.spines * f.links_per_spine * f.uplink_gbps)

    assert oversub(fc) == pytest.approx(oversub(fo), rel=1e-5) == pytest.approx(3.0, rel=1e-5)
    assert (fc.leaves, fc.spines, fc.links_per_spine, fc.gpus_per_host) == (
        fo.leaves,
        fo.spines,
        fo.links_per_spine,
        1,
    )
    assert build_fabric(fc, copy.routing.max_paths).n_gpus == 64
    assert copy.dynamics.episode_steps == 16
    assert copy.dynamics.decision_interval_ms == pytest.approx(orig.jobs[2].compute_ms / 4 + 19.375 / 4)

    def comm_ms(sc: object, job: object) -> float:
        p, f = job.gpus, sc.fabric
        eff = f.link_efficiency if f.link_efficiency is not None else 1.0
        return 2 * (p - 1) / p * job.collectives[0].bytes * 8 / (f.nic_gbps * 1e9 * eff) * 1e3

    for jo, jc in zip(orig.jobs, copy.jobs, strict=True):
        assert jc.name == jo.name and jc.gpus == jo.gpus // 2 and jc.placement == jo.placement == "spread"
        assert jc.compute_ms == pytest.approx(jo.compute_ms / 4)
        assert jc.start_jitter_ms == pytest.approx(jo.start_jitter_ms / 4)
        assert comm_ms(copy, jc) == pytest.approx(comm_ms(orig, jo) / 4, rel=1e-3)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "scenarios" / "crosscheck").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_crosscheck_case_loads_names_itself_and_fits_the_replay(path: Path) -> None:
    # every file of scenarios/crosscheck/ (a new copy is picked up here): its `name` is its file's, its header
    # comment opens with that name (what it models follows), the bare name resolves to it, and its fabric is
    # one the replay builds (at most max_gpus GPUs)
    from ainet_gym.checks.crosscheck.compare import resolve_scenario

    sc = load_scenario(path)
    assert sc.name == path.stem
    assert path.read_text().startswith(f"# {path.stem}: ")
    assert Path(resolve_scenario(path.stem)).resolve() == path.resolve()
    assert build_fabric(sc.fabric, sc.routing.max_paths).n_gpus <= CrosscheckConfig().max_gpus


def test_the_jitter_64_copy_is_the_64_copy_with_the_16_gpu_jitter_copys_draws() -> None:
    # scenarios/crosscheck/xc-periodic-interference-jitter-64.yaml (docs/fidelity-learning.md, issue-27zzl):
    # xc-periodic-interference-64 field for field (so a policy trained there, which records the fabric's
    # fingerprint, plays here) plus the per-episode draws of xc-periodic-interference-jitter: each job's start
    # over one compute time and the checkpoint's phase over 0..7 intervals. In the 64-GPU copy a seed changes
    # only the ECMP hash; here the same seed draws the same hash and different starts and phases per seed
    from ainet_gym.checks.crosscheck.compare import resolve_scenario
    from ainet_gym.fabric.topology import fabric_fingerprint
    from ainet_gym.sim.world import FabricWorld

    fixed, copy, small = (
        load_scenario(resolve_scenario(n))
        for n in (
            "xc-periodic-interference-64",
            "xc-periodic-interference-jitter-64",
            "xc-periodic-interference-jitter",
        )
    )
    assert (copy.fabric, copy.routing, copy.dynamics, copy.reward) == (
        fixed.fabric,
        fixed.routing,
        fixed.dynamics,
        fixed.reward,
    )
    assert fabric_fingerprint(build_fabric(copy.fabric, copy.routing.max_paths)) == fabric_fingerprint(
        build_fabric(fixed.fabric, fixed.routing.max_paths)
    )
    assert [replace(j, start_jitter_ms=0.0) for j in copy.jobs] == list(fixed.jobs)
    for jc, js in zip(copy.jobs, small.jobs, strict=True):
        assert jc.start_jitter_ms == jc.compute_ms == js.start_jitter_ms == js.compute_ms > 0
    assert [replace(b, offset_jitter_steps=0) for b in copy.background] == list(fixed.background)
    assert [b.offset_jitter_steps for b in copy.background] == [
        b.offset_jitter_steps for b in small.background
    ]
    assert copy.background[0].offset_jitter_steps == 7

    def draws(sc: object, seed: int) -> tuple[tuple[float, ...], tuple[int, ...], int]:
        world = FabricWorld(sc, batch=1)
        world.reset(seeds=[seed])
        starts = tuple(float(j.start_ms) for j in world.state.jobs[0] if j is not None)
        return starts, tuple(world.state.bg_offset[0].tolist()), int(world.state.hash_seed[0])

    seeds = range(4)
    got = [draws(copy, s) for s in seeds]
    base = [draws(fixed, s) for s in seeds]
    assert all(b[:2] == ((0.0, 0.0), (3,)) for b in base)  # the fixed copy: every seed the same episode
    assert [g[2] for g in got] == [b[2] for b in base]  # the same ECMP hash per seed
    assert len({g[0] for g in got}) == len(seeds) and len({g[1] for g in got}) > 1
    for starts, offsets, _ in got:
        for t, job in zip(starts, copy.jobs, strict=True):
            assert 0.0 <= t <= job.compute_ms and round(t * 10) == pytest.approx(t * 10, abs=1e-9)
        assert all(3 <= o <= 10 for o in offsets)


def test_a_knn_student_of_the_copy_is_replayed_and_a_foreign_one_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `crosscheck COPY --policy knn:PATH` (docs/fidelity-learning.md, issue-27y): a k-NN labelled and fitted on
    # the 64-GPU copy (a YAML path, not a shipped name) reaches the ns-3 side with the student's splits in
    # every interval; the shipped student of the 128-GPU original is refused, naming both scenarios. ns-3 is
    # not imported (its import and run are replaced), so this runs without the extra
    import ainet_gym.checks.crosscheck.compare as compare
    from ainet_gym.agents.imitate import fit_knn, lookahead_labels
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.checks.crosscheck.compare import resolve_scenario
    from ainet_gym.envs.env import EnvCore

    path = resolve_scenario("xc-spine-leaf-3to1-bundle-jitter-64")
    labels = lookahead_labels(path, [9_000_000, 9_000_001], objective="tail")
    knn = fit_knn(labels, tmp_path / "knn.npz", k=3, vote="value", value_weight=10.0, scenario=path)

    class Reached(Exception):
        pass

    seen = {}

    def fake_ns3(run: object, cfg: object) -> None:
        seen["run"] = run
        raise Reached

    monkeypatch.setattr(compare, "import_ns", lambda: None)
    monkeypatch.setattr(compare, "run_ns3", fake_ns3)
    with pytest.raises(Reached):
        crosscheck(
            path, policy=f"knn:{knn}", seed=1, config=CrosscheckConfig(fluid_repeats=0, max_ns3_bytes=30e9)
        )
    run = seen["run"]
    assert len(run.splits) == 16 and (run.iterations > 0).all()
    # the splits replayed are the student's: its plans played through the env's own action path (step, not
    # step_split) on the replay's scenario complete the same iterations
    agent = make_agent(f"knn:{knn}")
    sc = load_scenario(path)
    sc = replace(sc, fabric=replace(sc.fabric, link_efficiency=TCP_HEADER_EFFICIENCY))
    core = EnvCore(sc, batch=1, episode_steps=16, **agent.env_kwargs)
    obs, _ = core.reset([1])
    agent.check(core)
    agent.reset(core)
    done = 0
    for split in run.splits:
        action = agent.act(core, obs)
        assert np.array_equal(core.decode(core.validate(action)), split)
        obs, *_ = core.step(action)
        done += int(core.last_result.iterations[0].sum())
    assert done == int(run.iterations.sum())
    shipped = ROOT / "ainet_gym" / "pretrained" / "spine-leaf-3to1-bundle-jitter.npz"
    with pytest.raises(
        ValueError,
        match=r"labelled on scenario 'spine-leaf-3to1-bundle-jitter', evaluated on "
        r"'xc-spine-leaf-3to1-bundle-jitter-64'",
    ):
        crosscheck(path, policy=f"knn:{shipped}", seed=1)


# ------------------------------------------------------------------------------------------- ns-3
@needs_ns3
def test_smallest_case_matches_closed_form_and_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """4 GPUs on one 10 Gb/s switch, ring AllReduce of 2 MB: every hop moves 2 (p-1)/p S = 3 MB.

    Reference (independent of both simulators): 3 MB at 10 Gb/s times the TCP payload fraction 1448/1529.
    """
    from ainet_gym.cli import main

    assert main(["crosscheck", "xc-switch-4", "--policy", "ecmp", "--seed", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"scenario", "policy", "seed", "jobs", "fluid_wall_s", "ns3_wall_s"} <= set(out)
    assert out["scenario"] == "xc-switch-4" and out["policy"] == "ecmp" and out["seed"] == 0
    assert out["steps"] == 1  # the case's dynamics.episode_steps
    (job,) = out["jobs"]
    assert {"name", "fluid_comm_ms", "ns3_comm_ms", "rel_error", "intervals"} <= set(job)
    (iv,) = job["intervals"]  # one interval: its figures are the run's
    assert iv["fluid_comm_ms"] == pytest.approx(job["fluid_comm_ms"])
    assert iv["ns3_comm_ms"] == pytest.approx(job["ns3_comm_ms"])
    closed = 3e6 * 8 / (10e9 * 1448 / 1529) * 1e3
    # measured value / closed - 1 (ns-3 3.44, 7 Dec 2026), deterministic (ns-3 seed 1 run 1, fluid seed 0);
    # the errors are 1/2-1/4 of the tolerances: kept. The fluid's +9.6 us is 6 ring steps x 2 links x the
    # 0.8 us hop latency (0 with hop_latency_us 0).
    assert job["ns3_comm_ms"] == pytest.approx(closed, rel=0.015)  # measured +0.81%
    assert job["fluid_comm_ms"] == pytest.approx(closed, rel=0.01)  # measured +0.38%
    assert job["rel_error"] == pytest.approx((job["fluid_comm_ms"] - job["ns3_comm_ms"]) / job["ns3_comm_ms"])
    assert abs(job["rel_error"]) < 0.015  # measured -0.43%
    assert out["ns3_wall_s"] > 0 and out["fluid_wall_s"] > 0


@needs_ns3
def test_fq_flows_sets_the_buckets_and_flow_buckets_are_fq_codels_own() -> None:
    """4 GPUs in a ring on one switch: every device carries one hop's data and another hop's ACKs, and
    each iteration's hops are new TCP connections (several 5-tuples per device in the run). The buckets
    ``flow_buckets`` computes for each sub-flow's data and ACKs (the driver's copy of ns-3's hash) give,
    per device, exactly the number of classes FqCoDel made there (``fq_buckets``), for bucket counts and
    salts where collisions happen; with one bucket every device used one, with 1024 none collide here."""
    sc = _switch()
    f = build_fabric(load_scenario(sc).fabric)
    rev = {
        lk: next(
            r for r in range(f.n_links) if (f.link_src[r], f.link_dst[r]) == (f.link_dst[lk], f.link_src[lk])
        )
        for lk in range(f.n_links)
    }
    for flows, salt in ((1, 0), (5, 0), (7, 1), (1024, 0)):
        det: dict = {}
        crosscheck(sc, config=CrosscheckConfig(fq_flows=flows, fq_perturbation=salt), details=det)
        used: dict[int, set[int]] = {}
        for (_, conn, p, *_), (data, ack) in zip(det["subflow_log"], det["flow_buckets"], strict=True):
            assert 0 <= data < flows and 0 <= ack < flows
            for lk in det["paths"][conn][p]:
                used.setdefault(lk, set()).add(data)
                used.setdefault(rev[lk], set()).add(ack)
        built = {lk: b for lk, b in enumerate(det["fq_buckets"]) if b >= 0}
        assert built == {lk: len(b) for lk, b in used.items()}
        if flows == 1:
            assert set(built.values()) == {1}
        if flows == 1024:
            assert set(built.values()) == {4}  # 4 TCP 5-tuples per device, none colliding
        if flows == 5:
            assert min(built.values()) < 4  # collisions: fewer buckets than 5-tuples


def test_pair_owners_name_each_jobs_connections() -> None:
    """The device counters' owners (no ns-3 needed): every (source, destination) endpoint pair of a job's
    connections is that job's; two jobs on one switch own disjoint pairs."""
    from ainet_gym.checks.crosscheck import _run_fluid
    from ainet_gym.checks.crosscheck.ns3 import pair_owners

    sc = _switch(gpus=4)
    sc["workload"]["jobs"][0]["gpus"] = 2
    sc["workload"]["jobs"].append({**sc["workload"]["jobs"][0], "name": "other"})
    run = _run_fluid(load_scenario(sc), "ecmp", 0, 1, CrosscheckConfig(fluid_repeats=0))
    owners = pair_owners(run)
    assert sorted(owners.values()) == ["other", "other", "ring", "ring"]
    assert {owners[(c.src, c.dst)] for c in run.conns.values()} == {"ring", "other"}
    ring = {e for (s, d), n in owners.items() if n == "ring" for e in (s, d)}
    other = {e for (s, d), n in owners.items() if n == "other" for e in (s, d)}
    assert not ring & other


@needs_ns3
def test_device_counters_count_each_hops_wire_bytes_per_bin() -> None:
    """4 GPUs in a ring on one switch, 1 ms bins: every link's data counter holds exactly one pair, the
    hop it carries, owned by the job; its wire bytes are the payload the hop received plus 54 bytes of
    headers and PPP framing per 1448-byte segment (payload = wire x 1448 / 1502 within 0.5%), and the bins
    sum to the link's total; the smaller packets (ACKs) go to ``other``. Off by default."""
    sc = _switch()
    det: dict = {}
    crosscheck(sc, config=CrosscheckConfig(device_counter_bin_s=1e-3), details=det)
    dev = det["device_bytes"]
    assert dev["bin_s"] == 1e-3 and set(dev["owners"].values()) == {"ring"}
    payload = np.asarray(det["link_bytes"]["ns3"]).sum(axis=0)
    carried = 0
    for lk, v in dev["links"].items():
        assert all(len(series) == 8 for series in v["data"].values()) and len(v["other"]) == 8
        if payload[int(lk)] == 0:
            assert not v["data"]
            continue
        carried += 1
        ((pair, series),) = v["data"].items()
        assert dev["owners"][pair] == "ring"
        # measured +0.0072% on each of the 8 links (ns-3 3.44, 7 Dec 2026): kept, at ns-3's floor of 0.5%
        assert sum(series) * 1448 / 1502 == pytest.approx(payload[int(lk)], rel=5e-3)
        assert sum(v["other"]) > 0  # the ACKs of the hop flowing the other way
    assert carried == 8  # 4 hops x (NIC up, switch down)
    det = {}
    crosscheck(sc, details=det)
    assert det["device_bytes"] is None


@needs_ns3
def test_nvlink_transfers_are_refused() -> None:
    sc = _switch(gpus=2, gpus_per_host=2)
    with pytest.raises(CrosscheckError, match=r"same host \(NVLink\)"):
        crosscheck(sc)


def test_header_factor_is_the_documented_fraction() -> None:
    assert abs(TCP_HEADER_EFFICIENCY - 1448 / 1529) < 1e-15
    assert CrosscheckConfig().header_efficiency == TCP_HEADER_EFFICIENCY


@needs_ns3
def test_acks_sharing_links_with_data_do_not_slow_the_data() -> None:
    """Two GPUs on two leaves joined by one spine exchange 2 MB: every link carries one direction's data
    and the other direction's ACKs. Reference (closed form, independent of both simulators): 2 MB at
    10 Gb/s times the TCP payload fraction 1448/1529 (1.690 ms). With ns-3's default 100-packet device FIFO
    under the queue disc the ACKs waited behind 150 KB of data on every link and the exchange took 1.914 ms
    (+13%, docs/fidelity.md); the cross-check's 4-packet FIFO lets FqCoDel interleave them (1.711 ms)."""
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    sc = {
        "name": "xc-ack-share",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "profile": "roce"},
        "workload": {"jobs": [{"name": "x", "gpus": 2, "compute_ms": 1.0,
                               "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 2e6}]}]},
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 6.0},
    }  # fmt: skip
    closed = 2e6 * 8 / (10e9 * 1448 / 1529) * 1e3
    r, det = _crosscheck_in_subprocess(sc, "ecmp", 0, 1, None)
    (job,) = r["jobs"]
    assert job["ns3_comm_ms"] == pytest.approx(closed, rel=0.02)  # measured +1.28% (ns-3 3.44, 7 Dec 2026)
    assert abs(job["rel_error"]) < 0.02  # measured -1.08%
    # every transfer of the log completed and took the same time (no flow starved of ACKs); measured: the 4
    # took exactly the same time (spread 0), bound 1% -> 0.5% (ns-3's floor)
    done = [t[3] - t[2] for t in det["transfer_log"] if t[3] > 0]
    assert len(done) >= 4 and max(done) - min(done) < 0.005 * closed * 1e-3
    # ns-3's default FIFO: the effect the short one removes (a lower bound: measured +13.3%, 1.914 ms)
    r100, _ = _crosscheck_in_subprocess(sc, "ecmp", 0, 1, CrosscheckConfig(device_queue_packets=100))
    assert r100["jobs"][0]["ns3_comm_ms"] > 1.08 * closed


def _crosscheck_with_agent(
    agent_code: str, sc: dict, policy: str, config: dict | None = None
) -> tuple[dict, dict]:
    """:func:`crosscheck` of ``sc`` in a fresh interpreter (ns-3 keeps global state per process) after
    ``agent_code`` has registered the agent ``policy``, with ``CrosscheckConfig(**config)``; returns the
    result and its details. The repository root leads the interpreter's path: ``agent_code`` may import the
    test helpers (``tests._scenarios``)."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(agent_code) + textwrap.dedent(
        """
        import json, sys
        from ainet_gym.checks.crosscheck import CrosscheckConfig, crosscheck
        det = {}
        cfg = CrosscheckConfig(**json.loads(sys.argv[3]))
        r = crosscheck(json.loads(sys.argv[1]), sys.argv[2], 0, None, cfg, det)
        print("XC-RESULT " + json.dumps({"result": r, "details": det}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(sc), policy, json.dumps(config or {})],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("XC-RESULT ")), None)
    assert line is not None, proc.stderr[-2000:]
    out = json.loads(line.removeprefix("XC-RESULT "))
    return out["result"], out["details"]


_SWITCHING_AGENT = """
    from ainet_gym.agents.registry import register_agent
    from tests._scenarios import split_slow_or_even

    class SwitchAtOne:
        # interval 0: every job connection on its path through the degraded link; then 50/50 over both
        name = "switch-at-one"
        level = "engine"
        env_kwargs = {}

        def check(self, core):
            pass

        def reset(self, core):
            self.k = 0

        def act(self, core, obs):
            split = split_slow_or_even(core, slow_only=self.k == 0)
            self.k += 1
            return split

    register_agent("switch-at-one", lambda arg: SwitchAtOne())
"""


@needs_ns3
def test_split_change_between_intervals_moves_unsent_bytes_as_hand_computed() -> None:
    """Two GPUs on two leaves joined by two spines exchange S = 20 MB (sendrecv shift:1) after 5 ms of
    compute; the leaf0-spine link of one spine runs at half rate. Interval 0 (15 ms): every connection on
    its path through the slow link, at C/2 (C = 10 Gb/s times the TCP payload fraction 1448/1529). Interval
    1: split 50/50 over both spines, and a transfer in flight moves its unsent bytes to the new split at
    once (the fluid model's semantics; C/2 on each path, C in all). Hand computation: 10 ms at C/2, then the
    rest at C: comm = 10 ms + (S - C/2 * 10 ms) / C = 5 ms + S / C = 21.89 ms. Without moving the bytes in
    flight (``routing.reroute: new_transfers``, checked second) the transfer takes 2 S / C = 33.8 ms."""
    C = 10e9 / 8 * 1448 / 1529
    S = 20e6
    hand = (5e-3 + S / C) * 1e3
    sc = {
        "name": "xc-move",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "profile": "roce"},
        "workload": {"jobs": [{"name": "x", "gpus": 2, "compute_ms": 5.0,
                               "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": S}]}]},
        "dynamics": {"episode_steps": 2, "decision_interval_ms": 15.0,
                     "link_failures": {"scheduled": [{"link": "leaf0-spine0", "at_step": 0, "factor": 0.5}]}},
    }  # fmt: skip
    r, det = _crosscheck_with_agent(_SWITCHING_AGENT, sc, "switch-at-one")
    (job,) = r["jobs"]
    # measured value / hand - 1 (ns-3 3.44, 7 Dec 2026), deterministic; the fluid model is the hand
    # computation (+1.6 us): 0.2% -> 0.02%
    assert job["fluid_comm_ms"] == pytest.approx(hand, rel=2e-4)  # measured +0.0073%
    assert job["ns3_comm_ms"] == pytest.approx(hand, rel=0.02)  # measured +1.53%
    assert [iv["ns3_iterations"] for iv in job["intervals"]] == [0, 1]
    assert det["resplits"] == 2  # both directions moved their unsent bytes at the boundary
    # routing.reroute: new_transfers on both sides: the transfer keeps the slow path, 2 S / C = 33.79 ms
    # (3 intervals, so that it ends within the span), and nothing moves in ns-3
    sc["dynamics"]["episode_steps"] = 3
    sc["routing"] = {"reroute": "new_transfers"}
    r, det = _crosscheck_with_agent(_SWITCHING_AGENT, sc, "switch-at-one")
    (job,) = r["jobs"]
    kept = 2 * S / C * 1e3
    # measured value / kept - 1 (ns-3 3.44, 7 Dec 2026), deterministic: 0.2% -> 0.02%, 2% -> 0.5%
    assert job["fluid_comm_ms"] == pytest.approx(kept, rel=2e-4)  # measured +0.0095%
    assert job["ns3_comm_ms"] == pytest.approx(kept, rel=5e-3)  # measured +0.035%
    assert det["resplits"] == 0


def _storage_burst(gbps: float) -> dict:
    """Two GPUs on a switch, one storage host on a 10 Gb/s link reading ``gbps`` (two flows) into them in
    interval 1 of 3 only (periodic, period 3, offset 1), intervals of 10 ms."""
    sc = _switch(gpus=2, nbytes=2e6)
    sc["fabric"]["storage"] = {"hosts": 1, "gbps": 10}
    sc["workload"]["background"] = [
        {"kind": "storage", "gbps": gbps, "pattern": "periodic", "period_steps": 3, "duration_steps": 1,
         "offset_steps": 1, "flows_per_host": 2}
    ]  # fmt: skip
    sc["dynamics"] = {"episode_steps": 3, "decision_interval_ms": 10.0}
    return sc


@needs_ns3
def test_background_burst_starts_and_stops_in_the_link_bytes() -> None:
    """A storage host on a 10 Gb/s switch reads 5 Gb/s (two flows) into two GPUs in interval 1 of 3 only
    (periodic, period 3, offset 1). Reference: the storage link carries 5 Gb/s x 10 ms = 6.25 MB of payload
    in interval 1 and nothing in intervals 0 and 2, in both simulators."""
    sc = _storage_burst(gbps=5)
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    r, det = _crosscheck_in_subprocess(sc, "ecmp", 0, None, None)
    f = build_fabric(load_scenario(sc).fabric, 8)
    up = int(f.endpoint_up[2])  # storage host 0 is endpoint n_gpus + 0 = 2
    burst = 5e9 / 8 * 10e-3
    # measured (ns-3 3.44, 7 Dec 2026), deterministic: interval 1 fluid +0 (exact), ns-3 +0.016%; interval
    # 2 fluid 0, ns-3 0.070% of the burst; the job's rel_error -0.046%. 2% / 2% / 3% -> 0.5% (ns-3's floor)
    for sim in ("fluid", "ns3"):
        moved = np.asarray(det["link_bytes"][sim])[:, up]
        assert moved[1] == pytest.approx(burst, rel=5e-3), sim
        assert moved[0] == 0 and moved[2] < 5e-3 * burst, sim
    assert det["background"][0]["on"] == [False, True, False]
    assert r["jobs"][0]["rel_error"] == pytest.approx(0, abs=5e-3)
    # per sub-flow and interval: the background's two sub-flows received the burst in interval 1, and every
    # sub-flow's intervals add up to the bytes the driver counted it received over the run
    rx = np.asarray(det["subflow_rx"])
    bg = [i for i, s in enumerate(det["subflow_log"]) if s[0] == -1]
    # measured +0.016% and 0.070% of the burst (as the link's bytes above); 2% -> 0.5% (ns-3's floor)
    assert len(bg) == 2 and rx[bg, 1].sum() == pytest.approx(burst, rel=5e-3)
    assert rx[bg, 0].sum() == 0 and rx[bg, 2].sum() < 5e-3 * burst
    np.testing.assert_allclose(rx.sum(axis=1), [s[4] for s in det["subflow_log"]], rtol=1e-12)


@needs_ns3
def test_background_source_starts_at_its_boundary_not_one_pacing_period_later() -> None:
    """A paced background sub-flow is launched when its source first turns on; its first tick finds the TCP
    handshake still open. It must write as soon as it connects, not one pacing period (send_size / rate)
    later: the fluid model's source is on from the boundary. Two flows of 0.05 Gb/s each (pacing period
    P = 14480 B / 6.25 MB/s = 2.317 ms) on in interval 1 (10-20 ms) of a 10 Gb/s switch. Hand computation:
    each sub-flow's first byte arrives within 0.1 ms of 10 ms (a handshake and one segment on an idle
    switch, about 10 us), and it writes 14480 B at connect + k P for k = 0..4 (4 P = 9.27 ms < 10 ms):
    5 x 14480 B in interval 1, nothing before. (Before this was fixed: first byte at 12.3 ms, 4 writes.)"""
    sc = _storage_burst(gbps=0.1)
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    r, det = _crosscheck_in_subprocess(sc, "ecmp", 0, None, None)
    assert det["background"][0]["on"] == [False, True, False]
    assert det["background"][0]["rate_bytes_per_s"] == pytest.approx([6.25e6, 6.25e6])
    send = CrosscheckConfig().send_size
    bg = [(i, s) for i, s in enumerate(det["subflow_log"]) if s[0] == -1]
    assert len(bg) == 2
    rx = np.asarray(det["subflow_rx"])
    for i, (_, _, _, _, got, launched, _, first) in bg:
        assert launched == pytest.approx(10e-3, abs=1e-9)
        assert 10e-3 < first < 10.1e-3, first  # measured 10.019 and 10.013 ms (ns-3 3.44, 7 Dec 2026)
        assert rx[i, 0] == 0 and rx[i, 1] == 5 * send and got == 5 * send


@needs_ns3
def test_ring_hop_waiting_for_credit_keeps_its_window() -> None:
    """A ring of 3 GPUs, one per leaf under one spine, with leaf0-spine0 at 1/16 of its rate: the hops fed
    by the slow one get their credit one 512 KiB chunk every 7 ms, longer than the 5 ms minimum RTO, so
    each chunk ends with a lone segment whose ACK the receiver may delay. With ns-3's 200 ms delayed-ACK
    timeout that ACK came after the RTO: a spurious timeout cut the window to one segment, and from then on
    every lone segment waited for the RTO (one segment per 5 ms; the xc-ingest-bursts stall). The ring
    moves at its slow hop's pace: every hop carries 2 (p-1)/p S = 4 MB, at C/16 on the slow link
    (C = 10 Gb/s times the TCP payload fraction 1448/1529): 4 MB / (C/16) = 54.1 ms, in both simulators."""
    C = 10e9 / 8 * 1448 / 1529
    S = 3e6
    hand = (4 / 3 * S) / (C / 16) * 1e3
    sc = {
        "name": "xc-credit",
        "fabric": {"topology": "spine_leaf", "leaves": 3, "spines": 1, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "profile": "roce"},
        "workload": {"jobs": [{"name": "r", "gpus": 3, "compute_ms": 1.0,
                               "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}]}]},
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 70.0,
                     "link_failures": {"scheduled": [{"link": "leaf0-spine0", "at_step": 0, "factor": 0.0625}]}},
    }  # fmt: skip
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    r, _ = _crosscheck_in_subprocess(sc, "ecmp", 0, None, None)
    (job,) = r["jobs"]
    # measured value / hand - 1 (ns-3 3.44, 7 Dec 2026), deterministic: 1% -> 0.05% (fluid), 3% -> 0.5%
    assert job["fluid_comm_ms"] == pytest.approx(hand, rel=5e-4)  # measured +0.024%
    assert job["ns3_comm_ms"] == pytest.approx(hand, rel=5e-3)  # measured +0.026%


# ---------------------------------------------------------------------- uneven splits: split_qps
_UNEVEN_AGENT = """
    import numpy as np
    from ainet_gym.agents.registry import register_agent

    class UnevenSplit:
        # job x (GPUs 0 and 2) 0.3 / 0.7 over spine 0 / spine 1; job y (GPUs 1 and 3) on spine 0 only
        name = "uneven-split"
        level = "engine"
        env_kwargs = {}

        def check(self, core):
            pass

        def reset(self, core):
            pass

        def act(self, core, obs):
            sim = core.world.sim
            split = np.zeros((sim.n_conns, core.P))
            for c in range(sim.n_conns):
                x = int(sim.conn_src[c]) in (0, 2)
                split[c, :2] = (0.3, 0.7) if x else (1.0, 0.0)
            return split

    register_agent("uneven-split", lambda arg: UnevenSplit(), overwrite=True)
"""


def _uneven(S: float) -> dict:
    """Two jobs on two leaves (2 hosts each) joined by two spines, each a sendrecv of S bytes between its
    GPU on leaf 0 and its GPU on leaf 1 (x: GPUs 0 and 2, y: GPUs 1 and 3), 1 ms of compute, one 30 ms
    interval."""
    job = {"compute_ms": 1.0, "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": S}]}
    return {
        "name": "xc-uneven",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "profile": "roce"},
        "workload": {"jobs": [{"name": "x", "gpus": 2, "placement": [0, 2], **job},
                              {"name": "y", "gpus": 2, "placement": [1, 3], **job}]},
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 30.0},
    }  # fmt: skip


def test_split_qps_rounds_the_split_and_the_fluid_time_is_hand_computed() -> None:
    """The fluid side of ``split_qps`` (no ns-3). Job x splits 0.3 / 0.7 over the two spines, job y takes
    spine 0: the leaf-spine-0 links carry y and x's part there. Fluid model (one flow per connection, its
    traffic on a link in proportion to its fraction): with x's fraction f on spine 0, both jobs move at
    C / (1 + f) (that link is the bottleneck, at level C / (1 + f) for both), so both take (1 + f) S / C.
    Raw split f = 0.3: 1.3 S / C. With split_qps = 3 the split is rounded to 1/3 and 2/3 (3 QPs: 0.9 and
    2.1 -> 0 + 1 and 2) and both take 4/3 S / C."""
    import textwrap
    from dataclasses import replace

    from ainet_gym.agents.registry import AGENTS
    from ainet_gym.checks.crosscheck import _run_fluid

    C = 10e9 / 8 * TCP_HEADER_EFFICIENCY
    S = 20e6
    exec(textwrap.dedent(_UNEVEN_AGENT), {})
    try:
        sc = load_scenario(_uneven(S))
        sc = replace(sc, fabric=replace(sc.fabric, link_efficiency=TCP_HEADER_EFFICIENCY))
        for qps, f in ((None, 0.3), (3, 1 / 3)):
            run = _run_fluid(sc, "uneven-split", 0, 1, CrosscheckConfig(fluid_repeats=0, split_qps=qps))
            (split,) = run.splits
            xs = [c for c, conn in run.conns.items() if conn.src in (0, 2)]
            assert len(xs) == 2
            for c in xs:
                assert split[c, :2] == pytest.approx([f, 1 - f], abs=1e-12)
            hand = (1 + f) * S / C
            assert run.iterations.tolist() == [1, 1]
            # measured +0.0146% (raw) and +0.0142% (split_qps 3), 7 Dec 2026; deterministic: 0.2% -> 0.05%
            assert (run.comm_sum_s / run.iterations) == pytest.approx([hand, hand], rel=5e-4)
    finally:
        AGENTS.pop("uneven-split", None)
    with pytest.raises(CrosscheckError, match=r"split_qps = 0: allowed: None .* an integer in \[1, 64\]"):
        crosscheck(_uneven(S), config=CrosscheckConfig(split_qps=0))
    with pytest.raises(CrosscheckError, match=r"split_qps = True: allowed"):
        crosscheck(_uneven(S), config=CrosscheckConfig(split_qps=True))  # type: ignore[arg-type]


@needs_ns3
def test_uneven_split_shares_links_per_connection_unless_split_qps() -> None:
    """The case of the previous test in ns-3 (S = 20 MB, C = 10 Gb/s x 1448/1529). Fluid model: both jobs
    4/3 S / C = 22.53 ms (split rounded to 1/3, 2/3 with split_qps = 3; 1.3 S / C with the raw split).

    Default replay (one TCP connection per path, x's 0.3 part on spine 0 a connection of its own): on the
    leaf-spine-0 link x's part and y get C/2 each, x's 0.7 part C/2 through x's NIC; x's spine-0 part ends
    at 0.6 S / C, then its 0.7 part has 0.7 S - 0.3 S left at the whole NIC: x ends at S / C = 16.90 ms,
    23% before the fluid model's 1.3 S / C (the fluid model carries x's part as 0.3 of one flow).

    ``split_qps = 3``: x is 3 QPs (1 on spine 0, 2 on spine 1), y 3 QPs on spine 0: the leaf-spine-0 link
    shares C over 4 QPs, C/4 each, so y moves at 3C/4 and x's spine-0 QP, S/3 at C/4, ends at 4/3 S / C
    with y (x's spine-1 QPs finish earlier): the fluid model's 4/3 S / C for both, within 2%."""
    C = 10e9 / 8 * TCP_HEADER_EFFICIENCY
    S = 20e6
    sc = _uneven(S)
    r, det = _crosscheck_with_agent(_UNEVEN_AGENT, sc, "uneven-split")
    x, y = r["jobs"]
    # measured value / hand - 1 (ns-3 3.44, 7 Dec 2026), deterministic: 0.2% -> 0.05% (fluid), 2% -> 0.5%
    assert x["fluid_comm_ms"] == pytest.approx(1.3 * S / C * 1e3, rel=5e-4)  # measured +0.015%
    assert x["ns3_comm_ms"] == pytest.approx(S / C * 1e3, rel=5e-3)  # +0.14%; per connection: x is faster
    r, det = _crosscheck_with_agent(_UNEVEN_AGENT, sc, "uneven-split", {"split_qps": 3})
    hand = 4 / 3 * S / C * 1e3
    for job in r["jobs"]:
        assert job["fluid_comm_ms"] == pytest.approx(hand, rel=5e-4)  # measured x, y +0.014%
        assert job["ns3_comm_ms"] == pytest.approx(hand, rel=5e-3)  # measured x +0.036%, y +0.086%
    # 3 TCP connections per connection and direction: x 1 + 2, y 3 (4 transfers of the first iterations)
    first = {i for i, t in enumerate(det["transfer_log"]) if t[2] < 1.5e-3}
    subs = [s for s in det["subflow_log"] if s[0] in first]
    assert len(subs) == 12
    assert sorted(
        s[2] for s in subs if s[1] in [int(c) for c, e in det["conn_ends"].items() if e[0] in (0, 2)]
    ) == [0, 0, 1, 1, 1, 1]


@needs_ns3
def test_a_ring_step_split_over_qps_reaches_the_next_hop_whole() -> None:
    """4 GPUs on one 10 Gb/s switch, ring AllReduce of 2 MB, every connection as 6 QPs: a ring step is
    S / p = 500,000 bytes, less than a 512 KiB chunk, so each hop may send one step beyond what its
    predecessor delivered, and a step's share per QP is 83,333.3 bytes. Rounded down, the six shares added
    up to 499,998 bytes, 2 short of the step the next hop waits for, and the ring stalled after its first
    step (no iteration in ns-3). Every hop moves 2 (p-1)/p S = 3 MB at C = 10 Gb/s times the TCP payload
    fraction 1448/1529, as in the smallest case."""
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    closed = 3e6 * 8 / (10e9 * 1448 / 1529) * 1e3
    r, _ = _crosscheck_in_subprocess(_switch(4, 2e6), "ecmp", 0, None, CrosscheckConfig(split_qps=6))
    (job,) = r["jobs"]
    # measured value / closed - 1 (ns-3 3.44, 7 Dec 2026), deterministic; 1/3-1/4 of the tolerances: kept
    assert job["fluid_comm_ms"] == pytest.approx(closed, rel=0.01)  # measured +0.38% (as the smallest case)
    assert job["ns3_comm_ms"] == pytest.approx(closed, rel=0.03)  # measured +0.87%


@needs_ns3
def test_iteration_logs_agree_on_a_static_case_and_give_the_matched_figures() -> None:
    """4 GPUs on one 10 Gb/s switch, a ring AllReduce of 2 MB after 1 ms of compute, 3 intervals of 8 ms:
    every iteration communicates 3 MB (2.53 ms at the TCP payload fraction), so both simulators complete
    6 iterations, 2 per interval. ns-3's per-iteration log sums to its per-interval figures and its ends
    fall in the intervals it counted them in; both logs' comm times are the closed form's within the
    smallest case's tolerances; and the job's matched figures are the logs' by hand: the means over the
    first ``matched_iterations``, their relative error, and ns-3's end of the last one less the fluid's."""
    sc = _switch(4, 2e6)
    sc["dynamics"]["episode_steps"] = 3
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    out, det = _crosscheck_in_subprocess(sc, "ecmp", 0, 3, CrosscheckConfig(fluid_repeats=0))
    (job,) = out["jobs"]
    closed = 3e6 * 8 / (10e9 * 1448 / 1529)
    (fl,), (pk,) = det["iteration_log"]["fluid"], det["iteration_log"]["ns3"]
    assert job["fluid_iterations"] == job["ns3_iterations"] == job["matched_iterations"] == 6
    assert len(fl["comm_s"]) == len(pk["comm_s"]) == 6 and None not in pk["end_s"] + pk["comm_s"]
    # ns-3's log against its own per-interval sums and counts
    per = np.histogram(pk["end_s"], bins=np.arange(4) * 8e-3)[0]
    assert per.tolist() == [iv["ns3_iterations"] for iv in job["intervals"]] == [2, 2, 2]
    for k, iv in enumerate(job["intervals"]):
        in_k = [c for c, e in zip(pk["comm_s"], pk["end_s"]) if 8e-3 * k < e <= 8e-3 * (k + 1)]
        assert np.mean(in_k) * 1e3 == pytest.approx(iv["ns3_comm_ms"], rel=1e-12)
    assert np.diff(pk["end_s"]).min() > 0 and pk["comm_cum_s"] == pytest.approx(
        np.cumsum(pk["comm_s"]).tolist()
    )
    # both sides' iterations take the closed form's time (the smallest case's tolerances); measured (ns-3
    # 3.44, 7 Dec 2026): every ns-3 iteration +0.81%, every fluid one +0.38%, as the smallest case
    assert pk["comm_s"] == pytest.approx([closed] * 6, rel=0.015)
    assert None not in fl["comm_s"] + fl["end_s"]  # two iterations per interval: the fluid's log is whole
    assert fl["comm_s"] == pytest.approx([closed] * 6, rel=0.01)
    # the matched figures by hand from the two logs
    m = job["matched_iterations"]
    f_ms, p_ms = fl["comm_cum_s"][m - 1] / m * 1e3, float(np.mean(pk["comm_s"][:m])) * 1e3
    assert job["matched_comm_ms"]["fluid"] == pytest.approx(f_ms, rel=1e-12)
    assert job["matched_comm_ms"]["ns3"] == pytest.approx(p_ms, rel=1e-12)
    assert job["matched_rel_error"] == pytest.approx((f_ms - p_ms) / p_ms, rel=1e-9)
    assert job["lag_ms"] == pytest.approx((pk["end_s"][m - 1] - fl["end_s"][m - 1]) * 1e3, rel=1e-12)
    assert abs(job["matched_rel_error"]) < 0.015 and job["matched_rel_error"] == pytest.approx(  # -0.43%
        job["rel_error"]
    )
    # the lag is the comm times' difference summed: the same compute on both sides
    # (measured 3.5e-15 ms apart, float rounding: abs 1e-5 -> 1e-7 ms)
    assert job["lag_ms"] == pytest.approx((pk["comm_cum_s"][m - 1] - fl["comm_cum_s"][m - 1]) * 1e3, abs=1e-7)
    # the matched step time (issue-27zzf): the counts agree, so it is each side's mean step over all iterations
    assert job["matched_step_ms"]["fluid"] == pytest.approx(job["fluid_step_ms"], rel=1e-12)
    assert job["matched_step_ms"]["ns3"] == pytest.approx(job["ns3_step_ms"], rel=1e-12)
    assert job["matched_step_rel_error"] == pytest.approx(job["step_rel_error"], rel=1e-9, abs=1e-12)
    # the text report of this real result (issue-27zzc): one row with the matched figures beside rel_error,
    # formatted from the dict, no iteration-gap mark (6/6) and so no legend
    from ainet_gym.checks.crosscheck.report import text_report

    text = text_report(out)
    row = next(x for x in text.splitlines() if x.strip().startswith(job["name"])).split()
    assert row == [
        job["name"], f"{job['fluid_comm_ms']:.3f}", f"{job['ns3_comm_ms']:.3f}", f"{100 * job['rel_error']:+.2f}%",
        "6/6", f"{f_ms:.3f}", f"{p_ms:.3f}", f"{100 * job['matched_rel_error']:+.2f}%", f"{job['lag_ms']:+.3f}",
    ]  # fmt: skip
    assert "fluid+N" not in text and len([x for x in text.splitlines() if "/" in x and "|" in x]) == 1
