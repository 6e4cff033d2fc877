"""The optional ``phase`` observation block (``obs_features=("phase",)``): each job's position in its
iteration, from the simulator's state. References: a job alone on a non-blocking switch, computed by
hand (compute C, then a ring AllReduce at the NIC's rate), and the default observation, which the option
leaves unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore, FabricRoutingEnv

C_MS = 100.0  # compute per iteration
INTERVAL_MS = 30.0  # decision interval, shorter than the compute
NIC_GBPS = 400.0
GPUS = 4
BYTES = 1.5e9
# an ideal ring AllReduce: 2 (p - 1) / p * S / B
COMM_S = 2 * (GPUS - 1) / GPUS * BYTES / (NIC_GBPS * 1e9 / 8)  # 0.045 s
IDEAL_S = C_MS / 1e3 + COMM_S


def _alone() -> dict:
    """One 4-GPU ring job alone on a non-blocking switch, no latency: its iteration is C then COMM_S."""
    return {
        "name": "phase-alone",
        "fabric": {
            "topology": "single_switch", "hosts": GPUS, "gpus_per_host": 1, "nic_gbps": NIC_GBPS,
            "hop_latency_us": 0.0,
        },
        "workload": {
            "jobs": [
                {
                    "name": "a", "gpus": GPUS, "compute_ms": C_MS, "overlap": 0.0,
                    "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": BYTES}],
                }
            ]
        },
        "dynamics": {"episode_steps": 8, "decision_interval_ms": INTERVAL_MS},
    }  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_phase_features_of_a_job_alone_by_hand(backend: str) -> None:
    env = FabricRoutingEnv(_alone(), obs_features=("phase",), backend=backend)
    sl = env.core.obs_layout["job_phase"]
    obs, _ = env.reset(seed=0)
    assert env.core.ideal_step_s[0, 0] == pytest.approx(IDEAL_S, rel=1e-9)
    seen = [obs[sl]]
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample() * 0)
        seen.append(obs[sl])
    got = np.array(seen)  # (decisions, 3), float32
    # the decision at t: compute left (C - t) before the communication, all of its bytes left ...
    want = []
    for t in (0.0, 0.03, 0.06, 0.09):
        want.append(((C_MS / 1e3 - t) / IDEAL_S, 1.0, COMM_S / IDEAL_S))
    # ... at 120 ms 20 ms of its 45 ms of communication are done, at 150 ms it computes again since 145 ms
    left = 1.0 - 0.020 / COMM_S
    want.append((0.0, left, left * COMM_S / IDEAL_S))
    want.append(((C_MS / 1e3 - (0.150 - IDEAL_S)) / IDEAL_S, 1.0, COMM_S / IDEAL_S))
    np.testing.assert_allclose(got, np.array(want), rtol=0, atol=1e-6)


def test_off_by_default_leaves_the_observation_unchanged() -> None:
    plain = EnvCore("spine-leaf-2to1-jitter", batch=2, action_mode="choose_bg")
    feat = EnvCore("spine-leaf-2to1-jitter", batch=2, action_mode="choose_bg", obs_features=("phase",))
    assert plain.obs_features == () and "job_phase" not in plain.obs_layout
    J = plain.world.n_job_slots
    assert feat.observation_space.shape == (plain.observation_space.shape[0] + 3 * J,)
    assert feat.obs_layout["job_phase"] == slice(plain.obs_dim, plain.obs_dim + 3 * J)
    for k, v in plain.obs_layout.items():  # every default block keeps its offsets
        assert feat.obs_layout[k] == v
    a, _ = plain.reset([5, 6])
    b, _ = feat.reset([5, 6])
    for _ in range(4):
        np.testing.assert_array_equal(b[:, : plain.obs_dim], a)
        assert b.shape == (2, feat.obs_dim) and b.dtype == np.float32
        assert feat.observation_space.contains(b[0]) and feat.observation_space.contains(b[1])
        a, *_ = plain.step(np.array([1, 3]))
        b, *_ = feat.step(np.array([1, 3]))


def test_the_block_follows_the_state_and_both_backends_agree() -> None:
    cores = {
        be: EnvCore(
            "spine-leaf-2to1-jitter", batch=3, action_mode="choose_bg", obs_features=("phase",), backend=be
        )
        for be in ("numpy", "numba")
    }
    obs = {be: c.reset([1, 2, 3])[0] for be, c in cores.items()}
    for t in range(6):
        np.testing.assert_allclose(obs["numba"], obs["numpy"], rtol=0, atol=1e-6)
        core = cores["numpy"]
        f = core.job_phase_features()
        sl = core.obs_layout["job_phase"]
        np.testing.assert_array_equal(obs["numpy"][:, sl], f.reshape(3, -1).astype(np.float32))
        pc = core.world.sim.state.phase_cur[core.world.job_unit]
        comm = (pc >= 0) & (pc < core.world.sim.unit_nphases[core.world.job_unit])
        assert (f[..., 0][comm] == 0).all()  # communicating: no time to the next phase
        assert (f[..., 1][comm] < 1).all() and (f[..., 1][~comm] == 1).all()  # no overlap here
        obs = {be: c.step(np.array([t % 6, 1, 3]))[0] for be, c in cores.items()}


def test_gymnasium_make_and_vector_env_pass_the_option() -> None:
    env = gym.make("ainet_gym/SpineLeaf-ChooseBg-v0", obs_features=["phase"])
    assert "job_phase" in env.unwrapped.core.obs_layout
    venv = gym.make_vec(
        "ainet_gym/SpineLeaf-v0", num_envs=2, vectorization_mode="vector_entry_point", obs_features=("phase",)
    )
    plain = gym.make_vec("ainet_gym/SpineLeaf-v0", num_envs=2, vectorization_mode="vector_entry_point")
    J = env.unwrapped.core.world.n_job_slots
    assert venv.single_observation_space.shape[0] == plain.single_observation_space.shape[0] + 3 * J
    obs, _ = venv.reset(seed=1)
    assert obs.shape == (2, venv.single_observation_space.shape[0])


def test_bad_obs_features_name_the_value() -> None:
    with pytest.raises(
        ValueError, match=r"obs_features = \('bursts',\): unknown 'bursts'; allowed: .*phase \(distinct\)$"
    ):
        EnvCore("spine-leaf-2to1-jitter", obs_features=("bursts",))
    with pytest.raises(ValueError, match=r"obs_features = 'phase': allowed: a list"):
        EnvCore("spine-leaf-2to1-jitter", obs_features="phase")
    with pytest.raises(ValueError, match="a name is repeated"):
        EnvCore("spine-leaf-2to1-jitter", obs_features=("phase", "phase"))


def test_a_model_trained_with_the_block_records_it_and_evaluates_with_it(tmp_path) -> None:
    from _scenarios import small_spine_leaf

    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.sb3_agents import SB3Agent, read_metadata
    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig

    sc = small_spine_leaf(8, name="phase-small")
    res = train(
        TrainConfig(
            scenario=sc, action_mode="choose_bg", obs_features=("phase",), gamma=0.99, timesteps=16,
            n_envs=2, logdir=tmp_path, out=tmp_path / "m.zip", progress=False,
            hyperparameters={"n_steps": 8, "batch_size": 8, "n_epochs": 1},
        )
    )  # fmt: skip
    assert read_metadata(res.model_path)["obs_features"] == ["phase"]
    assert res.model.gamma == 0.99
    assert SB3Agent(res.model_path).env_kwargs["obs_features"] == ("phase",)
    out = evaluate(EvalConfig(sc, policies=[f"ppo:{res.model_path}"], seeds=[1], out=None))
    assert out["policies"][f"ppo:{res.model_path}"]["controls"] == "jobs+bg"
    plain = train(
        TrainConfig(
            scenario=sc, action_mode="choose_bg", timesteps=8, n_envs=1, logdir=tmp_path,
            out=tmp_path / "p.zip", progress=False, hyperparameters={"n_steps": 8, "batch_size": 8, "n_epochs": 1},
        )
    )  # fmt: skip
    assert "obs_features" not in read_metadata(plain.model_path)
