"""The graph policy (ainet_gym/agents/graph_policy.py): it runs through ``evaluate``, one set of weights acts on
fabrics of different sizes with one output per WCMP knob link, and permuting the order of the links
(or of the nodes) permutes its outputs the same way (the property that makes it size-free)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ainet_gym.agents.evaluate import EvalConfig, evaluate  # noqa: E402
from ainet_gym.agents.graph_policy import (  # noqa: E402
    GraphActorCritic,
    GraphPolicyConfig,
    TrainConfig,
    gae_advantages,
    graph_inputs,
    knob_positions,
    save_graph_policy,
    train,
)
from ainet_gym.agents.registry import make_agent  # noqa: E402
from ainet_gym.envs.env import EnvCore  # noqa: E402
from tests._scenarios import replayed_gpu_utilization  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    torch.manual_seed(0)
    net = GraphActorCritic(GraphPolicyConfig(hidden=8, rounds=2))
    return str(save_graph_policy(net, tmp_path_factory.mktemp("gp") / "graph.pt", {"note": "untrained"}))


def test_runs_through_evaluate(checkpoint: str, tmp_path) -> None:
    # an untrained network has no floor; what is checked: its figure is its own episodes' (replayed here one
    # seed at a time), and a network whose head outputs 0 (every knob link at the same WCMP weight) plays the
    # even split over the equal-cost paths, so it scores what spray+bg scores, well above ECMP's collisions
    torch.manual_seed(0)
    net = GraphActorCritic(GraphPolicyConfig(hidden=8, rounds=2))
    with torch.no_grad():
        net.actor[-1].weight.zero_()
        net.actor[-1].bias.zero_()
    zero = str(save_graph_policy(net, tmp_path / "zero.pt", {"note": "zero head"}))
    res = evaluate(
        EvalConfig(
            scenario="periodic-interference",
            policies=["ecmp", f"graph:{checkpoint}", f"graph:{zero}", "spray+bg"],
            seeds=[1, 2],
            steps=3,
            out=None,
        )
    )
    u = {k: v["gpu_utilization"]["mean"] for k, v in res["policies"].items()}
    row = res["policies"][f"graph:{checkpoint}"]  # keyed as given on the command line
    assert row["controls"] == "jobs+bg"  # switch weights move the background too
    for spec in (f"graph:{checkpoint}", "ecmp"):  # ECMP's two episodes differ: the seeds are the given ones
        want = [replayed_gpu_utilization(spec, "periodic-interference", s, 3) for s in (1, 2)]
        assert u[spec] == pytest.approx(np.mean(want), rel=1e-6), spec
    assert u[f"graph:{zero}"] == pytest.approx(u["spray+bg"], rel=1e-9)
    assert u[f"graph:{zero}"] > u["ecmp"] + 0.1, u  # measured 3 Dec 2026: 0.678 against 0.506


def test_output_shape_follows_fabric_size(checkpoint: str) -> None:
    # one set of weights, two fabrics of the same family: 4 and 16 leaves with 8 uplinks each
    agent = make_agent(f"graph:{checkpoint}")
    knobs = {}
    for name in ("periodic-interference", "periodic-interference-256"):
        core = EnvCore(name, batch=2, **agent.env_kwargs)
        obs, _ = core.reset([1, 2])
        agent.check(core)
        a = agent.weights(core, obs)
        assert a.shape == (2, *core.action_space.shape)
        assert np.all(np.abs(a) <= 1.0)
        split = agent.act(core, obs)  # no failed link here: exactly the env's decoding of the weights
        np.testing.assert_allclose(split, core.decode(core.validate(a)))
        core.step(a)  # a valid action of this fabric
        knobs[name] = a.shape[1]
    # the knob links of a 2:1 spine-leaf are the leaves' uplinks: leaves x spines
    assert knobs == {"periodic-interference": 4 * 8, "periodic-interference-256": 16 * 8}


def test_knob_positions_pick_the_action_links() -> None:
    core = EnvCore("periodic-interference", action_mode="ecmp_weights", observation="graph")
    pos = knob_positions(core)
    net = list(core.net_links)
    assert [net[p] for p in pos] == list(core.wcmp_links)
    # and they are the leaf -> spine links (an independent reading of the fabric's link names)
    names = core.world.fabric.link_names
    ups = sorted(i for i, n in enumerate(names) if n.startswith("leaf") and "->spine" in n)
    assert sorted(core.wcmp_links) == ups


def _random_inputs(seed: int, B: int = 3, N: int = 12, E: int = 40, history: int = 4):
    g = torch.Generator().manual_seed(seed)
    node_x = torch.rand(B, N, 4, generator=g)
    edge_index = torch.randint(0, N, (2, E), generator=g)
    edge_x = torch.rand(B, E, history + 5, generator=g)
    glob = torch.rand(B, 8, generator=g)
    return node_x, edge_index, edge_x, glob


def test_permuting_links_permutes_outputs() -> None:
    torch.manual_seed(1)
    net = GraphActorCritic(GraphPolicyConfig(hidden=16, rounds=3)).double()
    node_x, ei, ex, gl = (t.double() if t.is_floating_point() else t for t in _random_inputs(0))
    mu, v = net(node_x, ei, ex, gl)
    perm = torch.randperm(ei.shape[1], generator=torch.Generator().manual_seed(2))
    mu_p, v_p = net(node_x, ei[:, perm], ex[:, perm], gl)
    torch.testing.assert_close(mu_p, mu[:, perm], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(v_p, v, rtol=1e-10, atol=1e-12)
    # a wrong, order-dependent model would fail the check above; a real change of inputs must show
    ex2 = ex.clone()
    ex2[:, 0] += 1.0
    assert not torch.allclose(net(node_x, ei, ex2, gl)[0], mu)


def test_permuting_nodes_leaves_link_outputs_unchanged() -> None:
    torch.manual_seed(3)
    net = GraphActorCritic(GraphPolicyConfig(hidden=16, rounds=3)).double()
    node_x, ei, ex, gl = (t.double() if t.is_floating_point() else t for t in _random_inputs(4))
    mu, v = net(node_x, ei, ex, gl)
    N = node_x.shape[1]
    new_of_old = torch.randperm(N, generator=torch.Generator().manual_seed(5))
    node_x_p = torch.empty_like(node_x)
    node_x_p[:, new_of_old] = node_x
    mu_p, v_p = net(node_x_p, new_of_old[ei], ex, gl)
    torch.testing.assert_close(mu_p, mu, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(v_p, v, rtol=1e-10, atol=1e-12)


def test_permuting_fabric_links_permutes_the_agent_action(checkpoint: str) -> None:
    # on a real fabric observation: shuffle the links of the graph inputs and compare per-link means
    agent = make_agent(f"graph:{checkpoint}")
    core = EnvCore("periodic-interference", batch=1, **agent.env_kwargs)
    obs, _ = core.reset([1])
    for _ in range(2):
        obs, *_ = core.step_split(agent.act(core, obs))
    node_x, ei, ex, gl = graph_inputs(core, obs)
    with torch.no_grad():
        mu, _ = agent.module(node_x, ei, ex, gl)
        perm = torch.randperm(ei.shape[1], generator=torch.Generator().manual_seed(6))
        mu_p, _ = agent.module(node_x, ei[:, perm], ex[:, perm], gl)
    torch.testing.assert_close(mu_p, mu[:, perm], rtol=1e-5, atol=1e-6)


def test_no_share_on_paths_through_a_failed_link(checkpoint: str) -> None:
    # periodic-interference-256-failures: leaf1-spine5 is down from interval 12; every path through it
    # must get a zero share (checked against the fabric's own live-path table), the others sum to 1
    agent = make_agent(f"graph:{checkpoint}")
    core = EnvCore("periodic-interference-256-failures", batch=1, episode_steps=14, **agent.env_kwargs)
    obs, _ = core.reset([1])
    for _ in range(13):
        obs, *_ = core.step_split(agent.act(core, obs))
    dead = ~core.world.live_paths()
    assert dead.any()
    split = agent.act(core, obs)
    assert np.all(split[dead] == 0.0)
    np.testing.assert_allclose(split.sum(axis=1), 1.0)


def test_short_training_run_reports_memory_and_saves(tmp_path) -> None:
    net, info = train(
        TrainConfig("periodic-interference", timesteps=8, n_envs=2, episode_steps=4, n_epochs=1),
        GraphPolicyConfig(hidden=8, rounds=1),
        log=lambda *_: None,
    )
    assert info["timesteps"] == 8 and info["peak_rss_mib"] > 0 and info["wall_s"] >= 0
    p = save_graph_policy(net, tmp_path / "g.pt", info)
    agent = make_agent(f"graph:{p}")
    assert agent.info["timesteps"] == 8


def test_bad_input_errors(tmp_path, checkpoint: str) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        make_agent(f"graph:{tmp_path / 'missing.pt'}")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a graph-policy checkpoint"):
        make_agent(f"graph:{junk}")
    agent = make_agent(f"graph:{checkpoint}")
    with pytest.raises(ValueError, match="action_mode"):
        agent.check(EnvCore("periodic-interference", action_mode="split", observation="graph"))
    with pytest.raises(ValueError, match="timesteps = 0"):
        TrainConfig("periodic-interference", timesteps=0).check()
    with pytest.raises(ValueError, match=r"gamma = 1\.5"):
        TrainConfig("periodic-interference", gamma=1.5).check()
    with pytest.raises(ValueError, match="hidden = 0"):
        GraphPolicyConfig(hidden=0).check()


def test_gae_is_the_discounted_sum_of_td_errors() -> None:
    # Schulman et al. 2016: lam = 1 gives the discounted return (bootstrapped by V_T) minus V_t; lam = 0 the
    # one-step TD error; in between, sum_k (gamma lam)^k delta_{t+k}, written out here as a double loop
    rng = np.random.default_rng(3)
    T, B, gamma = 5, 3, 0.9
    r, v, last = rng.normal(size=(T, B)), rng.normal(size=(T, B)), rng.normal(size=B)
    vn = np.vstack([v[1:], last[None]])  # V_{t+1}
    delta = r + gamma * vn - v
    ret = np.array(
        [sum(gamma**k * r[t + k] for k in range(T - t)) + gamma ** (T - t) * last for t in range(T)]
    )
    gae = lambda lam: gae_advantages(  # noqa: E731
        torch.tensor(r), torch.tensor(v), torch.tensor(last), gamma, lam
    ).numpy()
    np.testing.assert_allclose(gae(1.0), ret - v, rtol=1e-12)
    np.testing.assert_allclose(gae(0.0), delta, rtol=1e-12)
    lam = 0.7
    want = np.array([sum((gamma * lam) ** k * delta[t + k] for k in range(T - t)) for t in range(T)])
    np.testing.assert_allclose(gae(lam), want, rtol=1e-12)
