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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RUNNER_RESOURCE", "LoopbackCluster", "main", "run_check"]

#: the custom resource each env runner asks for; only worker nodes offer it
RUNNER_RESOURCE = "fabric_env_runner"


def _free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """A Ray node started by ``ray start --block`` in its own process group."""

    name: str
    ip: str
    temp_dir: Path
    proc: subprocess.Popen
    node_id: str | None = None
    killed_at: float | None = None


@dataclass
class LoopbackCluster:
    """A Ray head and worker nodes on loopback addresses of this machine, each a separate ``ray start``.

    ``workdir`` holds each node's temp dir, its log and the cluster token; ``runner_slots`` is the number of
    env runners a worker node can hold (``fabric_env_runner`` resource and CPUs).
    """

    workdir: Path
    head_ip: str = "127.0.0.2"
    worker_ips: Sequence[str] = ("127.0.0.3", "127.0.0.4")
    runner_slots: int = 2
    object_store_mb: int = 100
    nodes: dict[str, Node] = field(default_factory=dict)
    port: int = 0

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of the nodes and the driver: token authentication with this cluster's token."""
        token = self.workdir / "token"
        if not token.exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            token.write_text(secrets.token_hex(32))
            token.chmod(0o600)
        return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}

    def _start(self, name: str, ip: str, args: list[str]) -> Node:
        temp = self.workdir / name
        temp.mkdir(parents=True, exist_ok=True)
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_bin) if ray_bin.exists() else "ray",
            "start",
            "--block",
            f"--node-ip-address={ip}",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
            f"--object-store-memory={self.object_store_mb * 1024 * 1024}",
            f"--dashboard-agent-listen-port={_free_port(ip)}",
            f"--metrics-export-port={_free_port(ip)}",
            *args,
        ]
        log = (self.workdir / f"{name}.log").open("w")
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True
        )
        node = Node(name, ip, temp, proc)
        self.nodes[name] = node
        return node

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the head, connect this process to it as the driver (``ray.init``), then start the workers;
        returns when every node is alive in the cluster.

        Raises
        ------
        RuntimeError
            If a node does not come up within ``timeout_s`` (naming it and its log).
        """
        import ray

        self.workdir.mkdir(parents=True, exist_ok=True)
        os.environ.update({k: v for k, v in self.env().items() if k.startswith("RAY_AUTH")})
        self.port = _free_port(self.head_ip)
        head = self._start(
            "head",
            self.head_ip,
            [
                "--head",
                f"--port={self.port}",
                "--num-cpus=1",
                "--include-dashboard=false",
                f"--dashboard-port={_free_port(self.head_ip)}",
                f"--ray-client-server-port={_free_port(self.head_ip)}",
            ],
        )
        deadline = time.time() + timeout_s
        log = self.workdir / "head.log"
        while "Ray runtime started" not in log.read_text():
            self._check_running()
            if time.time() > deadline:
                raise RuntimeError(f"ray head ({self.head_ip}) not up within {timeout_s:.0f} s; see {log}")
            time.sleep(0.5)
        ray.init(address=self.address, _node_ip_address=self.head_ip, log_to_driver=False)
        head.node_id = ray.get_runtime_context().get_node_id()
        res = json.dumps({RUNNER_RESOURCE: self.runner_slots})
        for i, ip in enumerate(self.worker_ips):
            self._start(
                f"worker{i + 1}",
                ip,
                [f"--address={self.address}", f"--num-cpus={self.runner_slots}", f"--resources={res}"],
            )
        while True:
            self._check_running()
            alive = self.alive_nodes()
            if all(ip in alive for ip in (self.head_ip, *self.worker_ips)):
                for n in self.nodes.values():
                    n.node_id = alive[n.ip]
                return
            if time.time() > deadline:
                raise RuntimeError(
                    f"ray workers {list(self.worker_ips)} not all up in {timeout_s:.0f} s; logs in {self.workdir}"
                )
            time.sleep(1.0)

    def _check_running(self) -> None:
        for n in self.nodes.values():
            if n.killed_at is None and n.proc.poll() is not None:
                raise RuntimeError(
                    f"ray node {n.name} ({n.ip}) exited with {n.proc.returncode}; see {self.workdir / n.name}.log"
                )

    def alive_nodes(self) -> dict[str, str]:
        """ip -> node id of the nodes the cluster holds alive (``ray.nodes()`` of the connected driver)."""
        import ray

        return {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}

    def kill(self, name: str) -> None:
        """Crash a node: ``SIGKILL`` to the process group of its ``ray start`` (raylet, object store and
        the processes they started in that group)."""
        node = self.nodes[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.proc.pid, signal.SIGKILL)
        node.killed_at = time.time()

    def stop(self, grace_s: float = 40.0) -> None:
        """Stop every node (``SIGTERM`` to each group, ``SIGKILL`` after ``grace_s``), then end any process
        left whose command line names the work directory (Ray's workers run in groups of their own)."""
        for n in self.nodes.values():
            if n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(n.proc.pid, signal.SIGTERM)
        deadline = time.time() + grace_s
        for n in self.nodes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                n.proc.wait(timeout=max(0.1, deadline - time.time()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(n.proc.pid, signal.SIGKILL)
        for pid in self._leftover_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _leftover_pids(self) -> list[int]:
        """Processes whose command line names a node's temp dir (Ray's own processes of these nodes)."""
        marks = [f"{n.temp_dir}/".encode() for n in self.nodes.values()]
        marks += [f"--temp-dir={n.temp_dir}".encode() for n in self.nodes.values()]
        out = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if any(m in cmd for m in marks):
                out.append(int(d.name))
        return out


def _weights_sha(state: dict[str, Any]) -> str:
    """SHA-256 of a module's weights (a state dict of tensors or arrays, in key order)."""
    import numpy as np

    h = hashlib.sha256()
    for k in sorted(state):
        v = state[k]
        arr = v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
        h.update(k.encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def _save_atomic(algo: Any, root: Path, iteration: int) -> tuple[Path, str]:
    """Write the checkpoint of ``iteration`` to a temporary name, then rename it: a crash never leaves a
    half-written checkpoint under a final name. Returns (directory, weights SHA-256)."""
    final = root / f"iter-{iteration:03d}"
    tmp = root / f".iter-{iteration:03d}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    algo.save_to_path(str(tmp.resolve()))
    sha = _weights_sha(algo.learner_group.get_weights()["default_policy"])  # the learner's full module
    (tmp / "weights.sha256").write_text(sha + "\n")
    os.replace(tmp, final)
    return final, sha


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
    (:func:`_train_with_faults`, the kills chosen by :class:`_KillSchedule`), everything stopped, the
    verdicts (:func:`_verdicts`)."""
    cluster = LoopbackCluster(workdir)
    res = CheckResult()
    log = _EventLog(res, time.time())
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
        schedule = _KillSchedule(after_first_kill, restart_wait_s)
        _train_with_faults(cluster, algo, res, log, ckpt_root, schedule, kill_delay_s, max_iterations)
        algo.stop()
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.stop()
    if res.stop_line:
        print(res.stop_line, flush=True)
    _verdicts(res, cluster, ckpt_root)
    return res


@dataclass
class _EventLog:
    """Print an event with the seconds since ``t0`` and keep it in ``res.events``."""

    res: CheckResult
    t0: float

    def __call__(self, text: str) -> None:
        line = f"[{time.time() - self.t0:6.1f} s] {text}"
        self.res.events.append(line)
        print(line, flush=True)


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


@dataclass
class _KillSchedule:
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


def _train_with_faults(
    cluster: LoopbackCluster,
    algo: Any,
    res: CheckResult,
    log: _EventLog,
    ckpt_root: Path,
    schedule: _KillSchedule,
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
    log: _EventLog,
    algo: Any,
    result: dict[str, Any],
    it: int,
    phase: str,
    nodes_after: list[str],
    ip_of: dict[str, str],
    ckpt_root: Path,
) -> list[str]:
    """Keep a completed iteration in ``res`` (env steps sampled, the env runners' nodes and addresses),
    write its checkpoint atomically (:func:`_save_atomic`) and log it; the env runners' addresses, sorted."""
    steps = int(result.get("env_runners", {}).get("num_env_steps_sampled", 0) or 0)
    ips = sorted(ip_of.get(n, "?") for n in nodes_after)
    res.iterations.append({"iteration": it, "phase": phase, "env_steps": steps, "runner_ips": ips,
                           "runner_nodes": nodes_after, "t": time.time() - log.t0})  # fmt: skip
    path, sha = _save_atomic(algo, ckpt_root, it)
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
        got = _weights_sha(module.get_state())
        saved = (path / "weights.sha256").read_text().strip()
        ok &= got == sha == saved
    ok &= not list(ckpt_root.glob(".*.partial"))
    v[f"all {len(res.checkpoints)} checkpoints load with the weights they were saved with"] = ok


def main(argv: list[str] | None = None) -> int:
    from ainet_gym.agents.outputs import OneLineParser, int_arg  # one-line errors, as ainet-gym's

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
