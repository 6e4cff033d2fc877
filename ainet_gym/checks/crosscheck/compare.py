"""The cross-check of one scenario under one policy and seed (:func:`crosscheck`): the fluid run, its
replay in ns-3, and the comparison of each job's communication and step time, over the span and per
interval; :func:`crosscheck_in_subprocess` runs it in a fresh interpreter (ns-3 keeps global state)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from ainet_gym.checks.crosscheck.config import (
    CrosscheckConfig,
    CrosscheckError,
    check_config,
    check_supported,
)
from ainet_gym.checks.crosscheck.fluid import FluidRun, IterationLog, estimated_bytes, run_fluid
from ainet_gym.checks.crosscheck.ns3 import import_ns, run_ns3
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario


def resolve_scenario(scenario: str | os.PathLike | dict | Scenario) -> str | os.PathLike | dict | Scenario:
    """A bare name that is not a shipped scenario may name a cross-check case (scenarios/crosscheck/)."""
    if isinstance(scenario, str) and "/" not in scenario and not Path(scenario).is_file():
        from ainet_gym.scenario.loader import scenarios_dir

        d = scenarios_dir()
        own = d / "crosscheck" / f"{scenario.removesuffix('.yaml')}.yaml"
        if not (d / f"{scenario.removesuffix('.yaml')}.yaml").is_file() and own.is_file():
            return own
    return scenario


def _ms(total_s: float, n: int) -> float | None:
    """Mean in ms of ``n`` values summing to ``total_s`` seconds (None when there are none)."""
    return float(total_s / n * 1e3) if n > 0 else None


def _rel(a: float | None, b: float | None) -> float | None:
    """``(a - b) / b``, None unless both are there and ``b > 0``."""
    return (a - b) / b if a is not None and b is not None and b > 0 else None


def _num(x: float) -> float | None:
    """``x`` as a float, None where it is NaN (unknown)."""
    return None if np.isnan(x) else float(x)


def _matched_step_ms(log: IterationLog, step_sum_s: float | None, m: int) -> float | None:
    """The mean step time (ms) of ``log``'s first ``m`` iterations, from the step times of all of them
    summed (``step_sum_s``): a job's iterations run back to back (each begins where the one before ended),
    so the ones after the ``m``-th take ``end_s[-1] - end_s[m - 1]`` of the sum. None without the sum or
    where the log does not know an end."""
    if step_sum_s is None or m == 0:
        return None
    last, cut = _num(log.end_s[-1]), _num(log.end_s[m - 1])
    if last is None or cut is None:
        return None
    return (float(step_sum_s) - (last - cut)) / m * 1e3


def matched_figures(
    fluid: IterationLog, ns3: IterationLog, step_sum_s: tuple[float, float] | None = None
) -> dict[str, Any]:
    """The comparison over the iterations both simulators completed: ``matched_iterations`` (the fewer of
    the two counts, ``fluid_iterations`` and ``ns3_iterations``), each side's mean communication time over
    its first ``matched_iterations`` (``matched_comm_ms``: ``{"fluid", "ns3"}``), their
    ``matched_rel_error = (fluid - ns3) / ns3``, and ``lag_ms``, ns-3's end of the last matched iteration
    less the fluid's (positive: ns-3 is behind). Given each side's step times summed over all its iterations
    (``step_sum_s``: ``(fluid, ns3)``, s), also each side's mean step time over the same iterations
    (``matched_step_ms``: ``{"fluid", "ns3"}``, :func:`_matched_step_ms`) and ``matched_step_rel_error``;
    without it they are None. A figure the fluid's log cannot give (:func:`~.fluid.iteration_log`: a cut
    inside an interval where three or more iterations ended) is None.

    Examples
    --------
    >>> a = IterationLog(np.array([2.0, 3.0, 1.0]), np.array([0.01, 0.02, 0.03]), np.array([2.0, 5.0, 6.0]))
    >>> b = IterationLog(np.array([2.5, 2.5]), np.array([0.011, 0.0235]), np.array([2.5, 5.0]))
    >>> m = matched_figures(a, b, step_sum_s=(0.03, 0.0235))
    >>> m["matched_iterations"], m["matched_comm_ms"], m["matched_rel_error"], round(m["lag_ms"], 6)
    (2, {'fluid': 2500.0, 'ns3': 2500.0}, 0.0, 3.5)
    >>> {k: round(v, 6) for k, v in m["matched_step_ms"].items()}, round(m["matched_step_rel_error"], 6)
    ({'fluid': 10.0, 'ns3': 11.75}, -0.148936)
    """
    nf, npk = len(fluid.comm_s), len(ns3.comm_s)
    m = min(nf, npk)
    out: dict[str, Any] = {
        "matched_iterations": m,
        "fluid_iterations": nf,
        "ns3_iterations": npk,
        "matched_comm_ms": {"fluid": None, "ns3": None},
        "matched_rel_error": None,
        "lag_ms": None,
        "matched_step_ms": {"fluid": None, "ns3": None},
        "matched_step_rel_error": None,
    }
    if m == 0:
        return out
    a, b = _num(fluid.comm_cum_s[m - 1]), _num(ns3.comm_cum_s[m - 1])
    fm = None if a is None else a / m * 1e3
    pm = None if b is None else b / m * 1e3
    out["matched_comm_ms"] = {"fluid": fm, "ns3": pm}
    out["matched_rel_error"] = _rel(fm, pm)
    ea, eb = _num(fluid.end_s[m - 1]), _num(ns3.end_s[m - 1])
    out["lag_ms"] = None if ea is None or eb is None else (eb - ea) * 1e3
    fs, ps = step_sum_s if step_sum_s is not None else (None, None)
    fst, pst = _matched_step_ms(fluid, fs, m), _matched_step_ms(ns3, ps, m)
    out["matched_step_ms"] = {"fluid": fst, "ns3": pst}
    out["matched_step_rel_error"] = _rel(fst, pst)
    return out


def ns3_iteration_log(pk: dict[str, Any], j: int) -> IterationLog:
    """Job ``j``'s :class:`~.fluid.IterationLog` from :func:`~.ns3.run_ns3`'s per-iteration figures."""
    comm = np.asarray(pk["iter_comm_s"][j], dtype=np.float64)
    return IterationLog(comm, np.asarray(pk["iter_end_s"][j], dtype=np.float64), np.cumsum(comm))


class CrosscheckDetails(TypedDict):
    """What :func:`crosscheck` puts in its ``details`` dict, when given one: what the contract object leaves
    out, the material of the analyses in docs/fidelity-learning.md. Times in s, bytes of payload; a
    "sub-flow" is one ns-3 TCP connection, a "transfer" one job's bytes over one connection, split over
    sub-flows."""

    fluid_cpu_s: float
    """CPU time of the fluid simulation of the span (the median of the timed replays, as ``fluid_wall_s``)."""
    fluid_first_wall_s: float
    """Wall time of the fluid's first, recorded run (the policy acting, the kernels' first call included)."""
    transfer_mb: float
    """The smallest transfer of the jobs in MB (before a split into sub-flows): what makes a case bulk."""
    ns3_cpu_s: float
    """CPU time of ns-3's simulation of the span."""
    fluid_iterations: list[int]
    """Per job, the iterations completed over the span in the fluid model."""
    ns3_iterations: list[int]
    """Per job, the iterations completed over the span in ns-3."""
    iteration_log: dict[str, list[dict[str, list[float | None]]]]
    """Per simulator (``fluid``, ``ns3``), per job: its completed iterations' ``comm_s``, ``end_s`` and
    ``comm_cum_s`` (:class:`~.fluid.IterationLog`; None where the fluid's is not known)."""
    ns3_transfers: int
    """The TCP connections (sub-flows) ns-3 ran."""
    resplits: int
    """Transfers in flight whose bytes moved to a new split at an interval boundary."""
    routing: dict[str, int]
    """How connections were routed: per kind (``spray``, ``paths``), the (connection, interval) pairs."""
    paths: dict[int, list[list[int]]]
    """Per connection, its candidate paths (link indices)."""
    conn_ends: dict[int, tuple[int, int]]
    """Per connection, its source and destination endpoints."""
    splits: list[list[list[float]]]
    """Per interval, the (connections, max_paths) split of each connection over its paths."""
    transfer_log: list[tuple[int, float, float, float, int]]
    """Per ns-3 transfer: job, bytes, launch and completion time (-1 if it did not complete), connection."""
    subflow_log: list[tuple[int, int, int, float, float, float, float, float]]
    """Per ns-3 sub-flow: its transfer's index in ``transfer_log`` (-1 for a background sub-flow),
    connection, path index, bytes it was to carry and received, launch time, and times of its last and of
    its first received byte (-1 if none)."""
    subflow_rx: list[list[float]]
    """Per sub-flow of ``subflow_log``, the payload bytes it received in each interval."""
    fq_buckets: list[int]
    """Per link, the FqCoDel hash buckets its device used over the run, -1 for a link not built
    (:attr:`CrosscheckConfig.fq_flows`)."""
    flow_buckets: list[tuple[int, int]]
    """Per sub-flow of ``subflow_log``, the FqCoDel bucket of its data packets and of its ACKs, -1 if it
    never connected: two sub-flows on one link in the same bucket share one share."""
    link_bytes: dict[str, list[list[float]]]
    """Per simulator (``fluid``, ``ns3``), (steps, links) payload bytes per link and interval."""
    background: list[dict[str, Any]]
    """Per background source: its ``name``, connections ``conns``, ``rate_bytes_per_s`` (per connection,
    while on) and the intervals it is on (``on``, a bool per interval)."""
    ns3_events: int
    """The events ns-3's simulator ran."""
    ns3_bytes: float
    """The payload bytes the sub-flows received in ns-3 (each byte once, not per hop)."""
    ns3_link_bytes: float
    """The payload bytes ns-3's links carried, over every link and interval (a byte once per hop)."""
    device_bytes: dict[str, Any] | None
    """ns-3's per-device transmit counters when :attr:`CrosscheckConfig.device_counter_bin_s` is set, else
    None: ``bin_s``, ``owners`` (endpoint pair ``"src>dst"`` -> job or background source) and per link id
    (a string) ``data`` (pair -> wire bytes of its data packets per bin) and ``other`` (wire bytes of the
    smaller packets, ACKs, per bin)."""
    header_efficiency: float | None
    """The fabric's ``link_efficiency`` in both runs (:attr:`CrosscheckConfig.header_efficiency` unless
    None, else the scenario's)."""


def crosscheck(
    scenario: str | os.PathLike | dict | Scenario,
    policy: str = "ecmp",
    seed: int = 0,
    steps: int | None = None,
    config: CrosscheckConfig | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` under ``policy`` in the fluid model and in ns-3; compare job communication times.

    Parameters
    ----------
    scenario : str, path, dict or Scenario
        A shipped scenario name, a cross-check case name (``xc-ring-8``: ``scenarios/crosscheck/``), a YAML
        path or a dict.
    policy : str
        Any policy string of ``ainet-gym evaluate`` (``ecmp``, ``spray``, ``lp``, ``lp+bg``, ``pretrained``,
        ``ppo:PATH``, ...): the agent registry's (:func:`ainet_gym.agents.registry.make_agent`).
    seed : int
        Episode seed (placement, ECMP hash, start and burst jitter), as in ``simulate`` and ``evaluate``.
    steps : int, optional
        Decision intervals simulated in both (at most ``config.max_steps``); None: the scenario's
        ``dynamics.episode_steps``.
    config : CrosscheckConfig, optional
        The ns-3 experiment's constants.
    details : dict, optional
        Filled, if given, with what the contract object leaves out: the keys of :class:`CrosscheckDetails`
        (CPU times, iterations per job in each simulator, the replay's routing, its transfers and sub-flows,
        FqCoDel buckets, payload bytes per link and interval, the background sources).

    Returns
    -------
    dict
        ``{"scenario", "policy", "seed", "steps", "jobs": [{"name", "fluid_comm_ms", "ns3_comm_ms",
        "rel_error", "fluid_step_ms", "ns3_step_ms", "step_rel_error", "intervals": [...]}], "fluid_wall_s",
        "ns3_wall_s"}``. A job's communication (step) time is its mean per iteration over the iterations
        completed within the whole simulated span; ``rel_error = (fluid - ns3) / ns3``. ``intervals[k]``
        (one per decision interval) holds ``fluid_iterations`` and ``ns3_iterations`` (iterations that ended
        in the interval), the means of their communication times ``fluid_comm_ms`` and ``ns3_comm_ms``
        (None where none ended) and their ``rel_error`` (None unless both are there). Each job also has
        the comparison over the iterations both completed (:func:`matched_figures`: ``matched_iterations``,
        ``matched_comm_ms``, ``matched_step_ms``, their errors, ``lag_ms``, ...). Wall times are those
        of the simulation of the span only (no construction, no ns-3 import; the fluid's without the
        policy's own time).

    Notes
    -----
    One call per process is the tested use: ns-3 keeps global state between runs in one process, and in one
    batch a run that followed another gave a different result (docs/fidelity.md);
    :func:`~.report.calibration` and :func:`~.report.learning` run each case in a process of its own
    (:func:`crosscheck_in_subprocess`).

    Raises
    ------
    CrosscheckError
        The scenario, policy or request is outside the supported subset, a job completed no iteration in
        one of the simulators, or ns-3 ran past ``config.wall_limit_s``.
    Ns3NotInstalledError
        The optional extra ``ns3`` is not installed.
    """
    cfg = config or CrosscheckConfig()
    check_config(cfg)
    sc, steps = _load_case(scenario, steps, cfg)
    _check_request(sc, policy, steps, cfg)
    run = run_fluid(sc, policy, seed, steps, cfg)
    names = [jp.name for jp in run.jobs]
    _refuse_idle(sc, names, run.iterations, steps, "of the fluid model")
    pk = _replay_ns3(sc, run, cfg)
    _refuse_idle(sc, names, pk["iterations"], steps, "in ns-3")
    if details is not None:
        details.update(_details(sc, run, pk))
    return {
        "scenario": sc.name,
        "policy": policy,
        "seed": seed,
        "steps": steps,
        "jobs": [_job_row(j, name, run, pk, steps) for j, name in enumerate(names)],
        "fluid_wall_s": run.wall_s,
        "ns3_wall_s": pk["wall_s"],
    }


def _load_case(
    scenario: str | os.PathLike | dict | Scenario, steps: int | None, cfg: CrosscheckConfig
) -> tuple[Scenario, int]:
    """The scenario of :func:`crosscheck` (a cross-check case name resolved) at the replay's header
    efficiency (``cfg.header_efficiency``, unless None), and the intervals to simulate: ``steps``, or the
    scenario's ``dynamics.episode_steps``, refused past ``cfg.max_steps``."""
    sc = load_scenario(resolve_scenario(scenario))
    if cfg.header_efficiency is not None:
        sc = replace(sc, fabric=replace(sc.fabric, link_efficiency=cfg.header_efficiency))
    if steps is None:
        steps = sc.dynamics.episode_steps
        if steps > cfg.max_steps:
            raise CrosscheckError(
                f"scenario {sc.name!r}: dynamics.episode_steps = {steps}: the cross-check replays at most "
                f"{cfg.max_steps} intervals; allowed: fewer intervals (--steps)"
            )
    return sc, steps


def _check_request(sc: Scenario, policy: str, steps: int, cfg: CrosscheckConfig) -> None:
    """What :func:`crosscheck` refuses before anything runs: a case outside the supported subset
    (:func:`check_supported`), a bad policy string (before ns-3 is imported), and a missing ``ns3`` extra
    (before the fluid run)."""
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.fabric.topology import build_fabric

    check_supported(sc, build_fabric(sc.fabric, sc.routing.max_paths), steps, cfg)
    try:
        make_agent(policy)  # a bad policy string is refused before ns-3 is imported
    except (ValueError, FileNotFoundError) as e:
        raise CrosscheckError(str(e)) from e
    import_ns()  # fail early (before the fluid run) when the extra is missing


def _replay_ns3(sc: Scenario, run: FluidRun, cfg: CrosscheckConfig) -> dict[str, Any]:
    """The fluid ``run`` replayed in ns-3 (:func:`run_ns3`), refused before it starts when its transfers
    would carry more than ``cfg.max_ns3_bytes``, and after it when it ran past ``cfg.wall_limit_s``."""
    est = estimated_bytes(run)
    if est > cfg.max_ns3_bytes:
        raise CrosscheckError(
            f"scenario {sc.name!r}: the ns-3 run would carry about {est / 1e9:.1f} GB of transfers; allowed: "
            f"at most {cfg.max_ns3_bytes / 1e9:.1f} GB (CrosscheckConfig.max_ns3_bytes, --max-ns3-gb), fewer steps or bytes"
        )
    pk = run_ns3(run, cfg)
    if pk["timed_out"]:
        raise CrosscheckError(
            f"scenario {sc.name!r}: ns-3 ran past wall_limit_s = {cfg.wall_limit_s} s; allowed: a smaller case "
            "or a higher limit (--wall-limit-s)"
        )
    return pk


def _refuse_idle(sc: Scenario, names: list[str], iterations: Any, steps: int, where: str) -> None:
    """Refuse a run in which a job completed no iteration (``where``: which simulator)."""
    idle = [n for n, it in zip(names, iterations) if it == 0]
    if idle:
        raise CrosscheckError(
            f"scenario {sc.name!r}: job(s) {', '.join(idle)} completed no iteration in {steps} interval(s) "
            f"{where}; allowed: more steps (--steps)"
        )


def _job_row(j: int, name: str, run: FluidRun, pk: dict[str, Any], steps: int) -> dict[str, Any]:
    """Job ``j``'s entry of the result: its means over the span in both simulators and per interval."""
    fl = _ms(run.comm_sum_s[j], int(run.iterations[j]))
    pm = _ms(pk["comm_sum_s"][j], int(pk["iterations"][j]))
    fs = _ms(run.step_sum_s[j], int(run.iterations[j]))
    ps = _ms(pk["step_sum_s"][j], int(pk["iterations"][j]))
    intervals = []
    for k in range(steps):
        fi, pi = int(run.step_iterations[k, j]), int(pk["step_iterations"][k, j])
        a, b = _ms(run.step_comm_sum_s[k, j], fi), _ms(pk["step_comm_sum_s"][k, j], pi)
        intervals.append(
            {
                "step": k,
                "fluid_iterations": fi,
                "ns3_iterations": pi,
                "fluid_comm_ms": a,
                "ns3_comm_ms": b,
                "rel_error": _rel(a, b),
            }
        )
    return {
        "name": name,
        "fluid_comm_ms": fl,
        "ns3_comm_ms": pm,
        "rel_error": _rel(fl, pm),
        "fluid_step_ms": fs,
        "ns3_step_ms": ps,
        "step_rel_error": _rel(fs, ps),
        **matched_figures(
            run.iteration_log[j],
            ns3_iteration_log(pk, j),
            step_sum_s=(float(run.step_sum_s[j]), float(pk["step_sum_s"][j])),
        ),
        "intervals": intervals,
    }


def _details(sc: Scenario, run: FluidRun, pk: dict[str, Any]) -> CrosscheckDetails:
    """What :func:`crosscheck`'s ``details`` receives (:class:`CrosscheckDetails`)."""
    return CrosscheckDetails(
        fluid_cpu_s=run.cpu_s,
        fluid_first_wall_s=run.first_wall_s,
        # the smallest transfer of the jobs (MB, before a split into sub-flows): what makes a case bulk
        transfer_mb=min(t[1] for jp in run.jobs for ph in jp.phases for fl in ph for t in fl) / 1e6,
        ns3_cpu_s=pk["cpu_s"],
        fluid_iterations=run.iterations.tolist(),
        ns3_iterations=pk["iterations"].tolist(),
        iteration_log={
            side: [
                {f: [_num(x) for x in getattr(lg, f)] for f in ("comm_s", "end_s", "comm_cum_s")}
                for lg in logs
            ]
            for side, logs in (
                ("fluid", run.iteration_log),
                ("ns3", [ns3_iteration_log(pk, j) for j in range(len(run.jobs))]),
            )
        },
        ns3_transfers=pk["transfers"],
        resplits=pk["resplits"],
        routing=pk["routing"],
        paths={c: [[int(x) for x in p] for p in conn.paths] for c, conn in run.conns.items()},
        conn_ends={c: (conn.src, conn.dst) for c, conn in run.conns.items()},
        splits=[s.tolist() for s in run.splits],
        transfer_log=pk["transfer_log"],
        subflow_log=pk["subflow_log"],
        subflow_rx=pk["subflow_rx"],
        fq_buckets=pk["fq_buckets"],
        flow_buckets=pk["flow_buckets"],
        link_bytes={"fluid": run.link_bytes.tolist(), "ns3": pk["link_bytes"].tolist()},
        background=[
            {
                "name": bg.name,
                "conns": bg.conns,
                "on": bg.on.tolist(),
                "rate_bytes_per_s": bg.rate_bytes_per_s,
            }
            for bg in run.backgrounds
        ],
        ns3_events=pk["events"],
        # payload bytes the sub-flows received (each byte once, not per hop) and carried over links
        ns3_bytes=pk["payload_bytes"],
        ns3_link_bytes=float(pk["link_bytes"].sum()),
        device_bytes=pk.get("device_bytes"),
        header_efficiency=sc.fabric.link_efficiency,
    )


def crosscheck_in_subprocess(
    name: str | dict, policy: str, seed: int, steps: int, config: CrosscheckConfig | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`crosscheck` in a fresh interpreter. ns-3 keeps global state across runs in one process
    (simulator singletons, random-stream counters): in one batch, ``xc-hd-8`` under ``lp`` completed no
    iteration in a run that followed another, and 30.4 ms in a process of its own."""
    import dataclasses
    import json
    import subprocess
    import sys

    cfg = dataclasses.asdict(config or CrosscheckConfig())
    code = (
        "import json, sys\n"
        "from ainet_gym.checks.crosscheck import CrosscheckConfig, CrosscheckError, crosscheck\n"
        "a = json.loads(sys.argv[1])\n"
        "det = {}\n"
        "try:\n"
        "    r = crosscheck(a['name'], a['policy'], a['seed'], a['steps'], CrosscheckConfig(**a['cfg']), det)\n"
        "except CrosscheckError as e:\n"
        "    print('XC-RESULT ' + json.dumps({'error': str(e)}))\n"
        "else:\n"
        "    print('XC-RESULT ' + json.dumps({'result': r, 'details': det}))\n"
    )
    arg = json.dumps({"name": name, "policy": policy, "seed": seed, "steps": steps, "cfg": cfg})
    proc = subprocess.run(
        [sys.executable, "-c", code, arg], capture_output=True, text=True, check=False, cwd=os.getcwd()
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("XC-RESULT ")), None)
    if line is None:
        raise CrosscheckError(
            f"{name} under {policy}: the ns-3 process failed (exit {proc.returncode}): {proc.stderr[-400:]}"
        )
    out = json.loads(line.removeprefix("XC-RESULT "))
    if "error" in out:
        raise CrosscheckError(out["error"])
    return out["result"], out["details"]
