"""The cluster check's kill schedule (``ainet_gym.checks.cluster_faults``), without Ray: which node dies when."""

from __future__ import annotations

from ainet_gym.checks.cluster_faults import KillSchedule

NAMES = {"id-a": "worker1", "id-b": "worker2"}


def test_no_kill_in_the_first_iteration() -> None:
    s = KillSchedule(after_first_kill=2, restart_wait_s=300.0)
    assert s.victim(1, ["id-a", "id-b"], NAMES, ["worker1", "worker2"], now=0.0) is None


def test_the_first_kill_is_the_node_of_the_first_env_runner_in_iteration_2() -> None:
    s = KillSchedule(after_first_kill=2, restart_wait_s=300.0)
    assert s.victim(2, ["id-b", "id-a"], NAMES, ["worker1", "worker2"], now=0.0) == "worker2"
    assert s.victim(2, [], NAMES, ["worker1", "worker2"], now=0.0) is None  # no runner: nothing to kill


def test_was_killed_names_the_phase_and_keeps_the_first_kill_time() -> None:
    s = KillSchedule(after_first_kill=2, restart_wait_s=300.0)
    s.was_killed("worker2", killed_at=None, now=10.0)
    assert (s.killed, s.phase, s.first_kill_t) == (["worker2"], "after killing worker2", 10.0)
    s.was_killed("worker1", killed_at=50.0, now=60.0)
    assert (s.phase, s.first_kill_t) == ("after killing worker2, worker1", 10.0)


def test_the_second_kill_waits_for_the_iterations_and_the_restart() -> None:
    s = KillSchedule(after_first_kill=2, restart_wait_s=300.0)
    s.was_killed("worker2", killed_at=5.0, now=6.0)
    s.after_first = 1  # one iteration completed after the first kill: too soon
    assert s.victim(4, ["id-a", "id-a"], NAMES, ["worker1"], now=20.0) is None
    s.after_first = 2
    assert s.victim(5, ["id-a", "id-a"], NAMES, ["worker1"], now=30.0) == "worker1"  # runner restored
    assert s.victim(5, ["id-a"], NAMES, ["worker1"], now=30.0) is None  # not restored, still waiting
    assert s.victim(5, ["id-a"], NAMES, ["worker1"], now=306.0) == "worker1"  # waited restart_wait_s
    assert s.victim(5, ["id-a", "id-a"], NAMES, [], now=30.0) is None  # no worker left alive


def test_no_third_kill() -> None:
    s = KillSchedule(after_first_kill=0, restart_wait_s=0.0)
    s.was_killed("worker2", killed_at=1.0, now=1.0)
    s.was_killed("worker1", killed_at=2.0, now=2.0)
    assert s.victim(9, ["id-a", "id-b"], NAMES, ["worker1"], now=99.0) is None


def test_the_timeline_with_a_fake_cluster(monkeypatch, tmp_path) -> None:
    """``train_with_faults`` on a fake cluster and algorithm: the first runner's node dies in iteration 2,
    RLlib's restart is seen, the other worker dies once two iterations completed after the first kill, and
    training stops with one line that names both kills."""
    import time
    from dataclasses import dataclass
    from pathlib import Path

    from ainet_gym.checks import cluster_faults as cl

    @dataclass
    class FakeNode:
        name: str
        ip: str
        node_id: str
        killed_at: float | None = None

    class FakeCluster:
        def __init__(self) -> None:
            self.nodes = {
                n.name: n
                for n in (
                    FakeNode("head", "127.0.0.2", "id-h"),
                    FakeNode("worker1", "127.0.0.3", "id-a"),
                    FakeNode("worker2", "127.0.0.4", "id-b"),
                )
            }

        def kill(self, name: str) -> None:
            self.nodes[name].killed_at = time.time()

    fake = FakeCluster()

    def runner_nodes(algo: object) -> list[str]:  # two runners, restarted on the worker that remains
        live = [n.node_id for n in fake.nodes.values() if n.name != "head" and n.killed_at is None]
        return [live[0], live[-1]] if live else []

    class FakeAlgo:
        def train(self) -> dict:
            time.sleep(0.05)  # the kill lands mid-iteration
            return {"env_runners": {"num_env_steps_sampled": 64}}

    monkeypatch.setattr(cl, "_runner_nodes", runner_nodes)
    monkeypatch.setattr(cl, "save_atomic", lambda algo, root, it: (Path(f"iter-{it:03d}"), "sha"))
    res = cl.CheckResult()
    schedule = cl.KillSchedule(after_first_kill=2, restart_wait_s=300.0)
    log = cl.EventLog(res, time.time())
    cl.train_with_faults(fake, FakeAlgo(), res, log, tmp_path, schedule, 0.0, 40)  # type: ignore[arg-type]
    assert [r["phase"] for r in res.iterations] == [
        "before any fault",
        "after killing worker1",
        "after killing worker1",
        "after killing worker1, worker2",
    ]
    assert [r["runner_ips"] for r in res.iterations[:3]] == [
        ["127.0.0.3", "127.0.0.4"],
        ["127.0.0.4", "127.0.0.4"],
        ["127.0.0.4", "127.0.0.4"],
    ]
    assert res.restart_s is not None and res.restart_s >= 0
    assert res.stop_line is not None and "\n" not in res.stop_line
    assert res.stop_line.startswith("ainet-gym cluster: training stopped in iteration 5")
    assert "killed: worker1 (127.0.0.3), worker2 (127.0.0.4)" in res.stop_line
    assert "last checkpoint iter-004 is intact [no env runner left]" in res.stop_line
    assert len(res.checkpoints) == 4
