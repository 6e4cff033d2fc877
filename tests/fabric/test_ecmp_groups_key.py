"""``ecmp_groups`` numbers the groups by one integer key per link (source x width + key): the same groups, in
the same order, as ``np.unique`` of the (source, key) rows it used before (issue-31zu2)."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.fabric.paths import ecmp_groups


def _rows_reference(level, link_src, link_dst, is_switch):
    """The function before: ``np.unique`` over the (links, 2) rows."""
    up = level[link_dst] > level[link_src]
    keys = np.where(up, -1, link_dst)
    _, group = np.unique(np.stack([link_src, keys], axis=1), axis=0, return_inverse=True)
    group = group.reshape(-1)
    sizes = np.bincount(group)
    link_group = np.where(is_switch[link_src] & (sizes[group] > 1), group, -1)
    valid = link_group >= 0
    if valid.any():
        _, dense = np.unique(link_group[valid], return_inverse=True)
        link_group[valid] = dense
    return link_group


@pytest.mark.parametrize("seed", range(20))
def test_one_key_per_link_groups_as_the_rows_did(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    links = int(rng.integers(1, 400))
    level = rng.integers(0, 4, size=n).astype(np.int64)
    link_src = rng.integers(0, n, size=links).astype(np.int64)
    link_dst = rng.integers(0, n, size=links).astype(np.int64)
    is_switch = rng.random(n) < 0.7
    got = ecmp_groups(level, link_src, link_dst, is_switch)
    want = _rows_reference(level, link_src, link_dst, is_switch)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
