"""What ``simulate`` records per interval: link and flow records that add up to the bytes of each tier (also
under job churn), the CLI's ``--links`` and ``--flows``, and the per-iteration GPU utilisation beside the
interval's (compute / step time, the step time from the closed form of a ring)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout

import pytest
from _scenarios import S, bps, one_job

from ainet_gym.cli import main as cli_main
from ainet_gym.sim.simulate import simulate


@pytest.mark.parametrize(("name", "policy"), [("spine-leaf-2to1", "ecmp"), ("clos3-2pods", "spray"),
                                              ("rail-optimized-hierarchical", "ecmp")])  # fmt: skip
def test_link_and_flow_records_add_up_to_the_tier_bytes(name, policy):
    out = simulate(name, policy=policy, steps=2, seed=2, links=True, flows=True)
    for st in out["steps"]:
        links, flows = st["links"], st["flows"]
        tier_of = {lk["id"]: lk["tier"] for lk in links}
        by_links: dict[str, float] = {}
        for lk in links:
            by_links[lk["tier"]] = by_links.get(lk["tier"], 0.0) + lk["bytes"]
            assert 0.0 <= lk["mean_utilization"] <= lk["peak_utilization"] + 1e-12
            assert lk["peak_utilization"] <= 1.0 + 1e-9
        by_flows: dict[str, float] = dict.fromkeys(st["tier_bytes"], 0.0)
        for fl in flows:
            assert math.isclose(sum(fl["split"]), 1.0, rel_tol=1e-12)
            for path, share in zip(fl["paths"], fl["split"]):
                for lk in path:
                    by_flows[tier_of[lk]] += fl["bytes"] * share
            assert fl["mean_rate_gbps"] == pytest.approx(
                fl["bytes"] * 8e-9 / (out["decision_interval_ms"] * 1e-3)
            )
        for tier, total in st["tier_bytes"].items():
            assert by_links[tier] == pytest.approx(total, rel=1e-12, abs=1.0)
            assert by_flows[tier] == pytest.approx(total, rel=1e-7, abs=1.0)
        assert st["throughput_gbps"] * out["decision_interval_ms"] * 1e-3 / 8e-9 == pytest.approx(
            st["tier_bytes"]["nic"] / 2, rel=1e-12
        )


def test_cli_simulate_links_and_flows():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["simulate", "clos3-2pods", "--policy", "spray", "--steps", "2", "--json", "--links",
                         "--flows", "--link-windows", "4"]) == 0  # fmt: skip
    st = json.loads(buf.getvalue())["steps"][1]
    assert set(st["links"][0]) == {"id", "src", "dst", "tier", "capacity_gbps", "bytes", "mean_utilization",
                                   "peak_utilization"}  # fmt: skip
    assert set(st["flows"][0]) == {"job", "src_gpu", "dst_gpu", "paths", "split", "bytes", "mean_rate_gbps"}
    assert len(st["flows"]) == 64 and len(st["flows"][0]["paths"]) == 64
    # step 1 holds 40 ms of the cross-pod transfers (each at 200 Gb/s) in its 40 ms interval... or part
    core = [lk for lk in st["links"] if lk["tier"] == "agg_core"]
    assert max(lk["peak_utilization"] for lk in core) == pytest.approx(
        1.0, rel=1e-9
    )  # saturated while it runs
    assert st["jobs"][0]["iteration_gpu_utilization"] == pytest.approx(20.0 / st["jobs"][0]["step_time_ms"])


def test_per_iteration_gpu_utilization_next_to_the_interval_one():
    """A 1,000 ms interval counts the partial iterations at its ends; the per-iteration figure is
    compute / step time."""
    expected_comm = 2 * 15 / 16 * S / bps(400.0)
    d = one_job({"topology": "single_switch", "hosts": 16, "gpus_per_host": 1},
                {"gpus": 16, "compute_ms": 100.0, "collectives": [{"op": "allreduce", "bytes": S}]}, 1000.0)  # fmt: skip
    st = simulate(d, steps=1)["steps"][0]["jobs"][0]
    step_ms = 100.0 + expected_comm * 1e3
    assert st["step_time_ms"] == pytest.approx(step_ms, rel=1e-9)
    assert st["iteration_gpu_utilization"] == pytest.approx(100.0 / step_ms, rel=1e-9)
    n = math.floor(1000.0 / step_ms)  # full iterations, then a partial one that computes first
    partial = 1000.0 - n * step_ms
    assert st["gpu_utilization"] == pytest.approx((n * 100.0 + min(partial, 100.0)) / 1000.0, rel=1e-9)


def test_flow_records_under_churn_describe_the_jobs_that_ran():
    # jobs arrive and leave at interval ends; the flow records of an interval must be those of the jobs
    # that ran in it (they add up to the tier bytes and name only that interval's jobs), not of the
    # jobs restacked after it (a regression: IndexError at step 4 of this rollout)
    # (11 steps: jobs arrive or leave at 6 of them on seed 0; every step's flow records are checked in Python)
    out = simulate("multi-tenant-churn", policy="ecmp", steps=11, seed=0, links=True, flows=True)
    changed = 0
    prev: set[str] = set()
    for st in out["steps"]:
        names = {j["name"] for j in st["jobs"]}
        changed += names != prev
        prev = names
        tier_of = {lk["id"]: lk["tier"] for lk in st["links"]}
        by_flows: dict[str, float] = dict.fromkeys(st["tier_bytes"], 0.0)
        for fl in st["flows"]:
            assert fl["job"] in names
            for path, share in zip(fl["paths"], fl["split"]):
                for lk in path:
                    by_flows[tier_of[lk]] += fl["bytes"] * share
        for tier, total in st["tier_bytes"].items():
            assert by_flows[tier] == pytest.approx(total, rel=1e-7, abs=1.0)
    assert changed > 3  # the rollout really had arrivals and departures
