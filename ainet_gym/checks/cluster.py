"""A real multi-node Ray cluster on one machine, RLlib training on it, and a node killed mid-run.

``make check-cluster`` (in the RLlib venv) runs :func:`main`:

1. a Ray head and two worker nodes as separate ``ray start`` processes, each on its own loopback address
   (``127.0.0.2`` head, ``127.0.0.3`` and ``127.0.0.4`` workers), with its own ``--temp-dir`` and ports
   chosen free, and a cluster token of its own (Ray's token authentication); only the workers offer the
   custom resource ``fabric_env_runner`` that every env runner asks for, so no env runner can run on the
   head;
2. RLlib PPO on the native vector env (:func:`ainet_gym.envs.rllib.ppo_config`) with 2 env runners and
   RLlib's env-runner restart (``restart_failed_env_runners``); after every iteration the node id of each
   env runner is read from the runner itself (``ray.get_runtime_context().get_node_id()``) and a
   checkpoint is written atomically (to a temporary name, then renamed) with the SHA-256 of the policy's
   weights;
3. the faults: while an iteration is sampling, the node holding the first env runner is killed
   (``SIGKILL`` to the process group of its ``ray start``: raylet, object store, workers); training must
   go on on the node that remains (the runners restarted there) for at least two more iterations; then the
   last node with env runners is killed, and training must stop with one line that says what happened;
4. every checkpoint written must load (``RLModule.from_checkpoint``) with the weights it was saved with.

It prints each iteration and event and a verdict per property, and exits 0 when all hold. Everything it
starts runs under its work directory and is stopped at the end (process groups it made, then any process
left whose command line names the work directory).

Modules: this one is the check (:func:`run_check`: the timeline, the PPO it builds, the verdicts) and its command
line; the cluster is :mod:`ainet_gym.checks.ray_cluster`, the training with faults and its kill schedule
:mod:`ainet_gym.checks.cluster_faults`, the atomic checkpoints and their weights' hash
:mod:`ainet_gym.checks.cluster_checkpoints`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ainet_gym.checks.cluster_checkpoints import weights_sha
from ainet_gym.checks.cluster_faults import CheckResult, EventLog, KillSchedule, train_with_faults
from ainet_gym.checks.ray_cluster import RUNNER_RESOURCE, LoopbackCluster

__all__ = [
    "main",
    "run_check",
]


def run_check(
    workdir: Path,
    scenario: str = "periodic-interference",
    episode_steps: int = 8,
    envs_per_runner: int = 4,
    seed: int = 0,
    after_first_kill: int = 2,
    kill_delay_s: float = 1.0,
    restart_wait_s: float = 300.0,
    max_iterations: int = 40,
) -> CheckResult:
    """Start the cluster, train, kill the node of the first env runner mid-iteration, train on, kill the
    last node with env runners, and check the properties of the module docstring.

    The timeline: the cluster up, PPO built (:func:`_build_ppo`), the iterations with their faults
    (:func:`train_with_faults`, the kills chosen by :class:`KillSchedule`), everything stopped, the
    verdicts (:func:`_verdicts`)."""
    cluster = LoopbackCluster(workdir)
    res = CheckResult()
    log = EventLog(res, time.time())
    # Ray reads its authentication mode when imported: set it first (run in a fresh process)
    os.environ.update({k: v for k, v in cluster.env().items() if k.startswith("RAY_AUTH")})
    import ray

    ckpt_root = workdir / "checkpoints"
    try:
        cluster.start()
        log(
            "cluster up: "
            + ", ".join(f"{n.name} {n.ip} node {str(n.node_id)[:8]}" for n in cluster.nodes.values())
        )
        algo = _build_ppo(scenario, envs_per_runner, seed, episode_steps)
        log("PPO built: 2 env runners asking for one 'fabric_env_runner' each")
        ckpt_root.mkdir(parents=True, exist_ok=True)
        schedule = KillSchedule(after_first_kill, restart_wait_s)
        train_with_faults(cluster, algo, res, log, ckpt_root, schedule, kill_delay_s, max_iterations)
        algo.stop()
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.stop()
    if res.stop_line:
        print(res.stop_line, flush=True)
    _verdicts(res, cluster, ckpt_root)
    return res


def _build_ppo(scenario: str, envs_per_runner: int, seed: int, episode_steps: int) -> Any:
    """RLlib PPO with 2 env runners, each asking for one :data:`RUNNER_RESOURCE` (so none runs on the head),
    and RLlib's restart of failed env runners."""
    from ainet_gym.envs import rllib as arl

    conf = (
        arl.ppo_config(
            scenario, num_env_runners=2, envs_per_runner=envs_per_runner, seed=seed,
            episode_steps=episode_steps,
        )
        .env_runners(custom_resources_per_env_runner={RUNNER_RESOURCE: 1}, sample_timeout_s=60.0)
        .fault_tolerance(
            restart_failed_env_runners=True,
            delay_between_env_runner_restarts_s=1.0,
            env_runner_health_probe_timeout_s=10.0,
            env_runner_restore_timeout_s=120.0,
        )
    )  # fmt: skip
    return conf.build_algo()


def _verdicts(res: CheckResult, cluster: LoopbackCluster, ckpt_root: Path) -> None:
    from ray.rllib.core.rl_module.rl_module import RLModule

    head = cluster.nodes["head"].node_id
    workers = {n.node_id for n in cluster.nodes.values() if n.name != "head"}
    first = res.iterations[0] if res.iterations else None
    v = res.verdicts
    v["env runners start on worker nodes only (node ids, none on the head)"] = bool(
        first and len(first["runner_nodes"]) == 2 and set(first["runner_nodes"]) <= workers
        and head not in first["runner_nodes"]
    )  # fmt: skip
    after = [r for r in res.iterations if r["phase"].startswith("after killing") and "," not in r["phase"]]
    killed1 = cluster.nodes[next(iter(r["phase"].removeprefix("after killing ") for r in after), "head")]
    v["training goes on after the first node is killed (>= 2 iterations with env steps)"] = (
        len([r for r in after if r["env_steps"] > 0]) >= 2
    )
    v["after the first kill every env runner runs on the node that remains"] = bool(after) and all(
        killed1.node_id not in r["runner_nodes"] and set(r["runner_nodes"]) <= workers
        for r in after[1:] or after
    )
    v["killing the last node with env runners stops training with one line"] = (
        res.stop_line is not None and "\n" not in res.stop_line
    )
    ok = bool(res.checkpoints)
    for path, sha in res.checkpoints:
        module = RLModule.from_checkpoint(
            str((path / "learner_group" / "learner" / "rl_module" / "default_policy").resolve())
        )
        got = weights_sha(module.get_state())
        saved = (path / "weights.sha256").read_text().strip()
        ok &= got == sha == saved
    ok &= not list(ckpt_root.glob(".*.partial"))
    v[f"all {len(res.checkpoints)} checkpoints load with the weights they were saved with"] = ok


def main(argv: list[str] | None = None) -> int:
    from ainet_gym.agents.arg_types import int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    ap = OneLineParser(prog="python -m ainet_gym.checks.cluster", description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=None, help="where the nodes' temp dirs, logs and checkpoints go "
                    "(default: a new directory under the system temp dir; kept)")  # fmt: skip
    ap.add_argument("--scenario", default="periodic-interference")
    ap.add_argument("--episode-steps", type=int_arg(1), default=8)
    ap.add_argument("--envs-per-runner", type=int_arg(1, 100_000), default=4)
    args = ap.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ainet-cluster-")).resolve()
    t0 = time.time()
    res = run_check(workdir, args.scenario, args.episode_steps, args.envs_per_runner)
    print(f"cluster check: {len(res.iterations)} iterations in {time.time() - t0:.0f} s; work dir {workdir}")
    for text, ok in res.verdicts.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return 0 if res.verdicts and all(res.verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
