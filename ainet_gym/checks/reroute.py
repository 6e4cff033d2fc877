"""How much of a policy's gain depends on moving transfers in flight (``routing.reroute``).

The fluid model's default, ``routing.reroute: in_flight``, applies a new split to the transfers in flight at
once: their remaining bytes follow it. A switch cannot move bytes that are already queued, and a transport
that pins a connection's packets to a path cannot move the connection either; ``new_transfers`` is the
other end: a transfer keeps the split it started with, and only transfers that start after a decision take
the new one. :func:`compare` evaluates policies on the same episodes under both semantics and reports each
policy's GPU utilisation and its gain over a base policy in each (static ECMP by default), and the share of
that gain that moving transfers in flight provides (docs/fidelity-learning.md)::

    python -m ainet_gym.checks.reroute --scenarios periodic-interference,ingest-bursts \\
        --policies ecmp,spray,lp,lp+bg,pretrained --seeds 1-10

A gain over ECMP can hide what matters in a like-for-like comparison: with ``--base spray+bg`` (the best
baseline of the ``jobs+bg`` class on the spine-leaf siblings) the share is that of a learned policy's lead
over the best baseline of its class.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import REROUTE_MODES

__all__ = ["compare", "main", "markdown"]


def compare(
    scenario: Any, policies: list[str], seeds: list[int], steps: int | None = None, base: str = "ecmp"
) -> dict[str, Any]:
    """Evaluate ``policies`` on ``scenario`` (name, path, dict or Scenario) with episode ``seeds`` under each
    ``routing.reroute`` mode (the scenario's own setting is replaced).

    Returns ``{"scenario", "seeds", "base", "policies": {NAME: {MODE: {"gpu_utilization", "ci95", "gain"},
    "share"}}}``: ``gain`` is the policy's GPU utilisation minus the ``base`` policy's (static ECMP by
    default; always evaluated) under the same mode, ``share`` the part of the ``in_flight`` gain that
    ``new_transfers`` loses, ``(gain_in_flight - gain_new_transfers) / gain_in_flight`` (None when the
    ``in_flight`` gain is not positive).
    """
    from ainet_gym.agents.evaluate import EvalConfig, evaluate

    sc = load_scenario(scenario)
    pols = list(dict.fromkeys([base, *policies]))
    res: dict[str, dict[str, Any]] = {}
    for mode in REROUTE_MODES:
        run = replace(sc, routing=replace(sc.routing, reroute=mode))
        out = evaluate(EvalConfig(scenario=run, policies=pols, seeds=seeds, steps=steps, out=None))
        ref = out["policies"][base]["gpu_utilization"]["mean"]
        for name, row in out["policies"].items():
            u = row["gpu_utilization"]
            res.setdefault(name, {})[mode] = {
                "gpu_utilization": u["mean"],
                "ci95": u["ci95"],
                "gain": u["mean"] - ref,
            }
    for row in res.values():
        g_in, g_new = row["in_flight"]["gain"], row["new_transfers"]["gain"]
        row["share"] = (g_in - g_new) / g_in if g_in > 1e-12 else None
    return {"scenario": sc.name, "seeds": seeds, "base": base, "policies": res}


def markdown(results: list[dict[str, Any]]) -> str:
    """One table row per (scenario, policy) of :func:`compare`'s results (their base named in the header:
    ``ECMP`` for the default)."""
    bases = {r.get("base", "ecmp") for r in results}
    shown = ", ".join(sorted(bases))
    base = "ECMP" if shown == "ecmp" else f"`{shown}`"
    lines = [
        f"| scenario | policy | GPU util, in_flight | GPU util, new_transfers | gain over {base}, in_flight |"
        f" gain over {base}, new_transfers | share of the gain from moving transfers in flight |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for name, row in r["policies"].items():
            a, b = row["in_flight"], row["new_transfers"]
            share = "-" if row["share"] is None else f"{100 * row['share']:.0f}%"
            lines.append(
                f"| {r['scenario']} | {name} | {a['gpu_utilization']:.3f} | {b['gpu_utilization']:.3f} | "
                f"{a['gain']:+.3f} | {b['gain']:+.3f} | {share} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.checks.reroute``: the table of docs/fidelity-learning.md, "Moving transfers in
    flight"."""
    import json

    from ainet_gym.agents.arg_types import add_episode_steps_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's
    from ainet_gym.agents.outputs import add_out_file_args, run_writing_module_cli

    ap = OneLineParser(prog="python -m ainet_gym.checks.reroute", description=main.__doc__)
    ap.add_argument("--scenarios", required=True, help="comma list of scenario names or paths")
    ap.add_argument("--policies", default="ecmp,spray,lp,lp+bg,pretrained", help="comma list")
    ap.add_argument(
        "--base", default="ecmp", help="the policy gains are measured over (default: ecmp; e.g. spray+bg)"
    )
    ap.add_argument("--seeds", default="1-10", help="e.g. 1-10 or 1,2,3")
    add_episode_steps_arg(ap)
    add_out_file_args(ap, "write the JSON results here")
    a = ap.parse_args(argv)
    from ainet_gym.agents.evaluate import parse_seeds

    def run() -> int:
        results = [
            compare(s, [p for p in a.policies.split(",") if p], parse_seeds(a.seeds), a.steps, base=a.base)
            for s in a.scenarios.split(",")
            if s
        ]
        if a.out:
            with open(a.out, "w", encoding="utf-8") as fh:
                json.dump(results, fh, indent=1)
        print(markdown(results))
        return 0

    return run_writing_module_cli("python -m ainet_gym.checks.reroute", run, a.out, a.overwrite)


if __name__ == "__main__":
    raise SystemExit(main())
