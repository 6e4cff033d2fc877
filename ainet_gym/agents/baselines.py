"""Heuristic routing baselines, at the engine level and through every action mode of the env.

The baselines are the engine-level policies of :mod:`ainet_gym.routing.policies`:

- ``ecmp``: static hashing of each connection onto one candidate path (the default routing);
- ``spray``: an even split of the jobs' connections over every candidate path (packet spraying);
- ``wcmp``: weights at each switch's equal-cost next hops proportional to the link's current capacity;
- ``spray+bg``, ``wcmp+bg``: the same over all traffic, background (storage, checkpoints, other
  tenants) included;
- ``greedy``: the reactive router: connections placed one by one on the candidate path that was least
  loaded in the *last* interval (a step late when the congestion moves);
- ``lp``: the optimum: minimise the maximum offered link utilisation of the interval's known demand over
  the candidate paths (HiGHS through :func:`scipy.optimize.linprog`); the reference of ``gap_to_lp``;
- ``greedy+bg``, ``lp+bg``: the same algorithms over every multi-path connection, background included
  (the optimiser of the ``jobs+bg`` class: compare agents in the ``ecmp_weights`` and ``split_bg`` modes
  with it, not with ``lp``);
- ``solo-lp+bg``: the background sprayed, each job by the min-max LP as if it communicated alone;
- ``burst-lp+bg``: a switch between two of these on what the observation shows: ``solo-lp+bg`` in an
  interval for which a background source is scheduled on (an ingest burst), ``lp+bg`` otherwise
  (:func:`~ainet_gym.routing.policies.burst_lp_all`; :data:`SWITCHED`);
- ``favour0+bg`` ... ``favour7+bg`` (:data:`WEIGHTED_BASELINES`; ``favour{j}-w{W}+bg`` for another weight,
  :data:`STRICT_WEIGHTED_BASELINES` at 1e6): the static weighted plans of class ``jobs+bg+weights``: every interval the split of ``burst-lp+bg`` with job slot
  ``j``'s flows and the background at share weight ``W`` (default 16), the other jobs at 1
  (:mod:`ainet_gym.routing.plans`, "Weighted plans"). Engine level only.

The exact definitions (demand model, tie-breaking) are those of :mod:`ainet_gym.routing.policies`.

**Which traffic a policy controls** (``agent.controls``, a column of every evaluation table):
``none`` (ECMP), ``jobs`` (the jobs' connections; background stays on static ECMP: ``spray``, ``wcmp``,
``greedy``, ``lp`` and agents in the ``split`` and ``path`` modes), ``jobs+bg`` (background too:
``spray+bg``, ``wcmp+bg``, ``greedy+bg``, ``lp+bg`` and agents in the ``ecmp_weights`` and ``split_bg``
modes, which route every packet) or ``jobs+bg+weights`` (paths of all traffic and the share weights between
jobs: the ``favour{j}+bg`` baselines and agents of ``choose_bg`` with weighted extra plans). A fair comparison
sets policies of the same class side by side.

:func:`engine_split` gives the split ``(connections, max_paths)`` that ``core.step_split`` takes: the
evaluator runs the baselines this way, exactly. :func:`baseline_actions` expresses the same policy
through the env's action space (what an agent could do); where a mode cannot express a policy the
action is an approximation:

===========  =============================  ===============================  ============================
baseline     ``split``                      ``path``                         ``ecmp_weights``
===========  =============================  ===============================  ============================
ecmp         exact                          exact (approx. if qps > 1)       approx.: induced shares
spray        exact                          approx.: balanced rounding       jobs exact, moves bg [1]_
wcmp         exact                          approx.: balanced rounding       jobs exact, moves bg
greedy       exact                          exact                            approx.: induced shares
lp           exact                          approx.: balanced rounding       approx.: induced shares
spray+bg     exact for job traffic [2]_     approx.: balanced rounding       exact [1]_
wcmp+bg      exact for job traffic [2]_     approx.: balanced rounding       exact
greedy+bg    exact for job traffic [2]_     exact for job traffic [2]_       approx.: induced shares
lp+bg        exact for job traffic [2]_     approx.: balanced rounding       approx.: induced shares
solo-lp+bg   exact for job traffic [2]_     approx.: balanced rounding       approx.: induced shares
burst-lp+bg  exact for job traffic [2]_     approx.: balanced rounding       approx.: induced shares
===========  =============================  ===============================  ============================

.. [1] Equal weights on live next hops; exact while no link has failed (with a failed link the engine
   spreads evenly over the live *paths*, per-hop weights cannot always express that).
.. [2] In the ``split`` and ``path`` modes background traffic always follows static ECMP.

In the ``split_bg`` mode (a slot per connection, background included) every baseline is exact, for all
traffic.

In the discrete ``choose`` and ``choose_bg`` modes (one of K plans per interval,
:data:`ainet_gym.routing.plans.PLANS`) a baseline that is one of the mode's plans is exact (its index);
any other is the plan whose split is closest to it on the connections the mode routes (L1 distance,
ties: the lower index); ``burst-lp+bg`` is exact in ``choose_bg`` (its split is that of ``lp+bg`` or
``solo-lp+bg`` in every interval).

- *exact*: the env decodes the actions into the engine-level split (up to float32 round-off);
  ``tests/agents/test_agents.py`` checks every cell marked exact.
- *balanced rounding* (path mode, one path per connection): connections in decreasing order of demand,
  each on the path, among those the policy gives a positive share, whose most loaded link has the
  lowest offered utilisation so far (background and fixed traffic included). For an even split this is
  a balanced static assignment; for a one-hot split it is the split itself.
- *induced shares* (``ecmp_weights`` mode, one weight per switch next-hop link): each link's weight is
  the offered load the policy's split puts on it, relative to the most loaded link of its ECMP group (a
  group without load gets equal weights). Per-connection choices are lost; per-switch ratios are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.registry import RESOLVERS, register_agent
from ainet_gym.arrays import safe_divide
from ainet_gym.envs.env import ACTION_MODES
from ainet_gym.errors import check_choice
from ainet_gym.routing.greedy import place_least_loaded
from ainet_gym.routing.loads import controlled_connections
from ainet_gym.routing.lp import burst_lp_all
from ainet_gym.routing.plans import (
    CHOOSE_MODES,
    FAVOUR_SLOTS,
    PLANS,
    WEIGHTED_CLASS,
    plan_policy,
    plan_split,
    weighted_plan,
)
from ainet_gym.routing.policies import POLICIES, Policy, get_policy

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = [
    "BASELINES",
    "EXACT",
    "STRICT_WEIGHTED_BASELINES",
    "SWITCHED",
    "WEIGHTED_BASELINES",
    "BaselineAgent",
    "baseline_actions",
    "controls",
    "engine_split",
    "path_rounding",
    "split_to_actions",
]

BASELINES: tuple[str, ...] = (
    "ecmp", "spray", "wcmp", "greedy", "lp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg",
    "burst-lp+bg",
)  # fmt: skip

#: The static weighted plans (class ``jobs+bg+weights``) at the default weight; ``favour{j}-w{W}+bg`` names another
#: weight (:func:`ainet_gym.routing.plans.weighted_plan`)
WEIGHTED_BASELINES: tuple[str, ...] = tuple(f"favour{j}+bg" for j in range(FAVOUR_SLOTS))
#: The same plans at the largest share weight (1e6: in effect strict priority for the favoured job and the
#: background), the best static plan of the class on ``periodic-interference-jitter`` (docs/learning.md,
#: "issue-26zm"); the leaderboard ranks both weights.
STRICT_WEIGHTED_BASELINES: tuple[str, ...] = tuple(f"favour{j}-w1e6+bg" for j in range(FAVOUR_SLOTS))

#: Baselines that switch, interval by interval, between plans of their class on what the observation
#: shows; not engine-level policies of :data:`~ainet_gym.routing.policies.POLICIES` nor plans of the
#: ``choose`` modes themselves (each is a rule over the plans, as a learned ``choose`` policy is): name ->
#: (engine-level policy, class).
SWITCHED: dict[str, tuple[Policy, str]] = {"burst-lp+bg": (burst_lp_all, "jobs+bg")}

#: (baseline, action mode) pairs whose actions decode to the engine-level split exactly (for job
#: traffic in the split and path modes, where background follows ECMP; for all traffic in
#: ``ecmp_weights``).
EXACT: frozenset[tuple[str, str]] = frozenset(
    {
        ("ecmp", "split"),
        ("spray", "split"),
        ("wcmp", "split"),
        ("greedy", "split"),
        ("lp", "split"),
        ("spray+bg", "split"),
        ("wcmp+bg", "split"),
        ("greedy+bg", "split"),
        ("lp+bg", "split"),
        ("burst-lp+bg", "split"),
        ("burst-lp+bg", "choose_bg"),
        *(
            (name, "split_bg")
            for name in (
                "ecmp",
                "spray",
                "wcmp",
                "greedy",
                "lp",
                "spray+bg",
                "wcmp+bg",
                "greedy+bg",
                "lp+bg",
                "burst-lp+bg",
            )
        ),
        ("ecmp", "path"),
        ("greedy", "path"),
        ("greedy+bg", "path"),
        ("spray+bg", "ecmp_weights"),
        ("wcmp+bg", "ecmp_weights"),
    }
    | {(p, mode) for mode, cls in CHOOSE_MODES.items() for p in PLANS[cls]}
)


def controls(policy: str, action_mode: str | None = None) -> str:
    """The traffic ``policy`` routes (``none``, ``jobs`` or ``jobs+bg``; see the module docstring);
    through ``action_mode`` ``ecmp_weights`` every baseline but ECMP moves background too."""
    from ainet_gym.routing.policies import CONTROLS

    if weighted_plan(policy) is not None:
        return WEIGHTED_CLASS
    c = SWITCHED[policy][1] if policy in SWITCHED else CONTROLS[policy]
    if action_mode in CHOOSE_MODES:  # the agent picks among the plans of one class
        return CHOOSE_MODES[action_mode]
    if action_mode == "ecmp_weights" and c != "none":
        return "jobs+bg"
    if action_mode in ("split", "path") and c == "jobs+bg":
        return "jobs"
    return c


def engine_split(name: str, core: EnvCore) -> np.ndarray:
    """The engine-level split ``(connections, max_paths)`` of baseline ``name`` in the core's state."""
    if weighted_plan(name) is not None:
        policy = plan_policy(name)
    else:
        policy = SWITCHED[name][0] if name in SWITCHED else get_policy(name)
    return policy(core.routing_context, core.last_result)


def _check_name(name: str) -> None:
    """Raise ``ValueError`` naming ``name`` and the allowed baselines if it is not one (a misspelt weighted
    baseline: :func:`~ainet_gym.routing.plans.weighted_plan`'s message)."""
    if weighted_plan(name) is not None:
        return
    check_choice("baseline", name, [*POLICIES, *SWITCHED], more=", favour{j}+bg, favour{j}-w{W}+bg")


def path_rounding(core: EnvCore, split: np.ndarray) -> np.ndarray:
    """One candidate-path index per slot ``(batch, slots)`` that follows ``split`` (balanced rounding).

    Controllable slots in decreasing order of demand, each on the path, among those with a positive
    share in ``split``, whose most loaded link has the lowest offered utilisation after adding the
    connection (ties: the lowest index). Rows with one positive share map to that path exactly.
    Uncontrollable slots get 0.
    """
    B, S, P = core.batch, core.n_slots, core.P
    idx = np.zeros((B, S), dtype=np.int64)
    ctrl = core.controllable  # (B, S)
    if S == 0 or not ctrl.any():
        return idx
    d = core.connection_demand()
    slot_conn = core.slot_connection  # (B, S)
    fixed = split.copy()
    fixed[slot_conn[ctrl]] = 0.0
    load = core.offered_load(fixed, d).reshape(-1)
    cap = (core.link_capacity_bytes_per_s * core.decision_interval_s).reshape(-1)
    inv_cap = safe_divide(1.0, cap, np.inf)
    sc = np.maximum(slot_conn, 0)
    dem = np.where(ctrl, d[sc], -1.0)
    order = np.argsort(-dem, axis=1, kind="stable")  # (B, S): masked slots sort last
    rows = np.arange(B)[:, None]
    table = np.where(ctrl[rows, order], sc[rows, order], -1)  # (B, S) connections in placement order
    allowed = (split > 1e-12) & (np.arange(P)[None, :] < core.n_paths[:, None])
    best = place_least_loaded(core.routing_context, table, d, allowed, load, inv_cap)
    return np.where(ctrl, best[sc], 0)


def _induced_weights(core: EnvCore, split: np.ndarray) -> np.ndarray:
    """(batch, W) WCMP weights in [0, 1]: each next-hop link's offered load under ``split`` over the
    largest in its ECMP group (equal weights in a group without load)."""
    g = core.fabric.link_group[core.wcmp_links]  # (W,)
    load = core.offered_load(split)[:, core.wcmp_links]  # (B, W)
    n_groups = int(g.max()) + 1 if g.size else 0
    gmax = np.zeros((core.batch, n_groups))
    np.maximum.at(gmax, (slice(None), g), load)
    top = gmax[:, g]
    return safe_divide(load, top, 1.0)


def _nearest_plan(core: EnvCore, split: np.ndarray, policy: str | None) -> np.ndarray:
    """(batch,) int64: the index of ``policy`` among the core's plans, else each instance's plan whose
    split is closest to ``split`` (L1 over the connections the mode routes; ties: the lower index)."""
    if policy in core.plans:
        return np.full(core.batch, core.plans.index(policy), dtype=np.int64)
    w = core.routing_context
    sim = w.sim
    assert sim is not None
    routed = controlled_connections(w) if core.plan_class == "jobs" else np.ones(sim.n_conns, dtype=bool)
    inst = sim.unit_inst[sim.conn_unit]
    dist = np.empty((core.batch, len(core.plans)))
    for k in range(len(core.plans)):
        plan = plan_split(w, core.last_result, np.full(core.batch, k), core.plans)
        err = np.where(routed, np.abs(plan - split).sum(axis=1), 0.0)
        dist[:, k] = np.bincount(inst, weights=err, minlength=core.batch)
    return np.argmin(dist, axis=1).astype(np.int64)


def split_to_actions(core: EnvCore, split: np.ndarray, policy: str | None = None) -> np.ndarray:
    """Actions ``(batch, *action_space.shape)`` (float32 or int64) that express ``split`` in the
    core's action mode (see the module docstring for what is exact).

    ``policy`` selects the exact encodings of the ``ecmp_weights`` mode (``spray``, ``spray+bg``: equal
    weights; ``wcmp``, ``wcmp+bg``: capacity weights); other policies use induced shares.
    """
    B, S, P = core.batch, core.n_slots, core.P
    mode = core.action_mode
    if core.plans:
        return _nearest_plan(core, split, policy)
    if mode in ("split", "split_bg"):
        a = np.zeros((B, S, P))
        ctrl = core.controllable
        a[ctrl] = 2.0 * split[core.slot_connection[ctrl]] - 1.0
        return np.clip(a.reshape(B, S * P), -1.0, 1.0).astype(np.float32)
    if mode == "path":
        return path_rounding(core, split)
    if policy in ("spray", "spray+bg"):
        wts = (core.link_capacity_bytes_per_s[:, core.wcmp_links] > 0).astype(
            np.float64
        )  # equal on live links
    elif policy in ("wcmp", "wcmp+bg"):
        cap = core.link_capacity_bytes_per_s[:, core.wcmp_links]
        top = cap.max(axis=1, keepdims=True)
        wts = safe_divide(cap, top, 1.0)
    else:
        wts = _induced_weights(core, split)
    return np.clip(2.0 * wts - 1.0, -1.0, 1.0).astype(np.float32)


def baseline_actions(name: str, core: EnvCore) -> np.ndarray:
    """Actions ``(batch, *action_space.shape)`` of baseline ``name`` in the core's action mode.

    Raises
    ------
    ValueError
        If ``name`` is not a baseline.
    """
    _check_name(name)
    return split_to_actions(core, engine_split(name, core), policy=name)


class BaselineAgent:
    """A heuristic baseline, at the engine level (``action_mode=None``) or through an action mode."""

    def __init__(self, policy: str, action_mode: str | None = None) -> None:
        _check_name(policy)
        #: a weighted baseline (``favour{j}+bg``) also sets the share weights every interval
        self.weighted = weighted_plan(policy) is not None
        if action_mode is not None:
            if self.weighted:
                raise ValueError(
                    f"policy {policy}@{action_mode}: action_mode = {action_mode!r}: allowed: none (a weighted "
                    "baseline acts at the engine level; an agent picks it in choose_bg with extra_plans)"
                )
            check_choice("action_mode", action_mode, ACTION_MODES, more=" or None (the engine level)")
        self.policy = policy
        self.action_mode = action_mode
        self.name = policy if action_mode is None else f"{policy}@{action_mode}"
        self.level = "engine" if action_mode is None else "action"
        self.env_kwargs: dict[str, Any] = {} if action_mode is None else {"action_mode": action_mode}
        self.controls = controls(policy, action_mode)

    def check(self, core: EnvCore) -> None:
        if self.action_mode is not None and core.action_mode != self.action_mode:
            raise ValueError(f"{self.name}: needs action_mode {self.action_mode!r}, got {core.action_mode!r}")

    def reset(self, core: EnvCore) -> None:
        return None

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        if self.level == "engine":
            if self.weighted:  # the plan's share weights for the interval the split is stepped with
                core.set_plan_weights([self.policy] * core.batch)
            return engine_split(self.policy, core)
        return baseline_actions(self.policy, core)


_DESCRIPTIONS = {
    "ecmp": "static ECMP hashing (the default routing)",
    "spray": "even split of the jobs' connections over their paths (packet spraying); background on ECMP",
    "wcmp": "capacity-weighted ECMP of the jobs' connections; background on ECMP",
    "spray+bg": "packet spraying of all traffic, background included",
    "wcmp+bg": "capacity-weighted ECMP of all traffic, background included",
    "greedy": "reactive: least loaded candidate path in the last interval",
    "lp": "LP optimum: min max offered link utilisation (HiGHS)",
    "greedy+bg": "greedy over all traffic, background included",
    "lp+bg": "LP optimum over all traffic, background included (the optimiser of the jobs+bg class)",
    "solo-lp+bg": "background sprayed, each job by the min-max LP as if it communicated alone",
    "burst-lp+bg": "solo-lp+bg in an interval with background scheduled on (the observation shows it), "
    "lp+bg otherwise",
}

for _name in BASELINES:
    register_agent(
        _name,
        (lambda n: lambda mode: BaselineAgent(n, mode))(_name),
        description=_DESCRIPTIONS[_name],
        variants=ACTION_MODES,
        overwrite=True,
    )


def _resolve_weighted(name: str) -> Any:
    """The factory of a weighted baseline (``favour{j}+bg``, ``favour{j}-w{W}+bg``), None for another name: the
    family is resolved by name, not registered one by one, so the list of allowed policies keeps its entries."""
    if weighted_plan(name) is None:  # (raises for a misspelt favour... name)
        return None
    return lambda mode: BaselineAgent(name, mode)


if _resolve_weighted not in RESOLVERS:
    RESOLVERS.append(_resolve_weighted)
