"""Residual policies (``residual=`` on the env): the action adjusts a base routing's split instead of
setting one. Reference: the base policy's own split (actions of 0), and the factor a single knob link's
action puts on the paths through it, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import POLICIES


@pytest.mark.parametrize("mode", ["ecmp_weights", "split_bg"])
@pytest.mark.parametrize("base", ["lp+bg", "solo-lp+bg", "spray+bg"])
def test_zero_action_is_the_base_routing(mode: str, base: str) -> None:
    core = EnvCore("ingest-bursts", batch=2, action_mode=mode, residual=base)
    core.reset([1, 2])
    for _ in range(3):
        want = POLICIES[base](core.world, core.last_result)
        zero = np.zeros((2, *core.action_space.shape), dtype=np.float32)
        np.testing.assert_allclose(core.decode(core.validate(zero)), want, rtol=0, atol=1e-15)
        core.step(zero)


def test_a_knob_action_scales_the_paths_through_its_link_by_hand() -> None:
    core = EnvCore("periodic-interference-jitter", batch=1, action_mode="ecmp_weights", residual="spray+bg")
    core.reset([3])
    sim = core.world.sim
    a = np.zeros((1, *core.action_space.shape))
    a[0, 0] = 0.5  # knob link 0: paths through it get exp(0.5 * log 4) = 2 times their share, renormalised
    link = core.wcmp_links[0]
    split = core.decode(core.validate(a))
    base = POLICIES["spray+bg"](core.world, None)
    paths = sim.conn_paths_global  # (C, P, hops)
    through = (paths == link).any(axis=2)  # (C, P)
    c = int(np.flatnonzero(through.any(axis=1) & (sim.conn_npaths > 1))[0])
    n = int(sim.conn_npaths[c])
    k = int(through[c, :n].sum())
    # an even split over n paths, k of them through the link: those get 2 / (2k + n - k), the rest 1 / (...)
    want = np.where(through[c, :n], 2.0, 1.0) / (2 * k + (n - k))
    np.testing.assert_allclose(split[c, :n], want, rtol=1e-12)
    np.testing.assert_allclose(base[c, :n], 1.0 / n)


def test_bad_residual_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"residual = 'lp': not a base policy; allowed: .*lp\+bg"):
        EnvCore("ingest-bursts", action_mode="ecmp_weights", residual="lp")
    with pytest.raises(ValueError, match=r"with action_mode = 'split': a residual policy acts in"):
        EnvCore("ingest-bursts", action_mode="split", residual="lp+bg")
    with pytest.raises(ValueError, match=r"residual_scale = 0: allowed"):
        EnvCore("ingest-bursts", action_mode="split_bg", residual="lp+bg", residual_scale=0)
