"""issue-26zr: lookahead copies that re-draw the background phases a controller cannot observe
(:mod:`ainet_gym.sim.redraw`): the past and the interval about to run stay bit for bit, later bursts change;
off, the labels are those of before; bad arguments are refused with the field named."""

from __future__ import annotations

import numpy as np
import pytest
from _scenarios import collision_scenario

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import POLICIES
from ainet_gym.scenario.spec import BackgroundSpec
from ainet_gym.sim.redraw import FutureRedraw, consistent_offsets

IB = "ingest-bursts"
INGEST = {"kind": "storage", "pattern": "periodic", "period_steps": 6, "duration_steps": 2}


def _bg() -> BackgroundSpec:
    return BackgroundSpec(**INGEST, offset_steps=1, offset_jitter_steps=5)


def test_consistent_offsets_by_hand() -> None:
    # true offset 1, interval 10: off in 9 and 10 (phases 2, 3); offsets 5 and 6 are off there too, 2-4 are not
    bg = _bg()
    assert consistent_offsets(bg, 1, 10, 1).tolist() == [1, 5, 6]
    assert consistent_offsets(bg, 1, 10, 0).tolist() == [1, 2, 5, 6]  # only interval 10 seen
    assert consistent_offsets(bg, 1, 10, 100).tolist() == [1]  # the whole history pins it
    assert consistent_offsets(bg, 3, 0, 1).tolist() == [1, 2, 3, 4, 5, 6]  # nothing seen yet
    assert consistent_offsets(bg, 3, 2, 1).tolist() == [3, 4, 5, 6]  # interval 2 scheduled off: not 1, 2


def _step(core: EnvCore) -> np.ndarray:
    # spray+bg (under static ECMP the ingest burst happens not to change any job's step on this seed)
    core.step_split(POLICIES["spray+bg"](core.routing_context, core.last_result))
    return np.asarray(core.last_result.step_time_s, dtype=np.float64)


def test_a_redrawn_copy_keeps_the_past_and_the_next_interval_and_changes_later_bursts() -> None:
    core = EnvCore(IB, batch=1, episode_steps=24)
    core.reset([100])
    o = int(core.world.state.bg_offset[0, 0])
    for _ in range(o + 3):  # to the first interval off after an interval off (phase 3): 3 offsets fit
        _step(core)
    t = int(core.world.state.step_count[0])
    assert len(consistent_offsets(core.world.scenario.background[0], o, t, 1)) == 3
    M = 12
    look = EnvCore(IB, batch=M, episode_steps=24)
    look.restore(core.snapshot(), np.zeros(M, dtype=np.int64))
    before = look.world.state.take(np.arange(M))
    look.redraw_background(FutureRedraw(M, seed=3), [100], 1)
    got = look.world.state.bg_offset[:, 0]
    assert set(got.tolist()) <= set(consistent_offsets(core.world.scenario.background[0], o, t, 1).tolist())
    assert (got != o).any() and (got == o).any()
    for k in before.INSTANCE_FIELDS:  # every other field of the episode state unchanged
        if k not in ("bg_offset", "rngs", "jobs", "gpus"):
            np.testing.assert_array_equal(getattr(look.world.state, k), getattr(before, k))
    assert look.world.state.jobs == before.jobs
    same, moved = got == o, got != o
    true_steps, copy_steps = [], []
    for _ in range(8):
        true_steps.append(_step(core))
        copy_steps.append(_step(look))
    # the interval about to run: every copy bit for bit as the true episode
    assert np.array_equal(copy_steps[0], np.repeat(true_steps[0], M, axis=0), equal_nan=True)
    # the copies that drew the true offset: the whole future bit for bit; the others: a later burst differs
    for a, b in zip(true_steps, copy_steps):
        assert np.array_equal(b[same], np.repeat(a, same.sum(), axis=0), equal_nan=True)
    diff = [
        not np.array_equal(b[moved], np.repeat(a, moved.sum(), axis=0), equal_nan=True)
        for a, b in zip(true_steps, copy_steps)
    ]
    assert any(diff[1:])


def test_the_draws_depend_on_the_seeds_not_on_the_batch() -> None:
    r = FutureRedraw(4, seed=7)
    bg = _bg()
    a = r.draws(bg, 1, 10, 100, 0)
    assert np.array_equal(a, r.draws(bg, 1, 10, 100, 0))
    assert len(a) == 4 and set(a.tolist()) <= {1, 5, 6}
    others = [FutureRedraw(4, seed=s).draws(bg, 1, 10, 100, 0) for s in range(8)]
    assert any(not np.array_equal(a, x) for x in others)


def test_nothing_to_redraw_scores_as_the_true_future() -> None:
    from ainet_gym.agents.imitate import lookahead_labels

    sc = collision_scenario()
    off = lookahead_labels(sc, [0, 1], h=2, steps=3)
    on = lookahead_labels(sc, [0, 1], h=2, steps=3, redraw=FutureRedraw(3))
    np.testing.assert_array_equal(on["label"], off["label"])
    np.testing.assert_allclose(on["scores"], off["scores"], rtol=1e-12)
    np.testing.assert_array_equal(on["reward"], off["reward"])
    assert on["redraw"].tolist() == [3, 0, 1] and "redraw" not in off


def test_redrawn_labels_on_ingest_bursts_score_other_futures() -> None:
    from ainet_gym.agents.imitate import lookahead_labels

    kw = {"h": 4, "steps": 6, "base": "favour0+bg", "extra_plans": ("favour0+bg", "favour2+bg")}
    off = lookahead_labels(IB, [100, 101], **kw)
    on = lookahead_labels(IB, [100, 101], **kw, redraw=FutureRedraw(2, seed=1))
    K = len(off["plans"])
    assert on["scores"].shape == off["scores"].shape == (12, K)
    np.testing.assert_array_equal(on["obs"][0], off["obs"][0])  # the first decision's state is the same
    assert not np.allclose(on["scores"], off["scores"])


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"samples": 0}, "redraw_future"),
        ({"samples": 2.5}, "redraw_future"),
        ({"samples": True}, "redraw_future"),
        ({"samples": 2, "seed": -1}, "redraw_seed"),
        ({"samples": 2, "window": -1}, "redraw_window"),
    ],
)
def test_bad_arguments_are_refused_with_the_field_named(kw: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        FutureRedraw(**kw)


def test_a_world_of_another_layout_is_refused() -> None:
    core = EnvCore(IB, batch=3, episode_steps=4)
    core.reset([1, 2, 3])
    with pytest.raises(ValueError, match="2 samples"):
        core.redraw_background(FutureRedraw(2), [1], 1)


@pytest.mark.parametrize("flag", ["--redraw-future", "--redraw-seed", "--redraw-window"])
def test_the_label_command_refuses_a_negative_redraw_option(
    flag: str, tmp_path: object, capsys: object
) -> None:
    from ainet_gym.agents.imitate import main

    with pytest.raises(SystemExit):
        main(["label", IB, "--seeds", "100", "--out", f"{tmp_path}/x.npz", flag, "-1"])
    assert flag in capsys.readouterr().err
