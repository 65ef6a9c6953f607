"""PARA against coordinate regression with the scene camera only: the one-view recipes train and deploy,
``scripts/generalise`` names the comparison's budgets, views, seeds and evaluation points, and the report's table joins
made-up evaluations into the figures computed here by hand."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from para_core.data import synthetic as syn
from para_core.data.dataset import Episode
from para_core.model.config import V4Config
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.train.cli import main as train_main
from para_ros.commands import generalisation_report
from para_ros.commands.sim import build_parser as sim_parser
from para_ros.deploy import generalisation_table as gt
from para_ros.deploy.closed_loop import check_checkpoint_matches_sim
from para_ros.deploy.sweep import sweep_points

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "generalise"
CONFIG = REPO / "config"
SHIPPED_BUDGET = 5000  # the shipped recipe's iterations: "the full budget"


def dry_run(experiment: str, *options: str) -> list[list[str]]:
    res = subprocess.run(
        ["bash", str(SCRIPT), experiment, "--dry-run", *options], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return [shlex.split(line[2:]) for line in res.stdout.splitlines() if line.startswith("+ ")]


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def recipe(path) -> dict:
    return yaml.safe_load(Path(path).read_text())


# ---------------------------------------------------------------------------------------------------- the recipes
@pytest.mark.parametrize(
    "one_view, two_views",
    [
        ("train_pick_place_scene.yaml", "train_pick_place.yaml"),
        ("train_pick_place_scene_finetune.yaml", "train_pick_place_finetune.yaml"),
    ],  # fmt: skip
)
def test_a_one_view_recipe_is_its_two_view_recipe_with_the_scene_camera_only(one_view, two_views):
    one, two = recipe(CONFIG / one_view), recipe(CONFIG / two_views)
    assert one.pop("view_names") == ["scene"] and "view_names" not in two
    assert one == two
    assert recipe(CONFIG / "train_pick_place_scene.yaml")["max_iters"] == SHIPPED_BUDGET


@pytest.fixture(scope="module")
def two_view_episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("episodes")
    rng = np.random.default_rng(0)
    for i in range(2):
        syn.synthetic_episode(V4Config.tiny(), rng, n_frames=24).save(root / f"ep{i}")
    return root


def quick_train(data, preset, config, out, *more) -> int:
    """para-train from a recipe file, cut to 2 iterations of batch 2 in this process (no workers, no validation)."""
    args = ["--data", str(data), "--preset", preset, "--config", str(config), "--out", str(out), "--max-iters", "2"]
    args += ["--batch-size", "2", "--num-workers", "0", "--val-fraction", "0", "--device", "cpu", "--no-progress"]
    return train_main(args + ["--no-tensorboard", *more])


@pytest.mark.parametrize("preset", ["pick_place", "pick_place_regression"])
def test_a_one_view_model_trains_from_its_recipe_and_predicts_from_the_scene_camera(
    preset, two_view_episodes, tmp_path, capsys
):
    """The episodes hold both cameras; the one-view model reads the scene camera, its checkpoint drives the
    simulator's check, predicts from one camera, refuses two, and fine-tunes with the one-view few-shot recipe (and
    not with the two-view one, which names both camera sets)."""
    torch.set_num_threads(1)
    run = tmp_path / "run"
    assert quick_train(two_view_episodes, preset, CONFIG / "train_pick_place_scene.yaml", run) == 0
    ck = run / "checkpoint"
    assert check_checkpoint_matches_sim(ck)["data"]["view_names"] == ["scene"]
    policy = Policy.from_checkpoint(ck, device="cpu")
    assert policy.view_names == ("scene",)
    ep = Episode.load(two_view_episodes / "ep0")
    cams = [CameraObservation(ep.images[v][5], ep.K[v][5], ep.T_world_cam[v][5]) for v in ("scene", "wrist")]
    past = np.repeat(ep.T_world_ee[5][None, :3, 3], policy.config.mv_past_n, axis=0)
    state = RobotState(ep.T_world_ee[5], float(ep.gripper[5]), past)
    out = policy.predict(cams[:1], state)
    assert out.positions_world.shape == (policy.config.n_window, 3) and np.isfinite(out.positions_world).all()
    with pytest.raises(ValueError, match=r"predict got 2 cameras; this policy needs 1"):
        policy.predict(cams, state)
    fast = Policy.from_checkpoint(ck, device="cpu", fast=True).predict(cams[:1], state)  # the inference node's option
    assert fast.positions_world.shape == out.positions_world.shape and np.isfinite(fast.positions_world).all()
    finetune = CONFIG / "train_pick_place_scene_finetune.yaml"
    assert quick_train(two_view_episodes, preset, finetune, tmp_path / "ft", "--init-from", str(ck)) == 0
    capsys.readouterr()
    two_view_ft = CONFIG / "train_pick_place_finetune.yaml"
    assert quick_train(two_view_episodes, preset, two_view_ft, tmp_path / "ft2", "--init-from", str(ck)) != 0
    message = capsys.readouterr().err
    assert "scene" in message and "wrist" in message and not (tmp_path / "ft2" / "checkpoint").exists()


def test_a_two_view_recipe_on_scene_only_episodes_names_the_views_expected_and_found(tmp_path, capsys):
    rng = np.random.default_rng(1)
    syn.synthetic_episode(V4Config.tiny(view_names=("scene",)), rng, n_frames=24).save(tmp_path / "data" / "ep0")
    assert quick_train(tmp_path / "data", "pick_place", CONFIG / "train_pick_place.yaml", tmp_path / "run") != 0
    err = capsys.readouterr().err
    assert "has views ['scene'] but the model config needs ['scene', 'wrist'] (missing ['wrist'])" in err
    assert not (tmp_path / "run" / "checkpoint").exists()


# -------------------------------------------------------------------------------------------- the experiments
def test_oneview_trains_the_four_policies_on_the_same_demos_at_the_shipped_budget(tmp_path):
    commands = dry_run("oneview", "--root", str(tmp_path))
    trained = {}
    for words in commands:
        assert words[0].endswith("scripts/train_pick_place"), words
        out = Path(option(words, "--out"))
        trained[out.name] = (option(words, "--preset"), recipe(option(words, "--config")), option(words, "--data"))
        assert option(words, "--episodes") == "222" and option(words, "--demo-args") == ""
    assert sorted(trained) == sorted(name for _, name in gt.POLICIES.values())
    assert {data for *_, data in trained.values()} == {str(tmp_path / "data" / "pick_place")}
    for name, (preset, cfg, _) in trained.items():
        assert preset == ("pick_place_regression" if "regression" in name else "pick_place")
        assert cfg["max_iters"] == SHIPPED_BUDGET
        assert cfg.get("view_names", ["scene", "wrist"]) == (
            ["scene"] if name.endswith("_scene") else ["scene", "wrist"]
        )


def test_oneview_sweep_runs_30_episodes_within_25_deg_and_10_cm_and_fewer_beyond(tmp_path):
    commands = dry_run("oneview-sweep", "--root", str(tmp_path), "--outer-episodes", "12", "--jobs", "3")
    parsed = [sim_parser().parse_args(words[3:]) for words in commands]
    assert [p.jobs for p in parsed] == [3, 3, 1]  # the table needs no graph
    assert all(p.command == "sweep" and p.lockstep and p.seed == 100000 for p in parsed)
    assert {p.out for p in parsed} == {str(tmp_path / "runs" / "generalise" / "oneview_sweep")}
    episodes = {}
    for p in parsed[:2]:
        for pt in sweep_points(p.orbit_deg, p.height_m, p.fovy_deg, nominal=_Nominal()):
            episodes.setdefault((pt.move.orbit_deg, pt.move.height_m), p.episodes)
            assert pt.move.fovy_deg is None  # orbit and height only
    inner = {(o, 0.0) for o in (-25.0, 0.0, 25.0)} | {(0.0, h) for h in (-0.1, 0.1)}
    outer = {(o, 0.0) for o in (-40.0, 40.0)} | {(0.0, h) for h in (-0.15, 0.15)}
    assert episodes == {**{k: 30 for k in inner}, **{k: 12 for k in outer}}
    assert parsed[2].report_only and sorted(parsed[2].orbit_deg) == [-40, -25, 0, 25, 40]
    assert sorted(parsed[2].height_m) == [-0.15, -0.1, 0, 0.1, 0.15]
    labels = {p.checkpoint for p in parsed}
    assert len(labels) == 1
    names = {item.split("=")[0] for item in labels.pop().split(",")}
    assert names == {name for _, name in gt.POLICIES.values()}


class _Nominal:
    fovy_deg = 38.0


def test_extrapolation_trains_the_four_at_the_full_budget_at_y_lt_0_and_evaluates_both_halves(tmp_path):
    commands = dry_run("extrapolation", "--root", str(tmp_path))
    trainings = [w for w in commands if w[0].endswith("scripts/train_pick_place")]
    evals = [sim_parser().parse_args(w[3:]) for w in commands if w[0] == "python"]
    assert len(trainings) == 4 and len(evals) == 8
    for words in trainings:
        assert option(words, "--demo-args") == "--cube-region y<0"
        assert recipe(option(words, "--config"))["max_iters"] == SHIPPED_BUDGET
        assert Path(option(words, "--out")).name.endswith("_y_lt_0_full")
    assert sorted(e.cube_region.text for e in evals) == ["y<0"] * 4 + ["y>=0"] * 4
    assert all(e.lockstep and e.episodes == 30 and e.seed == 100000 for e in evals)


def test_fewshot_fine_tunes_the_one_view_pair_on_5_and_20_demos_from_orbit_40(tmp_path):
    commands = dry_run("fewshot", "--root", str(tmp_path))
    ck = tmp_path / "checkpoints"
    finetunes = {}
    for words in commands:
        if words[2] == "para_core.train.cli":
            finetunes[Path(option(words, "--out")).name] = (
                option(words, "--init-from"),
                recipe(option(words, "--config")),
                Path(option(words, "--data")).name,
            )
    for preset in ("pick_place", "pick_place_regression"):
        for n in (5, 20):
            init, cfg, data = finetunes[f"{preset}_scene_fewshot{n}"]
            assert init == str(ck / f"{preset}_scene") and cfg["view_names"] == ["scene"]
            assert data == f"pick_place_orbit40_{n}"
    demos = [sim_parser().parse_args(w[3:]) for w in commands if w[2:4] == ["para_ros.commands.sim", "demos"]]
    assert sorted(d.episodes for d in demos) == [5, 20]
    sweep = sim_parser().parse_args(commands[-1][3:])
    assert sweep.orbit_deg == [0, 40] and sweep.height_m == [0] and sweep.episodes == 30 and sweep.lockstep


def test_the_report_reads_every_cell_where_the_experiments_write_it(tmp_path):
    """Every report path of the table is an evaluation folder (or a sweep cell) that a dry run names."""
    runs = tmp_path / "runs" / "generalise"
    written = set()
    for experiment in ("oneview-sweep", "extrapolation", "fewshot"):
        for words in dry_run(experiment, "--root", str(tmp_path)):
            if words[2:4] != ["para_ros.commands.sim", "eval"] and words[2:4] != ["para_ros.commands.sim", "sweep"]:
                continue
            p = sim_parser().parse_args(words[3:])
            if p.command == "eval":
                written.add(Path(p.out))
                continue
            for pt in sweep_points(p.orbit_deg, p.height_m, p.fovy_deg, nominal=_Nominal()):
                for item in p.checkpoint.split(","):
                    written.add(Path(p.out) / item.split("=")[0] / pt.label)
    wanted = {runs / rel for cond in gt.conditions() for rel in cond.reports.values()}
    assert wanted <= written, sorted(map(str, wanted - written))
    # 9 viewpoint rows, 2 extrapolation rows, 5 few-shot rows
    assert [c.section for c in gt.conditions()].count("viewpoint") == 9
    assert [c.section for c in gt.conditions()].count("few-shot") == 5


def test_bad_input_is_refused_with_a_message(tmp_path):
    for argv, message in (
        (["nonsense"], "unknown experiment 'nonsense'"),
        (["oneview", "--bogus"], "unknown option '--bogus'"),
        (["oneview-sweep", "--episodes", "ten"], "--episodes 'ten' is not a positive integer"),
        (["oneview-sweep", "--outer-episodes", "0"], "--outer-episodes '0' is not a positive integer"),
        (["oneview", "--root"], "--root needs a value"),
    ):
        res = subprocess.run(["bash", str(SCRIPT), *argv, "--dry-run"], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and message in res.stderr, (argv, res.stderr)
    assert generalisation_report.main(["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ the report
def write_report(folder: Path, outcomes: dict) -> None:
    folder.mkdir(parents=True)
    episodes = [{"seed": s, "outcome": o} for s, o in outcomes.items()]
    (folder / "report.json").write_text(json.dumps({"settings": {}, "interrupted": False, "episodes": episodes}))


def test_the_table_holds_hand_computed_wilson_intervals_and_mcnemar_tests(tmp_path, capsys):
    runs = tmp_path / "runs"
    seeds = list(range(100000, 100010))
    # nominal camera, scene only: PARA succeeds on seeds 0-7, regression on 5-7 (and on 2 seeds PARA did not run);
    # a lockstep fault of PARA's is left out of its counts
    para = {s: ("success" if i < 8 else "no_grasp") for i, s in enumerate(seeds)}
    para[100010] = "fault"
    reg = {s: ("success" if 5 <= i < 8 else "misplaced") for i, s in enumerate(seeds)}
    reg.update({100011: "success", 100012: "success"})
    write_report(runs / "oneview_sweep" / "pick_place_scene" / "orbit+0_height+0cm", para)
    write_report(runs / "oneview_sweep" / "pick_place_regression_scene" / "orbit+0_height+0cm", reg)
    # extrapolation, both cameras: PARA 0/10, regression absent
    write_report(runs / "extrapolation" / "pick_place_y_lt_0_full" / "eval_y_ge_0", dict.fromkeys(seeds, "no_grasp"))
    assert generalisation_report.main(["--runs", str(runs), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table.md").read_text()
    nominal = next(line for line in md.splitlines() if "| nominal camera |" in line).split(" | ")
    # Wilson 95 %: 8/10 -> 49.0-94.3 %; 5/12 -> 19.3-68.0 %; exact McNemar with 5 vs 0 discordant pairs:
    # 2 * 0.5^5 = 0.0625
    assert nominal[2] == "8/10 = 80 % (49-94 %)"
    assert nominal[3] == "5/12 = 42 % (19-68 %)"
    assert nominal[4] == "p = 0.062 (PARA only 5, regression only 0, 10 seeds)"
    assert nominal[5] == "not run" and nominal[7].startswith("-")
    extrap = next(line for line in md.splitlines() if "cube at y >= 0" in line).split(" | ")
    assert extrap[5] == "0/10 = 0 % (0-28 %)" and extrap[6] == "not run"
    data = json.loads((tmp_path / "out" / "table.json").read_text())
    cell = data["rows"][0]["cells"]["para_scene"]
    assert cell["faults_left_out"] == 1 and cell["wilson95"] == pytest.approx([0.4902, 0.9433], abs=1e-4)
    assert data["rows"][0]["paired"]["scene"]["mcnemar_p"] == 0.0625
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 1000
    assert "written:" in capsys.readouterr().out


def test_a_report_that_is_not_an_evaluation_is_named(tmp_path, capsys):
    bad = tmp_path / "runs" / "extrapolation" / "pick_place_y_lt_0_full" / "eval_y_lt_0"
    bad.mkdir(parents=True)
    (bad / "report.json").write_text("{not json")
    assert generalisation_report.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 2
    assert f"{bad / 'report.json'}: not a JSON report" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.ros
def test_one_view_checkpoints_run_a_lockstep_evaluation_through_the_real_nodes(tmp_path, capsys):
    """A one-view PARA and a one-view regression checkpoint (tiny, random weights) each drive one short lockstep
    episode through sim_node, the inference node and the executor (the wrist camera published and unused): the
    episode ends with a policy outcome, not a lockstep fault, and the report's table reads both cells."""
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.registry import build_model
    from para_ros.commands import sim as sim_cli

    runs = tmp_path / "runs"
    labels = []
    for key in ("para_scene", "regression_scene"):
        name = gt.POLICIES[key][1]
        kind = "coord_regression" if key.startswith("regression") else "para_v4"
        cfg = V4Config.tiny(view_names=("scene",), model_kind=kind)
        save_checkpoint(tmp_path / name, build_model(cfg), cfg)
        labels.append(f"{name}={tmp_path / name}")
    argv = ["sweep", "--checkpoint", ",".join(labels), "--orbit-deg", "0", "--height-m", "0", "--fovy-deg", "38"]
    argv += ["--episodes", "1", "--time-limit", "3", "--settle", "0.5", "--lockstep"]
    assert sim_cli.main(argv + ["--out", str(runs / "oneview_sweep")]) == 0
    capsys.readouterr()
    table, _ = gt.write_report(runs, tmp_path / "out")
    nominal = table["rows"][0]["cells"]
    for key in ("para_scene", "regression_scene"):
        assert nominal[key]["episodes"] == 1 and nominal[key]["faults_left_out"] == 0, nominal[key]
    assert table["rows"][0]["paired"]["scene"]["seeds"] == 1


def test_the_gpu_script_runs_every_step_under_one_folder_and_skips_what_needs_a_failed_step(tmp_path):
    script = REPO / "bench" / "gpu_generalise.sh"
    env = {"PATH": "/usr/bin:/bin", "DRY": "1", "OUT": str(tmp_path / "out")}
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    steps = ["oneview", "oneview-sweep", "extrapolation", "fewshot", "report"]
    assert [line.split(":")[0] for line in summary] == steps and all("exit status 0" in s for s in summary)
    for step in steps:
        commands = [shlex.split(line[2:]) for line in (tmp_path / "out" / f"{step}.log").read_text().splitlines()
                    if line.startswith("+ ")]  # fmt: skip
        assert commands, step
        for words in commands:  # everything under OUT, on the GPU
            outs = [words[i + 1] for i, w in enumerate(words) if w in ("--out", "--root")]
            assert outs and all(o.startswith(str(tmp_path / "out")) for o in outs), words
            if words[:4] == ["python", "-m", "para_core.train.cli", "--data"] or words[0].endswith("train_pick_place"):
                assert words[-2:] == ["--device", "cuda"], words
    # a bad option fails every step that runs, and the steps that need oneview are skipped, not run on nothing
    env.update(STEPS="oneview oneview-sweep fewshot report", EPISODES="0")
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120, env=env)
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert res.returncode != 0
    assert len(summary) == 4
    assert summary[1:3] == ["oneview-sweep: skipped (oneview failed)", "fewshot: skipped (oneview failed)"]
    assert summary[0].startswith("oneview: exit status 2") and summary[3].startswith("report: exit status 2")
    assert "--episodes '0' is not a positive integer" in (tmp_path / "out" / "oneview.log").read_text()
