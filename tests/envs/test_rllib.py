"""Ray RLlib integration (extra ``rllib``): the env on RLlib's vector entry point, PPO, checkpoints.

Skipped without Ray (the main suite runs without the extra; CI runs these in a second environment
with it: ``make check-rllib``). ``test_import_error_names_the_extra`` runs only without Ray.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from tests._scenarios import replayed_gpu_utilization

HAS_RAY = importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.rllib") is not None
needs_ray = pytest.mark.skipif(
    not HAS_RAY, reason="needs Ray RLlib, the extra 'rllib': pip install -e '.[rllib]'"
)

SCENARIO = "periodic-interference"


@pytest.mark.skipif(HAS_RAY, reason="checks the message shown when Ray is not installed")
def test_import_error_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"ainet-gym\[rllib\]"):
        import ainet_gym.envs.rllib  # noqa: F401


@needs_ray
def test_env_config_keys_checked() -> None:
    from ainet_gym.envs.rllib import make_env

    with pytest.raises(ValueError, match=r"\['scenario', 'speed'\]: unknown 'speed'; allowed: .*scenario"):
        make_env({"scenario": SCENARIO, "speed": 2})
    with pytest.raises(ValueError, match="num_envs = 0"):
        make_env({"scenario": SCENARIO, "num_envs": 0})


@needs_ray
def test_vector_infos_pass_dict_info_to_list() -> None:
    """RLlib wraps the vector env in DictInfoToList: each copy's info must be exactly what a single env
    with that copy's seed reports (the independent reference), step for step, across an autoreset."""
    from gymnasium.wrappers.vector import DictInfoToList
    from ray.rllib.env.env_context import EnvContext

    from ainet_gym.envs.env import FabricRoutingEnv
    from ainet_gym.envs.rllib import RLlibVectorEnv, make_env

    B, seed = 3, 7
    ctx = EnvContext({"scenario": SCENARIO, "episode_steps": 2}, worker_index=1, num_workers=2)
    venv = make_env(ctx | {"num_envs": B})  # what RLlib's vector entry point passes
    assert isinstance(venv, RLlibVectorEnv) and venv.num_envs == B
    env = DictInfoToList(venv)
    singles = [FabricRoutingEnv(scenario=SCENARIO, episode_steps=2) for _ in range(B)]
    obs, infos = env.reset(seed=seed)
    assert isinstance(infos, list) and len(infos) == B
    for i, s in enumerate(singles):  # copy i is seeded seed * B + i
        o1, i1 = s.reset(seed=seed * B + i)
        np.testing.assert_array_equal(obs[i], o1)
        assert set(infos[i]) == set(i1)
    rng = np.random.default_rng(0)
    for _ in range(2):  # the episode ends at step 2
        a = rng.uniform(-1, 1, size=(B, *venv.single_action_space.shape)).astype(np.float32)
        obs, rew, term, trunc, infos = env.step(a)
        for i, s in enumerate(singles):
            o1, r1, t1, tr1, i1 = s.step(a[i])
            np.testing.assert_allclose(obs[i], o1, rtol=1e-12)
            assert rew[i] == pytest.approx(r1, rel=1e-12)
            assert (bool(term[i]), bool(trunc[i])) == (t1, tr1)
            for k, v in i1.items():
                np.testing.assert_allclose(np.asarray(infos[i][k], dtype=float), np.asarray(v, dtype=float))
    assert trunc.all()
    # next-step autoreset: the following step resets every copy (reward 0, not done), as RLlib expects
    obs, rew, term, trunc, infos = env.step(np.zeros((B, *venv.single_action_space.shape), np.float32))
    assert not (term | trunc).any() and np.all(rew == 0.0) and len(infos) == B


@needs_ray
def test_env_runner_builds_the_native_vector_env() -> None:
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from ainet_gym.envs.rllib import RLlibVectorEnv, ppo_config

    cfg = ppo_config(SCENARIO, num_env_runners=0, envs_per_runner=4, seed=0)
    runner = SingleAgentEnvRunner(config=cfg)
    assert isinstance(runner.env.unwrapped, RLlibVectorEnv)
    assert runner.env.num_envs == 4
    # SB3's log_std_init: the policy starts at std exp(-1), not RLlib's default 1
    np.testing.assert_array_equal(runner.module.pi.log_std.detach().numpy(), -1.0)
    eps = runner.sample(num_timesteps=8, random_actions=True)
    assert sum(len(e) for e in eps) == 8  # 2 batched steps of 4 copies
    runner.stop()


def _ray_tmp() -> str:
    """Ray's session folder for these tests: $AINET_GYM_RAY_TMPDIR, else a short folder of this user (Ray's
    socket paths must stay under 108 characters, so not pytest's tmp_path)."""
    import os
    import tempfile

    d = os.environ.get("AINET_GYM_RAY_TMPDIR") or os.path.join(
        tempfile.gettempdir(), f"ainet-ray-{os.getuid()}"
    )
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def local_ray():
    import ray

    from ainet_gym.envs.rllib import init_ray

    init_ray(None, num_env_runners=2, temp_dir=_ray_tmp())
    yield
    ray.shutdown()


@needs_ray
def test_ppo_two_iterations_checkpoint_resume_evaluate(local_ray, tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.rllib_checkpoint import read_checkpoint_metadata
    from ainet_gym.agents.rllib_train import RLlibTrainConfig, train_rllib
    from ainet_gym.agents.sb3_agents import space_signature
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.fabric.topology import fabric_fingerprint

    steps = 48  # periodic-interference episode length
    per_iter = 2 * 8 * steps  # 2 env runners x 8 copies x one episode each
    cfg = RLlibTrainConfig(
        scenario=SCENARIO,
        timesteps=2 * per_iter,
        seed=0,
        num_env_runners=2,
        envs_per_runner=8,
        logdir=tmp_path / "runs",
        out=tmp_path / "ckpt",
        progress=False,
    )
    res = train_rllib(cfg)
    assert not res.interrupted
    assert [r["timesteps"] for r in res.history] == [per_iter, 2 * per_iter]
    assert res.total_timesteps == 2 * per_iter
    first = res.history[0]
    # iteration 1 finished exactly 16 episodes; the reward is the GPU utilisation of the interval,
    # so RLlib's own mean return / length must equal the fabric callback's per-episode mean
    assert first["rollout/ep_len_mean"] == steps
    assert first["fabric/gpu_utilization"] == pytest.approx(first["rollout/ep_rew_mean"] / steps, rel=1e-9)
    assert first["fabric/episodes"] == 16
    # after the last iteration both windows hold the 32 episodes of the run: RLlib's return over them, per
    # interval, is the fabric callback's GPU utilisation (a callback that averaged something else breaks it)
    last = res.history[-1]
    assert last["rollout/ep_len_mean"] == steps and last["fabric/episodes"] == 32
    assert res.final["gpu_utilization"] == pytest.approx(last["rollout/ep_rew_mean"] / steps, rel=1e-9)
    for k in ("max_link_utilization", "efficiency"):
        assert 0.0 < res.final[k] <= 1.0
    assert res.final["step_time_ratio"] >= 1.0
    assert (res.run_dir / "progress.csv").is_file()
    assert list(res.run_dir.glob("events.out.tfevents.*"))
    meta = read_checkpoint_metadata(res.checkpoint)
    core = EnvCore(SCENARIO, batch=1)
    assert meta["observation_space"] == space_signature(core.observation_space)
    assert meta["timesteps"] == 2 * per_iter
    assert meta["fabric"] == fabric_fingerprint(core.fabric)  # rllib:DIR refuses another fabric (issue-26zk2)

    # resume into a new directory, with a different runner layout: the counter carries on
    res2 = train_rllib(
        RLlibTrainConfig(
            scenario=SCENARIO,
            timesteps=1,
            num_env_runners=1,
            envs_per_runner=4,
            logdir=tmp_path / "runs",
            out=tmp_path / "ckpt2",
            resume=res.checkpoint,
            trust_checkpoint=True,
            progress=False,
        )
    )
    assert res2.total_timesteps == 2 * per_iter + 4 * steps
    meta2 = read_checkpoint_metadata(res2.checkpoint)
    assert meta2["resumed_from"] == str(res.checkpoint)
    assert meta2["fabric"] == meta["fabric"] and "source_fabric" not in meta2  # the same fabric

    # an existing checkpoint is replaced only with overwrite; the resumed one never
    with pytest.raises(ValueError, match="--overwrite"):
        train_rllib(RLlibTrainConfig(scenario=SCENARIO, timesteps=1, out=res.checkpoint, progress=False))
    with pytest.raises(ValueError, match="never overwritten"):
        train_rllib(
            RLlibTrainConfig(
                scenario=SCENARIO, timesteps=1, out=res.checkpoint, resume=res.checkpoint, overwrite=True
            )
        )

    # the checkpoint is a policy of evaluate, deterministic, on the held-out seeds
    from ainet_gym.agents.registry import make_agent

    agent = make_agent(f"rllib:{res.checkpoint}")
    core = EnvCore(SCENARIO, batch=2, **agent.env_kwargs)
    agent.check(core)
    obs, _ = core.reset([1, 2])
    a1, a2 = agent.act(core, obs), agent.act(core, obs)
    np.testing.assert_array_equal(a1, a2)
    assert a1.shape == (2, *core.action_space.shape) and np.all(np.abs(a1) <= 1.0)
    out = evaluate(EvalConfig(SCENARIO, policies=["ecmp", f"rllib:{res.checkpoint}"], seeds=[1, 2], out=None))
    gpu = out["policies"][f"rllib:{res.checkpoint}"]["gpu_utilization"]["mean"]
    # a smoke run has no floor: its figure is the mean of the same seeds' episodes replayed one by one
    want = [replayed_gpu_utilization(f"rllib:{res.checkpoint}", SCENARIO, s, steps) for s in (1, 2)]
    assert math.isfinite(gpu) and gpu == pytest.approx(np.mean(want), rel=1e-6)

    # the rebuilt network acts as RLlib's own module (loaded the trusted way, from its pickles)
    _same_actions_as_rllib(res.checkpoint, agent, core, obs)

    # resume without the trust flag is refused before Ray is asked anything
    from ainet_gym.agents.model_files import UntrustedModelError

    with pytest.raises(UntrustedModelError, match="--trust-checkpoint"):
        train_rllib(
            RLlibTrainConfig(scenario=SCENARIO, timesteps=1, out=tmp_path / "c3", resume=res.checkpoint)
        )

    # an old checkpoint (RLlib's files only) is refused by rllib:DIR, converted once with trust, then equal
    import json
    import shutil

    old = tmp_path / "old"
    shutil.copytree(res.checkpoint, old)
    meta_old = json.loads((old / "ainet_gym.json").read_text())
    del meta_old["policy_module"]
    (old / "ainet_gym.json").write_text(json.dumps(meta_old))
    (old / "policy_weights.pt").unlink()
    with pytest.raises(ValueError, match="convert-rllib"):
        make_agent(f"rllib:{old}")
    from ainet_gym.agents.rllib_checkpoint import convert_checkpoint

    with pytest.raises(UntrustedModelError):
        convert_checkpoint(old, trusted=False)
    convert_checkpoint(old, trusted=True)
    with pytest.raises(ValueError, match="--overwrite"):
        convert_checkpoint(old, trusted=True)
    converted = make_agent(f"rllib:{old}")
    np.testing.assert_array_equal(converted.act(core, obs), a1)


def _same_actions_as_rllib(ckpt, agent, core, obs) -> None:
    """The rebuilt policy's actions equal RLlib's module's deterministic actions mapped as RLlib's env
    runner maps them (``to_deterministic().sample()``, then ``unsquash_action``)."""
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    from ainet_gym.agents.rllib_agent import MODULE_SUBDIR

    module = RLModule.from_checkpoint(str((ckpt / MODULE_SUBDIR).resolve()))
    module.eval()
    with torch.no_grad():
        out = module.forward_inference({"obs": torch.as_tensor(np.asarray(obs), dtype=torch.float32)})
        dist = (
            module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"]).to_deterministic()
        )
        ref = np.stack([unsquash_action(x, module.action_space) for x in dist.sample().numpy()])
    np.testing.assert_allclose(agent.act(core, obs), ref, rtol=1e-5, atol=1e-6)


@needs_ray
def test_path_mode_policy_matches_rllib_module(tmp_path) -> None:
    """MultiDiscrete (path mode): the rebuilt network's arg-max per slot equals RLlib's deterministic
    categorical sample, on observations of several seeds (an untrained module: random weights)."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from ainet_gym.agents.rllib_policy import PolicyNet, export_policy
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.envs.rllib import ppo_config

    cfg = ppo_config(SCENARIO, num_env_runners=0, envs_per_runner=2, seed=3, action_mode="path")
    runner = SingleAgentEnvRunner(config=cfg)
    module = runner.module
    spec = export_policy(module, tmp_path)
    import torch

    net = PolicyNet(spec, torch.load(tmp_path / "policy_weights.pt", weights_only=True), "t")
    core = EnvCore(SCENARIO, batch=4, action_mode="path")
    obs, _ = core.reset([1, 2, 3, 4])
    with torch.no_grad():
        out = module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)})
        dist = (
            module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"]).to_deterministic()
        )
        ref = dist.sample().numpy()
    got = net.act(obs, core.action_space)
    np.testing.assert_array_equal(got, ref)
    assert len(np.unique(got)) > 1  # not a constant policy
    runner.stop()


@needs_ray
def test_ray_starts_under_a_4gb_address_space_limit(tmp_path) -> None:
    """init_ray caps the object store, so Ray starts with ``ulimit -v`` at 4 GB (Ray's default store, 30% of
    RAM, would not fit on a machine above 13 GB)."""
    import resource
    import subprocess
    import sys

    code = (
        "import ray; from ainet_gym.envs.rllib import init_ray; "
        f"init_ray(None, 0, temp_dir={_ray_tmp()!r}); "
        "print(int(ray.cluster_resources()['object_store_memory'])); ray.shutdown()"
    )

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=cap, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) == 256 * 2**20


@needs_ray
def test_checkpoint_errors(tmp_path) -> None:
    from ainet_gym.agents.registry import make_agent

    with pytest.raises(FileNotFoundError, match="not found"):
        make_agent(f"rllib:{tmp_path / 'missing'}")
    with pytest.raises(ValueError, match="not found"):  # also a ValueError (ModelNotFoundError)
        make_agent(f"rllib:{tmp_path / 'missing'}")
    with pytest.raises(FileNotFoundError, match=r"ainet_gym\.json"):
        make_agent(f"rllib:{tmp_path}")


def test_sweep_rejects_bad_grids() -> None:
    from ainet_gym.agents.rllib_sweep import SweepConfig, sweep

    with pytest.raises(ValueError, match="lrs: empty"):
        sweep(SweepConfig(lrs=[]))
    with pytest.raises(ValueError, match=r"lrs \[-0\.1\]: learning rates must be finite and > 0"):
        sweep(SweepConfig(lrs=[-0.1]))
    with pytest.raises(ValueError, match="timesteps = 0"):
        sweep(SweepConfig(timesteps=0))


@needs_ray
def test_sweep_one_trial_table(local_ray, tmp_path) -> None:
    """A Tune grid of one trial (one CPU) trains, checkpoints, and its row is evaluated against ECMP."""
    from ainet_gym.agents.rllib_sweep import SweepConfig, sweep

    rows = sweep(
        SweepConfig(
            scenarios=[SCENARIO],
            seeds=[3],
            lrs=[1e-3],
            timesteps=1,
            envs_per_runner=2,
            eval_seeds=[1, 2],
            out=tmp_path,
        )
    )
    assert len(rows) == 1 and rows[0]["error"] is None
    r = rows[0]
    assert r["timesteps"] == 2 * 48  # one iteration: 2 copies x one episode
    # the row's figure is its checkpoint's episodes on the evaluation seeds, replayed one by one here
    want = [replayed_gpu_utilization(f"rllib:{r['checkpoint']}", SCENARIO, s, 48) for s in (1, 2)]
    assert r["eval_gpu_utilization"] == pytest.approx(np.mean(want), rel=1e-6)
    assert r["vs_ecmp"]["mean"] == pytest.approx(
        r["eval_gpu_utilization"] - r["ecmp_gpu_utilization"], abs=1e-12
    )
    assert "| periodic-interference | 3 | 0.001 | 96 |" in (tmp_path / "results.md").read_text()
    from ainet_gym.agents.rllib_checkpoint import read_checkpoint_metadata, scenario_fabric

    assert read_checkpoint_metadata(r["checkpoint"])["fabric"] == scenario_fabric(SCENARIO)  # issue-26zk2
