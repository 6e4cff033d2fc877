"""A graph policy that transfers across fabric sizes: message passing over the ``graph`` observation.

The MLP policies of :mod:`ainet_gym.agents.sb3_agents` map a fixed-size vector to a fixed-size action, so a model
trained on a 64-GPU fabric cannot act on a 256-GPU one. :class:`GraphActorCritic` instead runs the same
small networks on every node and every link of the fabric (the env's ``observation="graph"``: node kinds,
the directed link list ``edge_index`` and per-link utilisation history and capacity fraction), and emits one
output per link: in the ``ecmp_weights`` action mode the action *is* one WCMP weight per switch next-hop
link, so the policy's output grows with the fabric and a trained model acts, zero-shot, on any fabric of any
size. Its parameters do not depend on the fabric (about 30k of them).

Model (plain torch, no torch-geometric: the graphs are a few thousand links and one ``index_add_`` per
aggregation is all the message passing needs):

- inputs: per node its kind (one-hot, 4); per link its utilisation over the last ``H`` intervals, its
  capacity fraction (0 = failed) and whether it is a WCMP knob; per env a few size-free globals from the
  flat observation (mean over job slots of the 5 job features, mean over background sources of *active
  last interval* and *scheduled next interval*, episode progress), broadcast to every node and link;
- ``rounds`` rounds of: link update ``e += MLP([e, h_src, h_dst])``, node update ``h += MLP([h, mean of
  incoming e, mean of outgoing e])`` (residual, so depth does not wash features out);
- actor: per link ``mu = tanh(MLP([e, h_src, h_dst]))``, a Gaussian with one learned log std shared by
  all links; the env's action is ``clip(a, -1, 1)`` at the knob links (``core.wcmp_links``);
- critic: ``MLP([mean e, max e, mean h, globals])`` (mean and max pools: size-free).

Every operation is per node, per link or a mean/max over them, so permuting the link (or node) order
permutes the outputs the same way (``tests/agents/test_graph_policy.py`` checks it) and nothing depends on
the number of links.

Training: PPO (clipped objective, GAE) written here over the batched :class:`~ainet_gym.envs.env.EnvCore`
(``n_envs`` copies stepped in one engine call), one whole episode per copy per update, seeds >=
1,000,000 (evaluation seeds are small integers)::

    python -m ainet_gym.agents.graph_policy train periodic-interference --timesteps 30720 --n-envs 8 --out graph.pt

It prints the mean episode GPU utilisation per update, the wall time and the peak resident memory of the
process (``resource.getrusage``), and stores them in the checkpoint. Evaluate on any fabric::

    ainet-gym evaluate periodic-interference-1024 --policies ecmp,spray+bg,wcmp+bg,graph:graph.pt --seeds 1-10

The checkpoint is a ``torch.save`` dict of tensors, numbers and strings (the weights and the
configuration, no optimiser state), read back with ``torch.load(weights_only=True)``: no pickled code.

The agent (:class:`GraphPolicyAgent`, registered as ``graph:PATH``) and the command line are this module; the rest
lives in modules of one concern, whose public names it re-exports (the same objects):
:mod:`ainet_gym.agents.graph_net` (the network), :mod:`ainet_gym.agents.graph_inputs` (observation -> tensors),
:mod:`ainet_gym.agents.graph_files` (the checkpoint) and :mod:`ainet_gym.agents.graph_train` (PPO).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.graph_files import FORMAT, load_graph_policy, save_graph_policy
from ainet_gym.agents.graph_inputs import N_GLOBAL as N_GLOBAL
from ainet_gym.agents.graph_inputs import N_PATH_FEATURES as N_PATH_FEATURES
from ainet_gym.agents.graph_inputs import global_features, graph_inputs, knob_positions, path_features
from ainet_gym.agents.graph_net import GraphActorCritic, GraphPolicyConfig
from ainet_gym.agents.graph_train import TRAIN_SEED_BASE, TrainConfig, gae_advantages, train
from ainet_gym.agents.graph_train import peak_rss_mib as peak_rss_mib
from ainet_gym.agents.registry import register_agent

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = [
    "FORMAT",
    "TRAIN_SEED_BASE",
    "GraphActorCritic",
    "GraphPolicyAgent",
    "GraphPolicyConfig",
    "TrainConfig",
    "gae_advantages",
    "global_features",
    "graph_inputs",
    "knob_positions",
    "load_graph_policy",
    "path_features",
    "save_graph_policy",
    "train",
]


class GraphPolicyAgent:
    """A trained graph policy on any fabric (deterministic: the mean), registered as ``graph:PATH``.

    It sets one WCMP weight per switch next-hop link (the ``ecmp_weights`` action, so it controls all
    traffic, background included) and, like every baseline that sprays or weights traffic
    (:func:`ainet_gym.routing.policies.avoid_dead_paths`) and like a switch that drops a dead next hop from its
    group, gives no share to candidate paths through a failed link (capacity 0). That is why it acts at
    the engine level (:meth:`act` returns the split; :meth:`weights` the action): the ``ecmp_weights``
    action alone cannot express a zero share (a weight is 0 only at exactly -1), and a ring AllReduce with
    any share on a dead link stalls. Without failed links the split equals ``core.decode(weights)``.
    """

    level = "engine"
    controls = "jobs+bg"

    def __init__(self, path: str | os.PathLike, avoid_dead: bool = True) -> None:
        self.path = Path(path)
        self.module, self.info = load_graph_policy(path)
        self.avoid_dead = bool(avoid_dead)
        self.name = "graph"
        self.env_kwargs: dict[str, Any] = {
            "action_mode": "ecmp_weights",
            "history": self.module.cfg.history,
            "observation": "graph",
        }

    def check(self, core: EnvCore) -> None:
        want = (self.env_kwargs["action_mode"], self.env_kwargs["history"], self.env_kwargs["observation"])
        got = (core.action_mode, core.history, core.observation_mode)
        if want != got:
            raise ValueError(
                f"graph:{self.path}: needs action_mode, history, observation = {want}; the env has {got}"
            )
        if core.wcmp_links.size == 0:
            raise ValueError(
                f"graph:{self.path}: scenario {core.scenario.name!r} has no WCMP knob links (no switch "
                "with equal-cost next hops), so there is nothing to weight"
            )

    def reset(self, core: EnvCore) -> None:
        return None

    def weights(self, core: EnvCore, obs: Any) -> np.ndarray:
        """The ``ecmp_weights`` action (batch, knob links) in [-1, 1]: the policy's mean."""
        import torch

        with torch.no_grad():
            mu, _ = self.module(*graph_inputs(core, obs))
        return mu.numpy()[:, knob_positions(core)].astype(np.float32)

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        """The split (connections, max_paths) of the weights, without shares on dead paths."""
        from ainet_gym.routing.oblivious import avoid_dead_paths

        split = core.decode(core.validate(self.weights(core, obs)))
        return avoid_dead_paths(core.routing_context, split) if self.avoid_dead else split


register_agent(
    "graph",
    lambda path: GraphPolicyAgent(path),
    needs_arg=True,
    arg_help="PATH",
    description="a graph policy that acts on any fabric size (python -m ainet_gym.agents.graph_policy train)",
    overwrite=True,
)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.graph_policy train SCENARIO --timesteps N --out graph.pt``."""
    from ainet_gym.agents.arg_types import TRAIN_SEED_MAX, int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's
    from ainet_gym.agents.outputs import add_out_file_args, cli_out_file_refused

    p = OneLineParser(prog="python -m ainet_gym.agents.graph_policy", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a graph policy with PPO")
    t.add_argument("scenario")
    # the ranges of ainet-gym train and of GraphPolicyConfig.check (rounds 0: no message passing)
    t.add_argument("--timesteps", type=int_arg(1), default=TrainConfig.timesteps)
    t.add_argument("--n-envs", type=int_arg(1, 100_000), default=TrainConfig.n_envs)
    t.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)
    t.add_argument("--hidden", type=int_arg(1), default=GraphPolicyConfig.hidden)
    t.add_argument("--rounds", type=int_arg(0), default=GraphPolicyConfig.rounds)
    t.add_argument("--history", type=int_arg(1), default=GraphPolicyConfig.history)
    t.add_argument("--episode-steps", type=int_arg(1), default=None)
    add_out_file_args(t, "checkpoint path (e.g. graph.pt)", required=True)
    args = p.parse_args(argv)
    if cli_out_file_refused(
        "python -m ainet_gym.agents.graph_policy train", args.out, args.overwrite, (), flag="--out"
    ):
        return 2
    import torch

    torch.set_num_threads(1)
    try:
        cfg = TrainConfig(
            args.scenario,
            timesteps=args.timesteps,
            n_envs=args.n_envs,
            seed=args.seed,
            episode_steps=args.episode_steps,
        )
        pol = GraphPolicyConfig(history=args.history, hidden=args.hidden, rounds=args.rounds)
        pol.check()
        net, info = train(cfg, pol)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = save_graph_policy(net, args.out, info)
    print(
        f"saved {out} ({out.stat().st_size / 1024:.0f} KiB, {info['parameters']} parameters); "
        f"{info['timesteps']} steps in {info['wall_s']} s, peak RSS {info['peak_rss_mib']} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
