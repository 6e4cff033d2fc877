"""Property tests over inputs nobody here wrote: generated graph fabrics (random layered DAGs, parallel
links, attributes of every type) and generated command lines (each subcommand, random flags and values).

Each run must end in success or in exit 2 with one line on stderr: no traceback, no hang past 60 s, no
memory past 2 GiB (command lines run in a subprocess under ``RLIMIT_AS``), and no file changed outside
the output folders (``out/``, ``runs/``, ``bench-results/`` of the working directory).

CI runs a small sample (about a minute). A longer run::

    AINET_GYM_FUZZ_EXAMPLES=400 .venv/bin/python -m pytest -q tests/cli/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym.scenario.loader import scenarios_dir

SCALE = int(os.environ.get("AINET_GYM_FUZZ_EXAMPLES", "0"))
GRAPH_EXAMPLES = SCALE or 25
CLI_EXAMPLES = max(SCALE // 5, 8) if SCALE else 8
TIMEOUT_S = 60
MEMORY_BYTES = 2 * 2**30
OUTPUT_DIRS = ("out", "runs", "bench-results")


def _snapshot(root: Path) -> dict[str, str]:
    """Hash of every file under ``root`` outside the output folders."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in OUTPUT_DIRS:
            out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@contextlib.contextmanager
def _deadline(seconds: int):
    def boom(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------- graph fabrics

_NUMBERS = st.one_of(
    st.integers(-5, 5),
    st.integers(1, 10**6),
    st.integers(10**20, 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["400", "1e9", "abc", "", " 7 ", "1e400", "-0", "0x10"]),
    st.booleans(),
)


@st.composite
def graph_files(draw, tmp: Path) -> Path:
    """A scenario whose fabric is a generated graph file (edge list or GraphML)."""
    G = nx.MultiGraph()
    tiers = [draw(st.integers(1, 4)), draw(st.integers(0, 3)), draw(st.integers(0, 2))]
    names = [[f"s{t}_{i}" for i in range(n)] for t, n in enumerate(tiers)]
    for layer in names:
        for n in layer:
            G.add_node(n, role=draw(st.sampled_from(["switch"] * 8 + ["nic", "gpu", "warp"])))
    good_speed = st.sampled_from([100, 400, 800])
    speed = st.one_of(good_speed, good_speed, good_speed, _NUMBERS)
    layers = [x for x in names if x]
    for lower, upper in itertools.pairwise(layers):
        for u in lower:
            for v in draw(st.lists(st.sampled_from(upper), min_size=0, max_size=len(upper), unique=True)):
                for _ in range(draw(st.integers(1, 4))):
                    attrs = {"gbps": draw(speed)}
                    if draw(st.booleans()):
                        attrs["latency_us"] = draw(st.one_of(st.just(1.0), _NUMBERS))
                    G.add_edge(u, v, **attrs)
    hosts = draw(st.integers(1, 4))
    per_host = draw(st.integers(1, 3))
    for h in range(hosts):
        for r in range(per_host):
            g = f"g{h}_{r}"
            G.add_node(g, role="gpu", host=draw(st.one_of(st.just(h), st.just(h), _NUMBERS)))
            G.add_edge(g, draw(st.sampled_from(names[0])), gbps=draw(speed))
    graphml = draw(st.booleans())
    f = tmp / ("fabric.graphml" if graphml else "fabric.edges")
    if graphml:
        H = nx.MultiGraph()  # GraphML needs one type per attribute: write every value as text
        for n, d in G.nodes(data=True):
            H.add_node(n, **{k: str(v) for k, v in d.items()})
        for u, v, d in G.edges(data=True):
            H.add_edge(u, v, **{k: str(v) for k, v in d.items()})
        nx.write_graphml(H, f)
    else:
        lines = [
            f"node {n} " + " ".join(f"{k}={str(v).replace(' ', '')}" for k, v in d.items())
            for n, d in G.nodes(data=True)
        ]
        lines += [
            f"{u} {v} " + " ".join(f"{k}={str(x).replace(' ', '')}" for k, x in d.items())
            for u, v, d in G.edges(data=True)
        ]
        f.write_text("\n".join(lines) + "\n")
    gpus = hosts * per_host
    sc = tmp / "graph.yaml"
    sc.write_text(
        f"name: fuzz\nfabric: {{topology: graph, file: {f.name}}}\n"
        f"workload: {{jobs: [{{name: a, gpus: {max(1, min(gpus, 2))}, compute_ms: 1, "
        "collectives: [{op: allreduce, bytes: 1.0e6}]}]}\n"
    )
    return sc


@settings(max_examples=GRAPH_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_graph_fabrics_load_or_are_refused_in_one_line(data, tmp_path_factory, capsys) -> None:
    from ainet_gym.cli import main

    tmp = tmp_path_factory.mktemp("g")
    sc = data.draw(graph_files(tmp))
    before = _snapshot(tmp)
    capsys.readouterr()
    with _deadline(TIMEOUT_S):
        rc = main(["simulate", str(sc), "--steps", "1", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc in (0, 2), (rc, err)
    if rc == 2:
        assert len(err) == 1 and "Traceback" not in err[0], err
    assert _snapshot(tmp) == before


# ---------------------------------------------------------------------- command lines

_BAD = st.sampled_from(
    [
        "-1",
        "0",
        "",
        " ",
        "nan",
        "inf",
        "1e400",
        "9" * 400,
        "9" * 5000,
        "abc",
        "--",
        "1,2,,",
        "-",
        "../x",
        "1-0",
    ]
)
_SMALL = st.sampled_from(["1", "2", "3"])
_NAME = st.sampled_from(["spine-leaf-2to1", "periodic-interference", "nope", "in/mine.yaml", "in", ""])
_POLICIES = st.sampled_from(
    ["ecmp", "ecmp,spray", "ppo:in/nothing.zip", "graph:in/mine.yaml", "rllib:in", "warp", ","]
)


def _flag(name: str, values) -> st.SearchStrategy:
    return st.one_of(st.just([]), values.map(lambda v: [name, v]))


@st.composite
def command_lines(draw) -> list[str]:
    """One subcommand with a random subset of its flags, each with a small valid or an invalid value
    (work is kept small, so a valid command finishes within the time cap)."""
    cmd = draw(
        st.sampled_from(
            ["scenarios", "simulate", "export-fabric", "evaluate", "train", "bench", "leaderboard", "soak",
             "sweep", "convert-rllib", "crosscheck"]
        )
    )  # fmt: skip
    argv = [cmd]
    val = st.one_of(_SMALL, _BAD)
    if cmd in ("simulate", "export-fabric", "evaluate", "train", "soak", "crosscheck"):
        argv.append(draw(_NAME))
    if cmd == "simulate":
        argv += draw(_flag("--steps", val)) + draw(_flag("--seed", val)) + draw(_flag("--link-windows", val))
        argv += draw(st.sampled_from([[], ["--json"], ["--json", "--links"]]))
    elif cmd == "export-fabric":  # with --overwrite a file may be replaced: then only inside out/
        over = draw(st.booleans())
        targets = ["out/f.graphml", "out", ""] + ([] if over else ["in/mine.yaml"])
        argv += ["--graphml", draw(st.sampled_from(targets)), *(["--overwrite"] if over else [])]
    elif cmd == "evaluate":
        argv += [
            "--policies",
            draw(_POLICIES),
            "--steps",
            draw(val),
            "--seeds",
            draw(st.one_of(_SMALL, _BAD)),
        ]
        argv += ["--out", draw(st.sampled_from(["out/ev", "in", "out/ev.zip"]))]
    elif cmd == "train":
        argv += [
            "--timesteps",
            draw(st.sampled_from(["1", "-1", "abc"])),
            "--n-envs",
            draw(st.sampled_from(["1", "0"])),
        ]
        argv += draw(st.sampled_from([[], ["--framework", "rllib"], ["--resume", "in"], ["--algo", "warp"]]))
        argv += [
            "--out",
            draw(st.sampled_from(["out/m.zip", "in/mine.yaml", "out/m"])),
            "--logdir",
            "runs",
            "--no-progress",
        ]
    elif cmd == "bench":
        argv += [
            "--sections",
            draw(st.sampled_from([",", "warp", ""])),
            *draw(_flag("--out", st.sampled_from(["out/b", "in"]))),
        ]
    elif cmd == "leaderboard":
        argv += ["--env-ids", "none", "--scenarios", draw(st.sampled_from(["none", "nope", ","]))]
        argv += [*draw(_flag("--seeds", _BAD)), "--out", "out/lb"]
    elif cmd == "soak":
        argv += ["--steps", draw(_SMALL), "--num-envs", draw(st.sampled_from(["1", "0", "5000"]))]
        argv += draw(_flag("--modes", st.sampled_from(["", ",", "split", "warp"])))
        argv += draw(_flag("--max-seconds", st.sampled_from(["-1", "0", "nan", "5"])))
    elif cmd == "sweep":
        argv += (
            draw(_flag("--num-env-runners", val)) + draw(_flag("--seeds", _BAD)) + draw(_flag("--lrs", _BAD))
        )
        argv += ["--out", "out/sw"]
    elif cmd == "convert-rllib":
        argv += [
            draw(st.sampled_from(["in", "nope", ""])),
            *draw(st.sampled_from([[], ["--trust-checkpoint"]])),
        ]
    elif cmd == "crosscheck":
        argv += draw(_flag("--steps", val))
    return argv


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    (d / "in").mkdir()
    shutil.copy(scenarios_dir() / "periodic-interference.yaml", d / "in" / "mine.yaml")
    (d / "in" / "ainet_gym.json").write_text('{"framework": "rllib"}')
    return d


@settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(argv=command_lines())
def test_generated_command_lines_succeed_or_fail_in_one_line(argv, workdir) -> None:
    before = _snapshot(workdir)
    r = subprocess.run(
        [sys.executable, "-m", "ainet_gym.cli", *argv],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_cap,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    err = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert r.returncode in (0, 2), (argv, r.returncode, r.stderr[-3000:])
    if r.returncode == 2:
        assert len(err) == 1 and "Traceback" not in r.stderr, (argv, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, (argv, r.stderr[-3000:])
    # the output rule: no existing file outside the output folders is replaced or removed (new result files
    # beside a scenario are allowed: `evaluate mine.yaml --out .` writes next to its input by design)
    after = _snapshot(workdir)
    assert {k: after.get(k) for k in before} == before, argv
