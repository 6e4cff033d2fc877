"""Fresh-process probes of the benchmark (``python -P path/to/probe.py``, as the bench runs it, so that
the process imports only what a user's would; ``python -m ainet_gym.bench.probe`` works too).

Reads a JSON object from stdin, prints one JSON line on stdout. Two probes:

* ``{"probe": "construction", "scenario": ...}``: construction time (topology; env with every
  candidate path, compiled job and ideal step time, and the first reset) and peak resident memory;
* ``{"probe": "startup", "scenario": ..., "backend": ...}``: wall time from process start to the first
  env step done (imports, construction, compilation or loading of the compiled kernels, first step). Run
  with an empty ``NUMBA_CACHE_DIR`` it measures a cold start (the kernels compile); run again with the same
  directory, a start with the on-disk cache.

Each probe runs in its own process so that its memory peak and its start-up costs are its own. With
``"clock": "cpu"`` in the object (``ainet-gym bench --clock cpu``) the seconds are the process's CPU seconds.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from typing import Any

#: the clock the probes read: ``time.perf_counter``, or ``time.process_time`` for ``"clock": "cpu"`` (set by
#: :func:`main`; this process starts no children, so its CPU time is the bench's ``cpu`` clock here)
_clock = time.perf_counter


def peak_mib() -> float:
    """This process's peak resident set in MiB (``VmHWM``; ``ru_maxrss`` survives ``execve`` on Linux, so
    it would report the parent's peak when the parent is larger)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def construction(scenario: Any) -> dict[str, Any]:
    """Construction time and peak memory of ``scenario`` (a name, path or dict)."""
    from ainet_gym.envs.env import FabricRoutingEnv
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.scenario.loader import load_scenario

    base = peak_mib()
    t0 = _clock()
    sc = load_scenario(scenario)
    fab = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    t_topo = _clock() - t0
    n_links = fab.n_links
    del fab
    t0 = _clock()
    env = FabricRoutingEnv(sc)
    env.reset(seed=0)
    t_env = _clock() - t0
    sim = env.unwrapped.core.world.sim
    assert sim is not None
    return {
        "topology_s": t_topo,
        "env_s": t_env,
        "links": n_links,
        "connections": int(sim.n_conns),
        "peak_rss_mib": peak_mib(),
        "import_rss_mib": base,
    }


def startup(scenario: Any, backend: str | None) -> dict[str, Any]:
    """Seconds to construct the env (kernels compiled or loaded from the cache on first use) and to run its
    first step; the parent measures the whole process (interpreter start and imports included)."""
    import numpy as np

    from ainet_gym.envs.env import FabricRoutingEnv  # imported with the package already

    t0 = _clock()
    env = FabricRoutingEnv(scenario, backend=backend)
    env.reset(seed=0)
    t_construct = _clock() - t0
    t0 = _clock()
    env.step(np.zeros(env.action_space.shape, dtype=np.float32))
    t_step = _clock() - t0
    return {
        "backend": env.unwrapped.core.world.backend,
        "construct_s": t_construct,
        "first_step_s": t_step,
    }


def main() -> int:
    global _clock
    spec = json.loads(sys.stdin.read())
    probe = spec.get("probe", "construction")
    _clock = time.process_time if spec.get("clock") == "cpu" else time.perf_counter
    if probe == "construction":
        out = construction(spec["scenario"])
    elif probe == "startup":
        out = startup(spec["scenario"], spec.get("backend"))
    else:
        from ainet_gym.errors import choice_message  # on the error path only: the probe imports nothing early

        raise SystemExit(choice_message("probe", probe, ("construction", "startup")))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
