"""A Ray cluster on loopback addresses of this machine for the cluster check (:mod:`ainet_gym.checks.cluster`):
a head and worker nodes, each a separate ``ray start --block`` in its own process group, with its own temp dir,
free ports and the cluster's token (:class:`LoopbackCluster`, its nodes :class:`Node`); only the workers offer
:data:`RUNNER_RESOURCE`. It starts them, kills one (``SIGKILL`` to its group) and stops them all."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "RUNNER_RESOURCE",
    "LoopbackCluster",
    "Node",
]


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
