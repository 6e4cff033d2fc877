"""Shipped checkpoints (policy weights only) and ``ainet-gym leaderboard --quick``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ainet_gym.agents.baselines import BASELINES
from ainet_gym.agents.evaluate import EvalConfig, evaluate
from ainet_gym.agents.pretrained import DROPPED_MEMBERS, export_checkpoint, load_policy_only
from ainet_gym.agents.sb3_agents import SB3Agent
from ainet_gym.agents.train import train
from ainet_gym.envs.env import EnvCore
from ainet_gym.envs.registration import ENV_IDS
from ainet_gym.pretrained import list_pretrained
from ainet_gym.scenario import load_scenario
from tests._scenarios import replayed_gpu_utilization


def test_export_keeps_policy_weights_only_and_acts_like_the_full_model(
    tmp_path: Path, tiny_ppo, small_spine_leaf_scenario: dict
) -> None:
    res = train(tiny_ppo(small_spine_leaf_scenario, tmp_path))
    dst = export_checkpoint(
        res.model_path, "small", "ainet-gym train small --timesteps 64", tmp_path / "s.zip"
    )
    with zipfile.ZipFile(res.model_path) as z:
        full = set(z.namelist())
    with zipfile.ZipFile(dst) as z:
        kept = set(z.namelist())
        meta = json.loads(z.read("ainet_gym.json"))
    assert set(DROPPED_MEMBERS) <= full and not (set(DROPPED_MEMBERS) & kept)
    assert {"data", "policy.pth", "ainet_gym.json"} <= kept
    assert meta["command"] == "ainet-gym train small --timesteps 64" and meta["algo"] == "ppo"
    assert meta["fabric"].startswith("fab1-")  # the trained model's fingerprint goes with it (issue-26zh2)
    assert dst.stat().st_size < 0.6 * Path(res.model_path).stat().st_size  # Adam state is 2x the weights
    # the policy-only model acts exactly like the full one
    full_agent = SB3Agent(res.model_path)
    model, _ = load_policy_only(dst)
    core = EnvCore(small_spine_leaf_scenario, batch=4)
    obs, _ = core.reset([1, 2, 3, 4])
    for _ in range(3):
        a_full = full_agent.act(core, obs)
        a_ship, _ = model.predict(obs, deterministic=True)
        np.testing.assert_array_equal(a_full, a_ship)
        obs, *_ = core.step(a_full)


def test_shipped_checkpoints_are_small_record_their_command_and_evaluate() -> None:
    shipped = list_pretrained()
    assert "periodic-interference" in shipped
    for name, meta in shipped.items():
        # weights or arrays only, no optimiser state: at most 2.9 MB, 3.04 and 3.21 MB for the value-vote
        # k-NNs of the 3:1 and 4:1 siblings of spine-leaf-2to1-jitter (their (N, 6) plan values beside the block)
        assert meta["size_bytes"] < 4e6, name
        if meta["file"].endswith(".npz"):  # a k-NN imitation: labelled by the lookahead, then fitted
            assert meta["commands"][0].startswith(f"python -m ainet_gym.agents.imitate label {name} ")
            assert meta["command"].startswith("python -m ainet_gym.agents.imitate knn "), meta["command"]
        else:
            assert meta["command"].startswith(f"ainet-gym train {name} "), meta["command"]
        assert meta["scenario"] == name and meta["algo"]
    res = evaluate(
        EvalConfig("periodic-interference", policies=["pretrained"], seeds=[1, 2], steps=2, out=None)
    )
    p = res["policies"]["pretrained"]
    # its floor (above ECMP and the jobs-only LP) is the next test's; here the figure is the one of the shipped
    # checkpoint on these episodes: the mean of each seed's episode replayed here on its own env, one at a
    # time (and so is ECMP's, whose two episodes differ)
    for name in ("pretrained", "ecmp"):
        want = [replayed_gpu_utilization(name, "periodic-interference", s, 2) for s in (1, 2)]
        assert res["policies"][name]["gpu_utilization"]["mean"] == pytest.approx(np.mean(want), rel=1e-6)
    assert p["controls"] == (
        "jobs+bg" if shipped["periodic-interference"]["action_mode"] == "ecmp_weights" else "jobs"
    )


def test_every_shipped_checkpoint_beats_ecmp_and_the_jobs_only_lp() -> None:
    # a floor, not a range: each shipped policy, loaded and run as `evaluate ... pretrained` does, routes
    # better than ECMP and than the LP over the jobs' traffic on the same two seeds (16 intervals; measured
    # 2 Dec 2026: margins over `lp` of +0.017 to +0.076 GPU utilisation; the k-NN of spine-leaf-2to1-jitter:
    # +0.09). A checkpoint loaded with the wrong observation scaling, action decoding or scenario (a k-NN
    # policy: the wrong block, plans or labels) plays near or below ECMP and fails here.
    for name in list_pretrained():
        res = evaluate(
            EvalConfig(name, policies=["ecmp", "lp", "pretrained"], seeds=[1, 2], steps=16, out=None)
        )
        u = {k: v["gpu_utilization"]["mean"] for k, v in res["policies"].items()}
        assert u["pretrained"] > u["lp"] > u["ecmp"], (name, u)


def test_pretrained_without_a_shipped_checkpoint_is_a_clear_error(small_spine_leaf_scenario: dict) -> None:
    with pytest.raises(
        ValueError, match=r"no checkpoint is shipped for scenario 'small'; shipped: .*periodic"
    ):
        evaluate(EvalConfig(small_spine_leaf_scenario, policies=["pretrained"], seeds=[1], steps=1, out=None))


def test_every_shipped_policy_carries_its_scenario_s_fabric_and_is_refused_on_another(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """issue-26zh2: each shipped policy records the fingerprint of its scenario's fabric (a .npz's field
    ``fabric``, a .zip's metadata key), so ``pretrained`` on a copy of the scenario with other uplinks (the same
    name, so the same shipped file) is refused in one line naming the file and both fingerprints, a k-NN .npz
    (4:1 to 2:1) and a PPO .zip (2:1 to 4:1) alike."""
    import yaml

    from ainet_gym.agents.imitate import load_knn
    from ainet_gym.agents.sb3_agents import read_metadata
    from ainet_gym.cli import main as cli_main
    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.pretrained import pretrained_path

    def fingerprint(scenario: object) -> str:
        sc = load_scenario(scenario)
        return fabric_fingerprint(build_fabric(sc.fabric, max_paths=sc.routing.max_paths))

    for name in list_pretrained():
        p = pretrained_path(name)
        got = load_knn(p)["fabric"] if p.suffix == ".npz" else read_metadata(p)["fabric"]
        assert got == fingerprint(name), name
    root = Path(__file__).resolve().parents[2] / "scenarios"
    for name, uplink in (("spine-leaf-4to1-jitter", 800), ("spine-leaf-2to1", 200)):
        sc = yaml.safe_load((root / f"{name}.yaml").read_text())
        assert sc["name"] == name and sc["fabric"]["uplink_gbps"] == 400
        sc["fabric"]["uplink_gbps"] = uplink
        copy = tmp_path / f"{name}.yaml"
        copy.write_text(yaml.safe_dump(sc))
        capsys.readouterr()
        ev = ["evaluate", str(copy), "--policies", "pretrained", "--seeds", "1", "--steps", "1", "--json"]
        assert cli_main(ev) == 2, name
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "field 'fabric'" in err, err
        for must in (f"pretrained:{pretrained_path(name)}", fingerprint(name), fingerprint(str(copy))):
            assert must in err, (must, err)


def test_leaderboard_ranks_a_copy_on_other_links_without_the_shipped_policy(tmp_path: Path) -> None:
    """issue-26zl2: a copy of a shipped scenario under the same name on other uplinks gets no ``pretrained`` row
    (its shipped policy records the original fabric and is refused there: the whole leaderboard stopped with
    exit 2), the original keeps it, for a PPO .zip (2:1 at 200G) and a k-NN .npz (4:1 at 800G) alike; every
    row's ``scenario`` is the scenario's name (it held the policy's name)."""
    import yaml

    from ainet_gym.agents.leaderboard import leaderboard, leaderboard_policies
    from ainet_gym.pretrained import pretrained_path

    root = Path(__file__).resolve().parents[2] / "scenarios"
    copies = {}
    for name, uplink in (("spine-leaf-2to1", 200), ("spine-leaf-4to1-jitter", 800)):
        assert pretrained_path(name) is not None and pretrained_path(name).suffix == (
            ".zip" if name == "spine-leaf-2to1" else ".npz"
        )
        sc = yaml.safe_load((root / f"{name}.yaml").read_text())
        sc["fabric"]["uplink_gbps"] = uplink
        copies[name] = tmp_path / f"{name}.yaml"
        copies[name].write_text(yaml.safe_dump(sc))
    board = leaderboard(
        [], seeds=[1], steps=1, progress=False, scenarios=[str(copies["spine-leaf-2to1"]), "spine-leaf-2to1"]
    )
    assert {r["scenario"] for r in board["rows"]} == {"spine-leaf-2to1"}
    pols = [r["policy"] for r in board["rows"]]  # the copy's rows, then the original's
    second = pols.index("ecmp", pols.index("ecmp") + 1)
    assert "pretrained" not in pols[:second] and pols[second:].count("pretrained") == 1
    for name, copy in copies.items():
        assert "pretrained" in leaderboard_policies(name), name
        assert "pretrained" in leaderboard_policies(str(root / f"{name}.yaml")), name  # a file: its name's
        assert "pretrained" not in leaderboard_policies(str(copy)), name


def test_leaderboard_labels_a_same_named_copy_apart_from_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """issue-26zo2: a copy of ``spine-leaf-2to1`` on 200G uplinks (same ``name:``) ranked beside the original
    shared its label with it: one row group in the table, one ``env_id`` in the JSON/CSV rows, one ``env_ids``
    entry (the second run's timing replaced the first's). The copy, given as a file, is now labelled
    ``NAME (FILE)``; every row's figures are those of its own scenario; labels without a collision are kept,
    and a scenario given twice is refused."""
    import csv

    import yaml

    from ainet_gym.cli import main

    root = Path(__file__).resolve().parents[2] / "scenarios"
    sc = yaml.safe_load((root / "spine-leaf-2to1.yaml").read_text())
    sc["fabric"]["uplink_gbps"] = 200
    copy = tmp_path / "sl-200g.yaml"
    copy.write_text(yaml.safe_dump(sc))
    assert load_scenario(str(copy)).name == "spine-leaf-2to1"
    monkeypatch.chdir(tmp_path)  # the copy given as a relative path, as typed
    out = tmp_path / "lb"
    args = ["leaderboard", "--seeds", "1", "--steps", "2", "--env-ids", "none", "--out", str(out), "--json"]
    capsys.readouterr()
    assert main([*args, "--scenarios", "spine-leaf-2to1,sl-200g.yaml"]) == 0
    board = json.loads(capsys.readouterr().out)
    labels = ["spine-leaf-2to1", "spine-leaf-2to1 (sl-200g.yaml)"]
    assert list(board["env_ids"]) == labels
    assert [board["env_ids"][k]["scenario"] for k in labels] == ["spine-leaf-2to1", "sl-200g.yaml"]
    assert all(board["env_ids"][k]["seconds"] > 0 for k in labels)  # both timings kept
    assert {r["scenario"] for r in board["rows"]} == {"spine-leaf-2to1"}
    # each group's figures are its own scenario's (the 200G copy congests: they differ)
    util = {}
    for label, scenario in zip(labels, ["spine-leaf-2to1", "sl-200g.yaml"], strict=True):
        rows = {r["policy"]: r for r in board["rows"] if r["env_id"] == label}
        assert "ecmp" in rows and "lp+bg" in rows, label
        res = evaluate(EvalConfig(scenario, policies=["ecmp", "lp+bg"], seeds=[1], steps=2, out=None))
        util[label] = {p: rows[p]["gpu_utilization"]["mean"] for p in ("ecmp", "lp+bg")}
        assert util[label] == {p: res["policies"][p]["gpu_utilization"]["mean"] for p in ("ecmp", "lp+bg")}
    assert util[labels[0]] != util[labels[1]], util
    n = {label: sum(r["env_id"] == label for r in board["rows"]) for label in labels}
    assert n[labels[0]] == n[labels[1]] + 1  # the shipped policy on the original only (issue-26zl2)
    with open(out / "leaderboard.csv", newline="") as fh:
        csv_ids = [r["env_id"] for r in csv.DictReader(fh)]
    assert {k: csv_ids.count(k) for k in labels} == n
    md = (out / "leaderboard.md").read_text().splitlines()[2:]
    assert {k: sum(line.startswith(f"| {k} |") for line in md) for k in labels} == n
    # no collision: labels unchanged; a file under a name of its own keeps that name
    from ainet_gym.agents.leaderboard import run_labels

    assert run_labels(["ainet_gym/SpineLeaf-v0"], ["spine-leaf-2to1"]) == [
        "ainet_gym/SpineLeaf-v0",
        "spine-leaf-2to1",
    ]
    assert run_labels([], [str(root / "clos3-2pods.yaml")]) == ["clos3-2pods"]
    assert run_labels([], ["sl-200g.yaml", str(copy)]) == [
        f"spine-leaf-2to1 ({p})" for p in ("sl-200g.yaml", copy)
    ]
    capsys.readouterr()
    assert main([*args[:-1], "--overwrite", "--scenarios", "spine-leaf-2to1,spine-leaf-2to1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'spine-leaf-2to1' given twice" in err and "each scenario once" in err, err


def test_leaderboard_refuses_an_extra_model_of_another_fabric_before_playing_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """issue-26zn2: ``leaderboard --policies MODEL`` plays the extra policy on every scenario; a model recording
    another fabric than one of them stopped the run with exit 2 at that scenario, after playing the ones before
    it. Now every (scenario, extra policy) pair is checked first, with the policy's own ``check``: one line
    names the policy, the scenario and the ``--env-ids``/``--scenarios`` it fits, and nothing is played or
    written; a PPO .zip (2:1 at 200G) and a k-NN .npz (4:1 at 800G, through the command line) alike."""
    import yaml

    from ainet_gym.agents import leaderboard as lb
    from ainet_gym.cli import main as cli_main
    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.pretrained import pretrained_path

    played: list[object] = []
    monkeypatch.setattr(lb, "evaluate", lambda cfg: played.append(cfg.scenario) or pytest.fail("played"))

    def fingerprint(scenario: object) -> str:
        sc = load_scenario(scenario)
        return fabric_fingerprint(build_fabric(sc.fabric, max_paths=sc.routing.max_paths))

    root = Path(__file__).resolve().parents[2] / "scenarios"
    copies = {}
    for name, uplink in (("spine-leaf-2to1", 200), ("spine-leaf-4to1-jitter", 800)):
        sc = yaml.safe_load((root / f"{name}.yaml").read_text())
        sc["fabric"]["uplink_gbps"] = uplink
        copies[name] = tmp_path / f"{name}.yaml"
        copies[name].write_text(yaml.safe_dump(sc))
        assert fingerprint(str(copies[name])) != fingerprint(name)
    ppo = f"ppo:{pretrained_path('spine-leaf-2to1')}"
    knn = f"knn:{pretrained_path('spine-leaf-4to1-jitter')}"
    assert ppo.endswith(".zip") and knn.endswith(".npz")
    # the scenario it fits first: the old code played it, then stopped at the copy
    with pytest.raises(ValueError) as e:
        lb.leaderboard(
            [],
            seeds=[1],
            steps=1,
            progress=False,
            extra=[ppo],
            scenarios=["spine-leaf-2to1", str(copies["spine-leaf-2to1"])],
        )
    msg = str(e.value)
    assert "\n" not in msg and played == [], (msg, played)
    for must in (
        f"--policies {ppo!r}",
        f"scenario {str(copies['spine-leaf-2to1'])!r}",
        fingerprint("spine-leaf-2to1"),
        fingerprint(str(copies["spine-leaf-2to1"])),
        "--env-ids none --scenarios spine-leaf-2to1,",
    ):
        assert must in msg, (must, msg)
    lb.check_extra_policies([], ["spine-leaf-2to1"], [ppo], steps=1)  # where it fits: no error
    # the command line: exit 2, one line, no file written
    out = tmp_path / "lb"
    args = [
        "leaderboard",
        "--quick",
        "--env-ids",
        "none",
        "--scenarios",
        f"spine-leaf-4to1-jitter,{copies['spine-leaf-4to1-jitter']}",
    ]
    capsys.readouterr()
    assert cli_main([*args, "--policies", knn, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and played == [], (err, played)
    for must in (
        knn,
        str(copies["spine-leaf-4to1-jitter"]),
        fingerprint("spine-leaf-4to1-jitter"),
        "--scenarios spine-leaf-4to1-jitter,",
    ):
        assert must in err, (must, err)
    assert not any((out / f).exists() for f in lb.LEADERBOARD_FILES)


def test_leaderboard_quick_covers_every_env_id_and_baseline(tmp_path: Path, capsys) -> None:
    from ainet_gym.cli import main

    assert main(["leaderboard", "--quick", "--out", str(tmp_path), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    shipped = list_pretrained()
    for env_id, scenario in ENV_IDS.items():
        rows = {r["policy"]: r for r in board["rows"] if r["env_id"] == env_id}
        want = {*BASELINES, "predictive-greedy", "predictive-lp", "predictive-greedy+bg", "predictive-lp+bg"}
        slots = range(len(load_scenario(scenario).jobs))
        weighted = {f"favour{j}{w}+bg" for j in slots for w in ("", "-w1e6")}  # per job slot, two weights
        want |= weighted | ({"pretrained"} if scenario in shipped else set())
        assert set(rows) == want, env_id
        assert {rows[w]["controls"] for w in weighted} == {"jobs+bg+weights"}, env_id
        e = rows["ecmp"]["gpu_utilization"]["mean"]
        for r in rows.values():
            # the LP of the row's class: lp+bg for the rows that route the background too, lp for the others
            bg = r["controls"] in ("jobs+bg", "jobs+bg+weights")
            assert r["lp_reference"] == ("lp+bg" if bg else "lp"), r["policy"]
            lp = rows[r["lp_reference"]]["gpu_utilization"]["mean"]
            s = r["lp_normalized_score"]["mean"]
            if lp - e < 0.005:
                assert s is None
            else:
                assert s == pytest.approx((r["gpu_utilization"]["mean"] - e) / (lp - e))
        assert rows["ecmp"]["controls"] == "none" and rows["spray+bg"]["controls"] == "jobs+bg"
    # every shipped checkpoint has its row: those of scenarios no env id covers are ranked by name
    covered = set(ENV_IDS.values())
    for scenario in shipped:
        label = next((i for i, s in ENV_IDS.items() if s == scenario), scenario)
        rows = {r["policy"]: r for r in board["rows"] if r["env_id"] == label}
        assert "pretrained" in rows and {*BASELINES} <= set(rows), scenario
        assert (label == scenario) == (scenario not in covered)
    for k in ("md", "csv", "json", "png"):
        assert (tmp_path / f"leaderboard.{k}").stat().st_size > 0
    assert (tmp_path / "leaderboard.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "leaderboard.md").read_text()
    assert md.count("\n") == len(board["rows"]) + 2


def test_demo_comparison_says_beats_only_when_the_intervals_separate() -> None:
    from ainet_gym.agents.demo import comparison

    def pol(m: float, lo: float, hi: float, controls: str = "jobs") -> dict:
        return {"gpu_utilization": {"mean": m, "ci95": [lo, hi]}, "controls": controls}

    result = {
        "policies": {
            "ppo": pol(0.70, 0.69, 0.71, "jobs+bg"),
            "spray": pol(0.55, 0.54, 0.56),
            "greedy": pol(0.695, 0.68, 0.70),  # touches the CI: not "beats"
            "lp": pol(0.75, 0.74, 0.76),
        }
    }
    lines = comparison(result).splitlines()
    assert lines[0].startswith("ppo (controls jobs+bg): GPU utilisation 0.700 [0.690, 0.710]")
    assert lines[1].startswith(" other classes")  # no baseline of ppo's own class in this result
    assert lines[2].split()[0] == "beats" and "spray" in lines[2] and "+0.150" in lines[2]
    assert lines[3].split()[0] == "overlaps" and "greedy" in lines[3]
    assert lines[4].startswith("  loses to") and "lp" in lines[4]
    assert len(lines) == 5  # only the baselines present
    # the baselines of its own class come first, then the other classes
    result["policies"]["lp+bg"] = pol(0.73, 0.72, 0.74, "jobs+bg")
    result["policies"]["spray+bg"] = pol(0.60, 0.59, 0.61, "jobs+bg")
    lines = comparison(result).splitlines()
    assert lines[1].startswith(" its own class (jobs+bg")
    assert "spray+bg" in lines[2] and lines[2].split()[0] == "beats"
    assert "lp+bg" in lines[3] and lines[3].split()[0] == "loses"
    assert lines[4].startswith(" other classes")
    assert [x.split("(")[0].split()[-1] for x in lines[5:]] == ["spray", "greedy", "lp"]
    # the demo's learned row is keyed as given to evaluate (ppo:PATH) and printed under a short name
    result["policies"]["ppo:out/demo/ppo.zip"] = result["policies"].pop("ppo")
    lines = comparison(result, learned="ppo:out/demo/ppo.zip", name="ppo").splitlines()
    assert lines[0].startswith("ppo (controls jobs+bg): GPU utilisation 0.700")
    with pytest.raises(KeyError):
        comparison(result)  # no row "ppo" any more


def test_a_shipped_policy_only_checkpoint_loads_as_ppo_path() -> None:
    # the optimiser state is not shipped; `ppo:PATH` must still load the weights (was a KeyError)
    import zipfile

    from ainet_gym.agents.sb3_agents import OPTIMIZER_MEMBER, load_model
    from ainet_gym.pretrained import pretrained_path

    p = pretrained_path("periodic-interference")
    assert p is not None and OPTIMIZER_MEMBER not in zipfile.ZipFile(p).namelist()
    model, meta = load_model(p, algo="ppo")
    ref, _ = load_policy_only(p)
    obs = np.zeros(model.observation_space.shape, dtype=np.float32)
    a, _ = model.predict(obs, deterministic=True)
    b, _ = ref.predict(obs, deterministic=True)
    assert meta["scenario"] == "periodic-interference" and np.array_equal(a, b)
