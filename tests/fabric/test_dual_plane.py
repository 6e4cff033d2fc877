"""The dual-plane fabric (``scenarios/dual-plane.yaml``, a graph fabric whose NICs have a 200G port into each of
two planes): spraying uses both ports, losing a plane halves the rate and stalls nothing, and its GraphML
export gives the same results (to 1e-12)."""

from __future__ import annotations

import copy

import pytest
from _scenarios import S, as_graph_scenario, assert_close_nested, bps, step_world

from ainet_gym.cli import main as cli_main
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.sim.simulate import simulate


def test_dual_plane_example_claim():
    """scenarios/dual-plane.yaml: spraying uses both 200G ports of every NIC (the ideal 400 Gb/s); static
    ECMP puts a connection on one port, so at most 200 Gb/s."""
    alpha = 4 * 0.25e-6  # one step over gpu -> tor -> spine -> tor -> gpu
    spray = simulate("dual-plane", policy="spray", steps=3, seed=0)["steps"]
    comm = [j["comm_time_ms"] for st in spray for j in st["jobs"] if j["comm_time_ms"] is not None]
    assert comm and all(c == pytest.approx((alpha + S / bps(400.0)) * 1e3, rel=1e-9) for c in comm)
    assert spray[0]["jobs"][0]["ideal_step_time_ms"] == pytest.approx(
        20.0 + (2 * 0.25e-6 + S / bps(400.0)) * 1e3
    )
    for seed in range(3):
        ecmp = simulate("dual-plane", policy="ecmp", steps=6, seed=seed)["steps"]
        c = [j["comm_time_ms"] for st in ecmp for j in st["jobs"] if j["comm_time_ms"] is not None]
        assert c and all(x >= S / bps(200.0) * 1e3 for x in c)
    f = build_fabric(load_scenario("dual-plane").fabric, max_paths=16)
    assert f.endpoint_ports is not None and len(f.paths(0, 16)) == 16
    planes = {f.node_names[int(f.link_dst[p[0]])][:4] for p in f.paths(0, 16)}
    assert planes == {"tora", "torb"}  # both planes, never across


def test_losing_a_plane_halves_the_rate_and_stalls_nothing(tmp_path):
    sc = load_scenario("dual-plane")
    d = copy.deepcopy(sc.raw)
    d["dynamics"] = {"decision_interval_ms": 200.0, "link_failures": {"scheduled": [{"link": f"tora{s}-spinea{k}", "at_step": 0}
                                                    for s in range(2) for k in range(8)]}}  # fmt: skip
    for policy in ("spray", "ecmp"):
        w, res = step_world(d, policy=policy, steps=3)
        assert res.stalled_transfers[0] == 0 and res.failed_links[0] == 32
        if policy == "spray":  # every live path is in plane b: one 200G port per GPU, evenly spread
            assert res.comm_time_s[0, 0] == pytest.approx(4 * 0.25e-6 + S / bps(200.0), rel=1e-9)


def test_dual_plane_export_round_trip(tmp_path):
    out = tmp_path / "dp.graphml"
    assert cli_main(["export-fabric", "dual-plane", "--graphml", str(out)]) == 0
    raw = as_graph_scenario("dual-plane", {"file": str(out)})
    for policy in ("ecmp", "spray"):
        a = simulate("dual-plane", policy=policy, steps=2, seed=1)
        b = simulate(raw, policy=policy, steps=2, seed=1)
        a.pop("scenario"), b.pop("scenario")
        assert_close_nested(a, b)
