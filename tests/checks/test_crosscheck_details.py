""":func:`crosscheck` without ns-3: the ``details`` it fills are exactly the documented keys of
:class:`CrosscheckDetails`. The ns-3 run is replaced by a function of the fluid run (``fake_ns3``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ainet_gym.checks.crosscheck import CrosscheckConfig, crosscheck

#: the cases compared: (scenario, policy, seed, steps, config changes)
CASES: dict[str, tuple[str, str, int, int | None, dict[str, Any]]] = {
    "two-jobs-spray": ("xc-two-jobs", "spray", 1, None, {}),
}


def fake_ns3(run: Any, cfg: Any) -> dict[str, Any]:
    """What ``run_ns3`` returns, made from the fluid run: its figures scaled, the logs fixed."""
    return {
        "timed_out": False,
        "iterations": run.iterations + 1,
        "comm_sum_s": run.comm_sum_s * 1.25 + 1e-3,
        "step_sum_s": run.step_sum_s * 1.1 + 2e-3,
        "step_iterations": run.step_iterations + (np.arange(run.step_iterations.shape[0])[:, None] % 2),
        "step_comm_sum_s": run.step_comm_sum_s * 1.5 + 2e-3,
        "iter_comm_s": [
            np.full(n + 1, (c * 1.25 + 1e-3) / (n + 1)) for n, c in zip(run.iterations, run.comm_sum_s)
        ],
        "iter_end_s": [0.01 * np.arange(1, n + 2) for n in run.iterations],
        "wall_s": 2.5,
        "cpu_s": 2.25,
        "transfers": 7,
        "resplits": 3,
        "routing": f"fake (fq_flows {cfg.fq_flows})",
        "transfer_log": [[0, 1000, 0.0, 0.5, 1]],
        "subflow_log": [[0, 1, 0, 1000, 1000, 0.0, 0.5, 0.1]],
        "subflow_rx": [[1000] + [0] * (len(run.splits) - 1)],
        "fq_buckets": [[1, 2]],
        "flow_buckets": [[3, 4]],
        "link_bytes": run.link_bytes * 0.9,
        "events": 11,
        "payload_bytes": 1.0e6,
    }


def crosscheck_summary(case: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The result of ``case`` without its fluid wall time, the config ns-3 was given, and its ``details``
    (fluid CPU and wall times left out, the large arrays by sums)."""
    import ainet_gym.checks.crosscheck.compare as compare

    name, policy, seed, steps, changes = CASES[case]
    seen: dict[str, Any] = {}

    def ns3(run: Any, cfg: Any) -> dict[str, Any]:
        seen["cfg"] = cfg
        return fake_ns3(run, cfg)

    monkeypatch.setattr(compare, "import_ns", lambda: None)
    monkeypatch.setattr(compare, "run_ns3", ns3)
    det: dict[str, Any] = {}
    cfg = CrosscheckConfig(fluid_repeats=0, **changes)
    out = crosscheck(name, policy=policy, seed=seed, steps=steps, config=cfg, details=det)
    assert seen["cfg"] == cfg and out.pop("fluid_wall_s") >= 0
    for k in ("fluid_cpu_s", "fluid_first_wall_s"):
        assert det.pop(k) >= 0
    lb = det.pop("link_bytes")
    det["link_bytes"] = {k: np.asarray(v).sum(axis=1).tolist() for k, v in lb.items()}
    det["paths"] = {str(c): [len(p), sum(map(sum, p))] for c, p in det["paths"].items()}
    det["conn_ends"] = {str(c): list(e) for c, e in det["conn_ends"].items()}
    det["splits"] = [np.asarray(s).sum(axis=0).round(12).tolist() for s in det["splits"]]
    det["background"] = [{**b, "conns": list(b["conns"])} for b in det["background"]]
    return {"result": out, "details": det}


def test_details_hold_the_documented_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # every key of CrosscheckDetails (the contract of ``details``) is filled, and no other
    from ainet_gym.checks.crosscheck import CrosscheckDetails

    det = crosscheck_summary("two-jobs-spray", monkeypatch)["details"]
    assert set(det) | {"fluid_cpu_s", "fluid_first_wall_s"} == set(CrosscheckDetails.__annotations__)
