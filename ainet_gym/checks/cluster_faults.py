"""The cluster check's training with faults (:mod:`ainet_gym.checks.cluster`): iteration after iteration, the node
the :class:`KillSchedule` picks killed mid-iteration, each completed iteration recorded in the
:class:`CheckResult` with the env runners' nodes and its checkpoint, RLlib's restart of the lost env runner
noted, and the one line that says why training stopped (:func:`train_with_faults`); events printed with their
time by :class:`EventLog`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ainet_gym.checks.cluster_checkpoints import save_atomic
from ainet_gym.checks.ray_cluster import LoopbackCluster

__all__ = [
    "CheckResult",
    "EventLog",
    "KillSchedule",
    "train_with_faults",
]


def _runner_nodes(algo: Any) -> list[str]:
    """Node id of each healthy remote env runner, asked from the runner itself."""
    import ray

    def where(runner: Any) -> str:
        return ray.get_runtime_context().get_node_id()

    return list(algo.env_runner_group.foreach_env_runner(where, local_env_runner=False, timeout_seconds=60))


@contextlib.contextmanager
def _kill_after(cluster: LoopbackCluster, name: str, delay_s: float) -> Iterator[None]:
    """Kill node ``name`` ``delay_s`` seconds into the block (mid-iteration)."""
    timer = threading.Timer(delay_s, cluster.kill, args=(name,))
    timer.start()
    try:
        yield
    finally:
        timer.join()


@dataclass
class CheckResult:
    """What the check saw: per iteration the env runners' nodes; the events; the verdicts."""

    iterations: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    stop_line: str | None = None
    restart_s: float | None = None  # seconds from the first kill until both env runners were up again
    checkpoints: list[tuple[Path, str]] = field(default_factory=list)
    verdicts: dict[str, bool] = field(default_factory=dict)


@dataclass
class EventLog:
    """Print an event with the seconds since ``t0`` and keep it in ``res.events``."""

    res: CheckResult
    t0: float

    def __call__(self, text: str) -> None:
        line = f"[{time.time() - self.t0:6.1f} s] {text}"
        self.res.events.append(line)
        print(line, flush=True)


@dataclass
class KillSchedule:
    """Which node the check kills in an iteration: in iteration 2 the node of the first env runner; then,
    once ``after_first_kill`` iterations have completed after that kill and RLlib has restored the lost env
    runner (or ``restart_wait_s`` has passed since the kill), the first worker node still alive."""

    after_first_kill: int
    restart_wait_s: float
    killed: list[str] = field(default_factory=list)  # the nodes killed, in order
    after_first: int = 0  # iterations completed after the first kill
    first_kill_t: float = 0.0  # when the first node was killed (time.time())
    phase: str = "before any fault"

    def victim(
        self, it: int, runner_nodes: list[str], name_of: dict[str, str], live_workers: list[str], now: float
    ) -> str | None:
        """The node to kill during iteration ``it`` (None: none), given the node ids of the env runners
        before it (``name_of`` names them) and the worker nodes alive, by name."""
        if not self.killed and it == 2:
            return name_of.get(runner_nodes[0]) if runner_nodes else None
        if len(self.killed) == 1 and self.after_first >= self.after_first_kill:
            restored = len(runner_nodes) == 2
            if restored or now - self.first_kill_t > self.restart_wait_s:
                return live_workers[0] if live_workers else None
        return None

    def was_killed(self, name: str, killed_at: float | None, now: float) -> None:
        """Node ``name`` was killed (at ``killed_at``; None: unknown, ``now``) in an iteration that completed."""
        self.killed.append(name)
        self.phase = f"after killing {', '.join(self.killed)}"
        if len(self.killed) == 1:
            self.first_kill_t = killed_at or now


def _live_workers(cluster: LoopbackCluster) -> list[str]:
    """The worker nodes not killed, by name."""
    return [n.name for n in cluster.nodes.values() if n.name != "head" and n.killed_at is None]


def train_with_faults(
    cluster: LoopbackCluster,
    algo: Any,
    res: CheckResult,
    log: EventLog,
    ckpt_root: Path,
    schedule: KillSchedule,
    kill_delay_s: float,
    max_iterations: int,
) -> None:
    """Train iteration after iteration, killing the node ``schedule`` picks ``kill_delay_s`` into an
    iteration, recording each completed iteration (:func:`_record_iteration`) and the restart of the lost
    env runner, until training fails, every worker node is gone, or ``max_iterations`` have run; the line
    that says why training stopped goes to ``res.stop_line``."""
    ip_of = {n.node_id: n.ip for n in cluster.nodes.values()}
    name_of = {n.node_id: n.name for n in cluster.nodes.values()}
    for it in range(1, max_iterations + 1):
        nodes_before = _runner_nodes(algo)
        victim = schedule.victim(it, nodes_before, name_of, _live_workers(cluster), time.time())
        try:
            if victim is not None:
                log(f"iteration {it}: killing {victim} ({cluster.nodes[victim].ip}) {kill_delay_s:.0f} s in")
                with _kill_after(cluster, victim, kill_delay_s):
                    result = algo.train()
            else:
                result = algo.train()
        except Exception as e:  # any failure of the iteration ends training: the line says which
            if victim is not None:
                schedule.killed.append(victim)
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            res.stop_line = _stop_line(it, schedule.killed, cluster, res, reason)
            return
        if victim is not None:
            schedule.was_killed(victim, cluster.nodes[victim].killed_at, time.time())
        nodes_after = _runner_nodes(algo)
        ips = _record_iteration(res, log, algo, result, it, schedule.phase, nodes_after, ip_of, ckpt_root)
        if len(schedule.killed) == 1:
            schedule.after_first += 1
            if len(nodes_after) == 2 and res.restart_s is None:
                res.restart_s = time.time() - schedule.first_kill_t
                log(f"RLlib restarted the lost env runner on {ips[0]}, {res.restart_s:.0f} s after the kill")
        if len(schedule.killed) == 2 and not _live_workers(cluster):
            # what the next iteration would sample from: nothing on a worker node
            why = "no env runner left" if not nodes_after else f"{len(nodes_after)} env runners unreachable"
            res.stop_line = _stop_line(it + 1, schedule.killed, cluster, res, why)
            return


def _record_iteration(
    res: CheckResult,
    log: EventLog,
    algo: Any,
    result: dict[str, Any],
    it: int,
    phase: str,
    nodes_after: list[str],
    ip_of: dict[str, str],
    ckpt_root: Path,
) -> list[str]:
    """Keep a completed iteration in ``res`` (env steps sampled, the env runners' nodes and addresses),
    write its checkpoint atomically (:func:`save_atomic`) and log it; the env runners' addresses, sorted."""
    steps = int(result.get("env_runners", {}).get("num_env_steps_sampled", 0) or 0)
    ips = sorted(ip_of.get(n, "?") for n in nodes_after)
    res.iterations.append({"iteration": it, "phase": phase, "env_steps": steps, "runner_ips": ips,
                           "runner_nodes": nodes_after, "t": time.time() - log.t0})  # fmt: skip
    path, sha = save_atomic(algo, ckpt_root, it)
    res.checkpoints.append((path, sha))
    log(f"iteration {it} ({phase}): {steps} env steps sampled; env runners on {ips}; checkpoint {path.name}")
    return ips


def _stop_line(it: int, killed: list[str], cluster: LoopbackCluster, res: CheckResult, why: str) -> str:
    where = ", ".join(f"{k} ({cluster.nodes[k].ip})" for k in killed)
    last = res.checkpoints[-1][0].name if res.checkpoints else "none"
    return (
        f"ainet-gym cluster: training stopped in iteration {it}: every node with env runners is gone "
        f"(killed: {where}); last checkpoint {last} is intact [{why}]"
    )
