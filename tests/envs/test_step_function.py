"""The step as a function of (structure, state, action) -> (state, result): ``ainet_gym.envs.env.step``.

References: ``EnvCore.step`` on a core of its own (the method the function replaces), and the rollouts of
cores that each run one episode alone. One core stepping two episodes in turns must give each episode's
own rollout, bit for bit: anything a step read or wrote outside the core's structure and the state it was
handed (an attribute left over from the other episode) would show as a difference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import churn_dynamics, small_spine_leaf
from _states import assert_states_equal, episode_arrays

from ainet_gym.envs.env import EnvCore, reset, step, step_split
from ainet_gym.routing.policies import POLICIES
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
INFO = ("links", "flows", "collisions")


def _scenario(kind: str) -> dict:
    """``dynamic``: failures, churn (restacks), jittered background and starts; ``carry`` / ``parts``: the
    engine state's optional fields (pinned splits, part flows) under random failures."""
    if kind == "dynamic":
        sc = small_spine_leaf(10, name="dynamic", **churn_dynamics(arrival_rate=0.6, mean_steps=3))
        for job in sc["workload"]["jobs"]:
            job["start_jitter_ms"] = 20.0
        sc["workload"]["background"][0]["offset_jitter_steps"] = 2
        return sc
    sc = small_spine_leaf(12, name=kind, link_failures={"rate_per_step": 0.5, "repair_steps": 2})
    sc["routing"].update({"reroute": "new_transfers"} if kind == "carry" else {"split_flows": "independent"})
    return sc


def _core(kind: str, backend: str, mode: str = "split", batch: int = 2) -> EnvCore:
    return EnvCore(_scenario(kind), batch=batch, action_mode=mode, backend=backend, info_keys=INFO)


def _actions(core: EnvCore, seed: int, n: int) -> list[np.ndarray]:
    sp = core.action_space
    sp.seed(seed)
    return [np.stack([sp.sample() for _ in range(core.batch)]) for _ in range(n)]


def _out(o: tuple) -> tuple:
    obs, r, term, trunc, info = o
    return (
        np.array(obs),
        np.array(r),
        np.array(term),
        np.array(trunc),
        {k: np.array(v) for k, v in info.items()},
    )


def _assert_same(x: list, y: list) -> None:
    assert len(x) == len(y)
    for a, b in zip(x, y, strict=True):
        for u, v in zip(a[:4], b[:4], strict=True):
            np.testing.assert_array_equal(u, v)
            assert u.dtype == v.dtype
        assert a[4].keys() == b[4].keys()
        for k in a[4]:
            np.testing.assert_array_equal(a[4][k], b[4][k], err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind,mode", [("dynamic", "split"), ("dynamic", "choose_bg"), ("dynamic", "path"),
                                       ("carry", "split"), ("parts", "split")])  # fmt: skip
def test_the_function_gives_what_the_method_gives(backend: str, kind: str, mode: str) -> None:
    """A chain ``state, out = step(core, state, a)`` from a reset gives what ``EnvCore.step`` gives on a
    core of its own, bit for bit (every output array and info key), and ends in the same episode state; the
    state returned is the core's (``core.episode_state``), and the method is the function on it."""
    a_core, f_core = _core(kind, backend, mode), _core(kind, backend, mode)
    a_core.reset([3, 4])
    f_core.reset([3, 4])
    acts = _actions(a_core, 9, 8)
    want = [_out(a_core.step(a)) for a in acts]
    state = f_core.episode_state
    got = []
    for a in acts:
        state, out = step(f_core, state, a)
        got.append(_out(out))
        assert state is f_core.episode_state and f_core.holds(state)
    _assert_same(want, got)
    assert_states_equal(episode_arrays(a_core.episode_state), episode_arrays(state))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["dynamic", "carry", "parts"])
def test_one_core_steps_two_episodes_in_turns(backend: str, kind: str) -> None:
    """One core steps two episodes (other seeds, so other jobs, failures and units under churn) in turns,
    each handed back the state its last step returned: each episode's rollout and end state are those of a
    core that ran it alone. Nothing of one episode is left in the core where the other's step reads it."""
    seeds = ([5, 6], [7, 8])
    alone = []
    for s in seeds:
        core = _core(kind, backend)
        core.reset(s)
        acts = _actions(core, s[0], 7)
        alone.append(([_out(core.step(a)) for a in acts], episode_arrays(core.episode_state), acts))
    shared = _core(kind, backend)
    states = []
    for s in seeds:
        shared.reset(s)
        states.append(shared.episode_state.copy())  # a reset episode, taken out of the core
    outs: list[list] = [[], []]
    for t in range(7):
        for i in (0, 1):
            states[i], out = step(shared, states[i], alone[i][2][t])
            outs[i].append(_out(out))
    for i in (0, 1):
        _assert_same(alone[i][0], outs[i])
        assert_states_equal(alone[i][1], episode_arrays(states[i]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["dynamic", "parts"])
def test_a_state_goes_on_in_a_core_that_never_ran_and_a_copy_stays(backend: str, kind: str) -> None:
    """A copy of a state after some steps, stepped in a core that was never reset, gives the original core's
    continuation bit for bit (bound, the core has the split's entries the original had); the copy handed over is written (by reference), a second copy kept aside is
    not, and stepping that one again gives the same outputs once more."""
    core = _core(kind, backend)
    core.reset([1, 2])
    acts = _actions(core, 4, 9)
    for a in acts[:3]:
        core.step(a)
    kept = core.episode_state.copy()
    before = episode_arrays(kept)
    sim = core.world.sim
    entries = [np.array(x) for x in (sim.e_flow, sim.e_link, sim.e_coef)]  # the split's, as merged
    want = [_out(core.step(a)) for a in acts[3:]]
    end = episode_arrays(core.episode_state)
    for _ in range(2):
        fresh = _core(kind, backend)
        state = kept.copy()
        fresh.bind(state)  # (what step does first) the entries of the bound split, merged again
        bound = fresh.world.sim
        for x, y in zip(entries, (bound.e_flow, bound.e_link, bound.e_coef), strict=True):
            np.testing.assert_array_equal(x, y)
        got = []
        for a in acts[3:]:
            state, out = step(fresh, state, a)
            got.append(_out(out))
        _assert_same(want, got)
        assert_states_equal(end, episode_arrays(state))
        assert_states_equal(before, episode_arrays(kept))


def test_bind_refuses_a_state_that_does_not_fit() -> None:
    """A state of another batch, of a core not reset, or of units laid out otherwise (another scenario) is
    refused, naming why; after the last the core goes on with its own episode as if nothing happened."""
    core = _core("dynamic", "numpy")
    core.reset([1, 2])
    twin = _core("dynamic", "numpy")
    twin.reset([1, 2])
    with pytest.raises(ValueError, match="is not an EpisodeState"):
        step(core, core.snapshot(), np.zeros((2, *core.action_space.shape)))  # type: ignore[arg-type]
    other = _core("dynamic", "numpy", batch=3)
    other.reset([1, 2, 3])
    with pytest.raises(ValueError, match=r"link history has shape \(3, 4, \d+\), this core's \(2, 4, \d+\)"):
        core.bind(other.episode_state)
    never = _core("dynamic", "numpy")
    with pytest.raises(RuntimeError, match="not reset yet"):
        core.bind(replace(core.episode_state, env=never.state))
    held = core.episode_state
    carry = _core("carry", "numpy")
    carry.reset([1, 2])
    with pytest.raises(ValueError, match="do not have 4 job slots"):
        core.bind(carry.episode_state)
    mixed = replace(core.episode_state.copy(), units=carry.episode_state.units)  # arrays not of its units
    with pytest.raises(ValueError, match="units are not laid out as this world's"):
        core.bind(mixed)
    assert core.holds(held)
    acts = _actions(core, 2, 4)
    _assert_same([_out(twin.step(a)) for a in acts], [_out(core.step(a)) for a in acts])


def _attributes(obj: object) -> dict[str, tuple[object, np.ndarray | None]]:
    """Each attribute of ``obj``: the object, and a copy of it when it is an array."""
    return {k: (v, v.copy() if isinstance(v, np.ndarray) else None) for k, v in vars(obj).items()}


def _changed(obj: object, before: dict) -> set[str]:
    """The attributes of ``obj`` added, replaced or (arrays) written since ``before``."""

    def moved(k: str, v: object) -> bool:
        if k not in before or v is not before[k][0]:
            return True
        return before[k][1] is not None and not np.array_equal(v, before[k][1], equal_nan=True)

    return {k for k, v in vars(obj).items() if moved(k, v)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind,mode", [("dynamic", "split"), ("dynamic", "choose_bg"), ("parts", "split")])
def test_a_step_writes_only_the_state_and_the_declared_derived_caches(
    backend: str, kind: str, mode: str
) -> None:
    """What steps change of the core, the world and its link state (an attribute added, replaced, or an
    array written) is the episode state or a cache the class declares as derived (``DERIVED``: made again,
    or checked by identity, from the structure and the state); everything else is structure. With failures,
    churn (restacks) and background, on both backends. Together with the episodes stepped in turns above
    (which the caches must not carry from one episode to the other), the step reads and writes only the
    structure and the state."""
    from ainet_gym.sim.dynamics import LinkState
    from ainet_gym.sim.world import FabricWorld

    core = _core(kind, backend, mode)
    core.reset([1, 2])
    acts = _actions(core, 3, 8)
    core.step(acts[0])
    w = core.world
    before = (_attributes(core), _attributes(w), _attributes(w.links))
    for a in acts[1:]:
        core.step(a)
    assert _changed(core, before[0]) <= {"state"} | EnvCore.DERIVED
    assert _changed(w, before[1]) <= {"state"} | FabricWorld.DERIVED
    assert _changed(w.links, before[2]) <= LinkState.STATE | LinkState.DERIVED
    assert w.links.fail_until is w.state.fail_until and w.links.cap_factor is w.state.cap_factor
    assert _changed(core, before[0]) & {"_default", "_slot_bytes"}  # (the check sees changes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_as_a_function_starts_a_new_episode_beside_the_held_one(backend: str) -> None:
    """``reset(core, seeds)`` returns a new episode state: its reset output and rollout are those of a core
    reset with those seeds, while the state the core held goes on, stepped in turns with it, as a core that
    never saw the new episode."""
    ref_new = _core("dynamic", backend)
    obs_ref, info_ref = ref_new.reset([7, 8])
    acts = _actions(ref_new, 1, 6)
    want_new = [_out(ref_new.step(a)) for a in acts]
    ref_old = _core("dynamic", backend)
    ref_old.reset([1, 2])
    ref_old.step(acts[0])
    want_old = [_out(ref_old.step(a)) for a in acts]
    core = _core("dynamic", backend)
    core.reset([1, 2])
    core.step(acts[0])
    held = core.episode_state
    new, (obs, info) = reset(core, [7, 8])
    assert new is not held and core.holds(new)
    _assert_same([_out((obs_ref, 0, 0, 0, info_ref))], [_out((obs, 0, 0, 0, info))])
    got_new, got_old = [], []
    for a in acts:
        new, out = step(core, new, a)
        got_new.append(_out(out))
        held, out = step(core, held, a)
        got_old.append(_out(out))
    _assert_same(want_new, got_new)
    _assert_same(want_old, got_old)


def _split(core: EnvCore, rng: np.random.Generator, t: int) -> np.ndarray:
    """A split of every connection for step ``t`` of the episode ``core`` holds: ``greedy+bg`` (it reads the
    last interval's link loads: the state) on even steps, ``spray+bg`` reweighted at random (rows
    renormalised) on odd ones, so the splits of two episodes differ."""
    if t % 2 == 0:
        return np.array(POLICIES["greedy+bg"](core.routing_context, core.last_result))
    s = np.array(POLICIES["spray+bg"](core.routing_context, core.last_result))
    s *= rng.uniform(0.1, 1.0, (1, core.P))
    total = s.sum(axis=1, keepdims=True)
    return np.divide(s, total, out=np.zeros_like(s), where=total > 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind,mode", [("dynamic", "split"), ("dynamic", "choose_bg"), ("carry", "split"),
                                       ("parts", "split")])  # fmt: skip
def test_step_split_as_a_function_gives_what_the_method_gives(backend: str, kind: str, mode: str) -> None:
    """A chain ``state, out = step_split(core, state, split)`` from a reset, with the splits an engine-level
    policy computes from each state (and an action step between, through ``step``), gives what
    ``EnvCore.step_split`` / ``EnvCore.step`` give on a core of their own, bit for bit, and ends in the same
    episode state; the state returned is the one the core holds."""
    m_core, f_core = _core(kind, backend, mode), _core(kind, backend, mode)
    m_core.reset([3, 4])
    f_core.reset([3, 4])
    acts = _actions(m_core, 9, 7)
    rm, rf = np.random.default_rng(5), np.random.default_rng(5)
    want, got = [], []
    state = f_core.episode_state
    for t, a in enumerate(acts):
        if t == 3:  # an action step in the middle of the chain: the two forms share one state
            want.append(_out(m_core.step(a)))
            state, out = step(f_core, state, a)
        else:
            want.append(_out(m_core.step_split(_split(m_core, rm, t))))
            state, out = step_split(f_core, state, _split(f_core, rf, t))
        got.append(_out(out))
        assert state is f_core.episode_state and f_core.holds(state)
    _assert_same(want, got)
    assert_states_equal(episode_arrays(m_core.episode_state), episode_arrays(state))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["dynamic", "carry", "parts"])
def test_step_split_steps_two_episodes_in_turns(backend: str, kind: str) -> None:
    """One core steps two episodes in turns with ``step_split``, each handed back its own state and the splits
    a core that ran the episode alone computed (recorded, so the shared core never binds a state by itself
    before the call): each episode's outputs and end state are the lone core's, bit for bit. A
    ``step_split`` that ran the state the core held instead of the state it was handed fails this."""
    seeds = ([5, 6], [7, 8])
    alone = []
    for s in seeds:
        core = _core(kind, backend)
        core.reset(s)
        rng = np.random.default_rng(s[0])
        splits, outs = [], []
        for t in range(6):
            splits.append(_split(core, rng, t))
            outs.append(_out(core.step_split(splits[-1])))
        alone.append((outs, episode_arrays(core.episode_state), splits))
    shared = _core(kind, backend)
    states = []
    for s in seeds:
        shared.reset(s)
        states.append(shared.episode_state.copy())
    outs2: list[list] = [[], []]
    for t in range(6):
        for i in (0, 1):
            states[i], out = step_split(shared, states[i], alone[i][2][t])
            outs2[i].append(_out(out))
    for i in (0, 1):
        _assert_same(alone[i][0], outs2[i])
        assert_states_equal(alone[i][1], episode_arrays(states[i]))


def test_step_split_refuses_what_the_method_refuses() -> None:
    """The function and the method refuse a split of the wrong shape or with a negative or non-finite ratio,
    and a core not reset, with the same messages; a refused split leaves the state as it was."""
    core = _core("dynamic", "numpy")
    with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\)"):
        core.step_split(np.zeros((1, core.P)))
    core.reset([1, 2])
    state = core.episode_state
    before = episode_arrays(state)
    good = core.world.default_split()
    for bad, msg in [(good[:, :1], "split shape"), (-good, "finite and >= 0"), (good * np.nan, "finite")]:
        with pytest.raises(ValueError, match=msg):
            core.step_split(bad)
        with pytest.raises(ValueError, match=msg):
            step_split(core, state, bad)
    assert_states_equal(before, episode_arrays(core.episode_state))
