"""What the snapshot and step-function tests share: every array of an episode state, compared bit for bit."""

from __future__ import annotations

import numpy as np

from ainet_gym.envs.state import EpisodeState


def _clone(g: np.random.Generator) -> np.random.Generator:
    h = np.random.Generator(type(g.bit_generator)())
    h.bit_generator.state = g.bit_generator.state
    return h


def episode_arrays(ep: EpisodeState) -> dict[str, np.ndarray]:
    """Every array of an episode state: the engine's, the world's and the core's containers (the world's
    generators as their next draws, taken from clones so that the state's own are not advanced)."""
    out = {f"sim.{k}": np.array(v) for k, v in vars(ep.sim).items()}
    out.update({f"engine.{k}": np.array(v) for k, v in vars(ep.engine).items() if v is not None})
    w = ep.world
    for k in ("step_count", "hash_seed", "bg_offset", "fail_until", "cap_factor"):
        out[f"world.{k}"] = np.array(getattr(w, k))
    out["world.rng"] = np.array([_clone(g).bit_generator.random_raw() for g in w.rngs])
    out["env.util_hist"] = ep.env.util_hist.copy()
    out["env.plan"] = ep.env.plan.copy()
    return out


def assert_states_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """The same keys, and each array equal bit for bit with the same dtype."""
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        assert a[k].dtype == b[k].dtype, k
