"""Characterisation of :func:`crosscheck` without ns-3 (issue 31: its split into steps of one concern must
not change its JSON contract or its ``details``). The ns-3 run is replaced by a function of the fluid run,
so the result is a function of the fluid run and of how :func:`crosscheck` assembles it; the expected values
were recorded from main at 21b61d2, before the split (``runs31zd/record_crosscheck.py`` prints them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _recorded import approx_tree

from ainet_gym.checks.crosscheck import CrosscheckConfig, CrosscheckDetails, crosscheck

#: the cases compared: (scenario, policy, seed, steps, config changes)
CASES: dict[str, tuple[str, str, int, int | None, dict[str, Any]]] = {
    "two-jobs-spray": ("xc-two-jobs", "spray", 1, None, {}),
    "ingest-lp-bg": ("xc-ingest-bursts", "lp+bg", 2, 3, {"header_efficiency": 0.9}),
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


#: the summaries of the cases on main at 21b61d2 (``runs31zd/record_crosscheck.py``), before the split
# fmt: off
RECORDED: dict[str, Any] = {"two-jobs-spray": {"result": {"scenario": "xc-two-jobs",
                               "policy": "spray",
                               "seed": 1,
                               "steps": 2,
                               "jobs": [{"name": "a",
                                         "fluid_comm_ms": 10.156216574585635,
                                         "ns3_comm_ms": 10.356216574585636,
                                         "rel_error": -0.019312071986868747,
                                         "fluid_step_ms": 11.156216574585635,
                                         "ns3_step_ms": 10.21747058563536,
                                         "step_rel_error": 0.09187655409256075,
                                         "intervals": [{"step": 0,
                                                        "fluid_iterations": 2,
                                                        "ns3_iterations": 2,
                                                        "fluid_comm_ms": 10.156216574585635,
                                                        "ns3_comm_ms": 16.234324861878452,
                                                        "rel_error": -0.3743985868833678},
                                                       {"step": 1,
                                                        "fluid_iterations": 2,
                                                        "ns3_iterations": 3,
                                                        "fluid_comm_ms": 10.156216574585633,
                                                        "ns3_comm_ms": 10.8228832412523,
                                                        "rel_error": -0.06159788032505179}]},
                                        {"name": "b",
                                         "fluid_comm_ms": 10.156216574585635,
                                         "ns3_comm_ms": 9.771453038674034,
                                         "rel_error": 0.03937628665754837,
                                         "fluid_step_ms": 13.156216574585635,
                                         "ns3_step_ms": 11.35387867403315,
                                         "step_rel_error": 0.15874204334017736,
                                         "intervals": [{"step": 0,
                                                        "fluid_iterations": 1,
                                                        "ns3_iterations": 1,
                                                        "fluid_comm_ms": 10.156216574585635,
                                                        "ns3_comm_ms": 17.234324861878452,
                                                        "rel_error": -0.4106983211712153},
                                                       {"step": 1,
                                                        "fluid_iterations": 2,
                                                        "ns3_iterations": 3,
                                                        "fluid_comm_ms": 10.156216574585635,
                                                        "ns3_comm_ms": 10.8228832412523,
                                                        "rel_error": -0.061597880325051625}]}],
                               "ns3_wall_s": 2.5},
                    "details": {"transfer_mb": 12.0,
                                "ns3_cpu_s": 2.25,
                                "fluid_iterations": [4, 3],
                                "ns3_iterations": [5, 4],
                                "ns3_transfers": 7,
                                "resplits": 3,
                                "routing": "fake (fq_flows 65536)",
                                "paths": {"0": [2, 104],
                                          "1": [2, 152],
                                          "2": [2, 200],
                                          "3": [2, 152],
                                          "4": [2, 120],
                                          "5": [2, 168],
                                          "6": [2, 216],
                                          "7": [2, 168]},
                                "conn_ends": {"0": [0, 2],
                                              "1": [2, 4],
                                              "2": [4, 6],
                                              "3": [6, 0],
                                              "4": [1, 3],
                                              "5": [3, 5],
                                              "6": [5, 7],
                                              "7": [7, 1]},
                                "splits": [[4.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                                           [4.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
                                "transfer_log": [[0, 1000, 0.0, 0.5, 1]],
                                "subflow_log": [[0, 1, 0, 1000, 1000, 0.0, 0.5, 0.1]],
                                "subflow_rx": [[1000, 0]],
                                "fq_buckets": [[1, 2]],
                                "flow_buckets": [[3, 4]],
                                "background": [],
                                "ns3_events": 11,
                                "ns3_bytes": 1000000.0,
                                "ns3_link_bytes": 1411908528.9731855,
                                "header_efficiency": 0.94702419882276,
                                "link_bytes": {"fluid": [774741556.5729235, 794045697.8417268],
                                               "ns3": [697267400.9156313, 714641128.0575541]}}},
 "ingest-lp-bg": {"result": {"scenario": "xc-ingest-bursts",
                             "policy": "lp+bg",
                             "seed": 2,
                             "steps": 3,
                             "jobs": [{"name": "llm-a",
                                       "fluid_comm_ms": 18.53145021556115,
                                       "ns3_comm_ms": 20.7016113506235,
                                       "rel_error": -0.10483054185040475,
                                       "fluid_step_ms": 40.531450215561144,
                                       "ns3_step_ms": 39.85297354410423,
                                       "step_rel_error": 0.017024493058367673,
                                       "intervals": [{"step": 0,
                                                      "fluid_iterations": 3,
                                                      "ns3_iterations": 3,
                                                      "fluid_comm_ms": 15.054375307638507,
                                                      "ns3_comm_ms": 23.248229628124427,
                                                      "rel_error": -0.3524506791077737},
                                                     {"step": 1,
                                                      "fluid_iterations": 3,
                                                      "ns3_iterations": 4,
                                                      "fluid_comm_ms": 16.694336124721552,
                                                      "ns3_comm_ms": 19.281128140311747,
                                                      "rel_error": -0.1341618600719683},
                                                     {"step": 2,
                                                      "fluid_iterations": 2,
                                                      "ns3_iterations": 2,
                                                      "fluid_comm_ms": 26.50273371370451,
                                                      "ns3_comm_ms": 40.75410057055677,
                                                      "rel_error": -0.3496916054417432}]},
                                      {"name": "llm-b",
                                       "fluid_comm_ms": 14.629997925651486,
                                       "ns3_comm_ms": 14.829997925651483,
                                       "rel_error": -0.013486178555295481,
                                       "fluid_step_ms": 82.62999792565148,
                                       "ns3_step_ms": 73.11439817457331,
                                       "step_rel_error": 0.13014672880652078,
                                       "intervals": [{"step": 0,
                                                      "fluid_iterations": 1,
                                                      "ns3_iterations": 1,
                                                      "fluid_comm_ms": 11.89015925624884,
                                                      "ns3_comm_ms": 19.83523888437326,
                                                      "rel_error": -0.40055376567124534},
                                                     {"step": 1,
                                                      "fluid_iterations": 1,
                                                      "ns3_iterations": 2,
                                                      "fluid_comm_ms": 15.335486154547551,
                                                      "ns3_comm_ms": 12.501614615910665,
                                                      "rel_error": 0.22668044294296594},
                                                     {"step": 2,
                                                      "fluid_iterations": 2,
                                                      "ns3_iterations": 2,
                                                      "fluid_comm_ms": 15.647173145904775,
                                                      "ns3_comm_ms": 24.470759718857163,
                                                      "rel_error": -0.36057673216221947}]},
                                      {"name": "llm-c",
                                       "fluid_comm_ms": 17.93065233372519,
                                       "ns3_comm_ms": 15.27554361143766,
                                       "rel_error": 0.17381435252487523,
                                       "fluid_step_ms": 128.93065233372522,
                                       "ns3_step_ms": 95.21581171139849,
                                       "step_rel_error": 0.35408867515111103,
                                       "intervals": [{"step": 0,
                                                      "fluid_iterations": 0,
                                                      "ns3_iterations": 0,
                                                      "fluid_comm_ms": None,
                                                      "ns3_comm_ms": None,
                                                      "rel_error": None},
                                                     {"step": 1,
                                                      "fluid_iterations": 1,
                                                      "ns3_iterations": 2,
                                                      "fluid_comm_ms": 22.221738004546825,
                                                      "ns3_comm_ms": 17.66630350341012,
                                                      "rel_error": 0.25786008376100705},
                                                     {"step": 2,
                                                      "fluid_iterations": 1,
                                                      "ns3_iterations": 1,
                                                      "fluid_comm_ms": 13.639566662903558,
                                                      "ns3_comm_ms": 22.45934999435534,
                                                      "rel_error": -0.39269984811085085}]}],
                             "ns3_wall_s": 2.5},
                  "details": {"transfer_mb": 10.05,
                              "ns3_cpu_s": 2.25,
                              "fluid_iterations": [8, 4, 2],
                              "ns3_iterations": [9, 5, 3],
                              "ns3_transfers": 7,
                              "resplits": 3,
                              "routing": "fake (fq_flows 65536)",
                              "paths": {"0": [2, 120],
                                        "1": [2, 200],
                                        "2": [2, 280],
                                        "3": [2, 208],
                                        "4": [2, 136],
                                        "5": [2, 216],
                                        "6": [2, 296],
                                        "7": [2, 208],
                                        "8": [2, 152],
                                        "9": [2, 232],
                                        "10": [2, 312],
                                        "11": [2, 232],
                                        "12": [2, 168],
                                        "13": [2, 248],
                                        "14": [2, 328],
                                        "15": [2, 248],
                                        "16": [1, 99],
                                        "17": [2, 244],
                                        "18": [2, 284],
                                        "19": [2, 324],
                                        "20": [1, 103],
                                        "21": [2, 252],
                                        "22": [2, 292],
                                        "23": [2, 332],
                                        "24": [1, 101],
                                        "25": [2, 248],
                                        "26": [2, 288],
                                        "27": [2, 328],
                                        "28": [1, 105],
                                        "29": [2, 256],
                                        "30": [2, 296],
                                        "31": [2, 336]},
                              "conn_ends": {"0": [0, 4],
                                            "1": [4, 8],
                                            "2": [8, 12],
                                            "3": [12, 1],
                                            "4": [1, 5],
                                            "5": [5, 9],
                                            "6": [9, 13],
                                            "7": [13, 0],
                                            "8": [2, 6],
                                            "9": [6, 10],
                                            "10": [10, 14],
                                            "11": [14, 2],
                                            "12": [3, 7],
                                            "13": [7, 11],
                                            "14": [11, 15],
                                            "15": [15, 3],
                                            "16": [16, 0],
                                            "17": [16, 4],
                                            "18": [16, 8],
                                            "19": [16, 12],
                                            "20": [16, 1],
                                            "21": [16, 5],
                                            "22": [16, 9],
                                            "23": [16, 13],
                                            "24": [17, 0],
                                            "25": [17, 4],
                                            "26": [17, 8],
                                            "27": [17, 12],
                                            "28": [17, 1],
                                            "29": [17, 5],
                                            "30": [17, 9],
                                            "31": [17, 13]},
                              "splits": [[21.79888750388, 10.20111249612, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                                         [21.79888750388, 10.20111249612, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                                         [21.0, 11.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
                              "transfer_log": [[0, 1000, 0.0, 0.5, 1]],
                              "subflow_log": [[0, 1, 0, 1000, 1000, 0.0, 0.5, 0.1]],
                              "subflow_rx": [[1000, 0, 0]],
                              "fq_buckets": [[1, 2]],
                              "flow_buckets": [[3, 4]],
                              "background": [{"name": "background0:storage",
                                              "conns": [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                                                        31],
                                              "on": [False, False, False],
                                              "rate_bytes_per_s": [78125000.0, 78125000.0, 78125000.0, 78125000.0,
                                                                   78125000.0, 78125000.0, 78125000.0, 78125000.0,
                                                                   78125000.0, 78125000.0, 78125000.0, 78125000.0,
                                                                   78125000.0, 78125000.0, 78125000.0,
                                                                   78125000.0]}],
                              "ns3_events": 11,
                              "ns3_bytes": 1000000.0,
                              "ns3_link_bytes": 3304123719.047457,
                              "header_efficiency": 0.9,
                              "link_bytes": {"fluid": [1135200000.0, 1320392782.6056647, 1215655794.1137323],
                                             "ns3": [1021680000.0, 1188353504.3450983, 1094090214.7023592]}}}}
# fmt: on


@pytest.mark.parametrize("case", sorted(CASES))
def test_crosscheck_result_and_details_are_those_recorded(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert crosscheck_summary(case, monkeypatch) == approx_tree(RECORDED[case])


def test_details_hold_the_documented_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # every key of CrosscheckDetails (the contract of ``details``) is filled, and no other
    det = crosscheck_summary("two-jobs-spray", monkeypatch)["details"]
    assert set(det) | {"fluid_cpu_s", "fluid_first_wall_s"} == set(CrosscheckDetails.__annotations__)
