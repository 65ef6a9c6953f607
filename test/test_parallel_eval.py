"""``para-sim eval --jobs N``: shards of contiguous layouts, the options each shard gets, refusals, the join into the
serial report (against hand-written shard reports), and (slow, real nodes) two jobs equal to one."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from para_ros.commands import sim as sim_cli
from para_ros.deploy import parallel_eval as par
from para_ros.deploy.closed_loop import EvalSettings, write_report
from para_ros.deploy.episodes import EpisodeRow


def test_shards_are_contiguous_near_equal_and_cover_every_layout_once():
    seeds = list(range(100000, 100011))
    shards = par.shard_seeds(seeds, 3)
    assert [len(s) for s in shards] == [4, 4, 3]
    assert sum(shards, []) == seeds
    assert par.shard_seeds(seeds[:2], 4) == [[100000], [100001]]  # never an empty shard


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {
            "camera_shift_m": (0.0, 0.087, -0.01),
            "camera_rotate_deg": (-1.2246467991473532e-16, 0.0, 10.0),
            "lockstep": True,
        },
        {"cube_rgba": (0.75, 0.75, 0.75, 1.0), "light_scale": 0.4, "videos": False, "fast_path": True, "device": "cpu"},
        {"cube_region": "y<0", "time_limit_s": 12.5, "settle_s": 0.25, "out": "runs/x"},
        {
            "node_params": {
                "inference_node": {"decoding": "fused"},
                "sim_node": {"wrist_cam_true_offset_xyz_m": [0.003, 0, 0]},
            }
        },
    ],
)
def test_a_jobs_command_line_says_exactly_its_settings(changes):
    """eval_argv(settings) parsed by para-sim eval's own parser gives the settings back (catches a field a shard, a
    sweep's cell or a cluster job would silently lose)."""
    settings = EvalSettings(checkpoint="checkpoints/pick_place", episodes=7, seed=123, **changes)
    args = sim_cli.build_parser().parse_args(["eval", *par.eval_argv(settings)])
    assert sim_cli.eval_settings(args, args.checkpoint) == settings


def test_a_setting_no_command_line_says_is_refused():
    with pytest.raises(ValueError, match="success_hold_s"):
        par.eval_argv(EvalSettings(checkpoint="ck", success_hold_s=1.0))


def test_each_shard_runs_its_own_layouts_into_its_own_folder(tmp_path):
    settings = EvalSettings(checkpoint="ck", episodes=5, seed=10, lockstep=True, out=str(tmp_path))
    cmds = par.shard_commands(settings, list(range(10, 15)), 2, tmp_path)
    parsed = [sim_cli.build_parser().parse_args(c[3:]) for c in cmds]
    assert [(a.seed, a.episodes, a.out) for a in parsed] == [
        (10, 3, str(tmp_path / "shards" / "00")),
        (13, 2, str(tmp_path / "shards" / "01")),
    ]
    assert all(a.lockstep and a.jobs == 1 for a in parsed)


@pytest.mark.parametrize(
    "jobs, lockstep, words", [(0, True, "use 1..2"), (3, True, "use 1..2"), (2, False, "needs --lockstep")]
)
def test_jobs_outside_the_cores_or_without_lockstep_are_refused(jobs, lockstep, words):
    with pytest.raises(ValueError, match=words):
        par.check_jobs(jobs, lockstep, cores=2)
    par.check_jobs(1, False, cores=2)
    par.check_jobs(50, True, cores=2, here=False)  # printed for a cluster: not bound by this machine's cores
    with pytest.raises(ValueError, match="use 1"):
        par.check_jobs(0, True, cores=2, here=False)


def _row(k, seed, outcome="success"):
    return EpisodeRow(episode=k, seed=seed, outcome=outcome, duration_s=6.0 + 0.1 * seed % 7, place_error_m=0.01 * k,
                      max_lift_m=0.05, chunks=40 + k, chunks_rejected=0, fault="x" if outcome == "fault" else "",
                      wall_s=20.0)  # fmt: skip


def test_the_join_is_the_serial_report_with_the_serial_episode_numbers(tmp_path):
    settings = EvalSettings(checkpoint="ck", episodes=5, seed=100, lockstep=True, out=str(tmp_path), videos=False)
    outcomes = ["success", "misplaced", "fault", "success", "no_grasp"]
    for k, (start, n) in enumerate([(100, 3), (103, 2)]):
        d = tmp_path / par.SHARDS_DIR / f"{k:02d}"
        d.mkdir(parents=True)
        rows = [_row(i, start + i, outcomes[start - 100 + i]) for i in range(n)]
        write_report(d, replace(settings, seed=start, episodes=n, out=str(d)), rows, {"interrupted": False})
        (d / "confidence.jsonl").write_text("".join(json.dumps({"episode": i, "seed": r.seed}) + "\n"
                                                    for i, r in enumerate(rows)))  # fmt: skip
    summary = par.join_shards(tmp_path, settings, list(range(100, 105)))
    report = json.loads((tmp_path / "report.json").read_text())
    assert [(e["episode"], e["seed"], e["outcome"]) for e in report["episodes"]] == [
        (k, 100 + k, o) for k, o in enumerate(outcomes)
    ]
    assert (summary["episodes"], summary["faults"], summary["successes"]) == (4, 1, 2)  # the fault is left out
    assert report["settings"] == json.loads(json.dumps(asdict(settings)))
    lines = [json.loads(x) for x in (tmp_path / "confidence.jsonl").read_text().splitlines()]
    assert [(x["episode"], x["seed"]) for x in lines] == [(k, 100 + k) for k in range(5)]
    # a shard run with other settings is refused, naming them
    other = tmp_path / par.SHARDS_DIR / "01" / "report.json"
    data = json.loads(other.read_text())
    data["settings"]["time_limit_s"] = 5.0
    other.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="time_limit_s"):
        par.join_shards(tmp_path, settings, list(range(100, 105)))


def test_print_commands_prints_one_command_a_shard_and_runs_nothing(tmp_path, capsys):
    argv = ["eval", "--checkpoint", "checkpoints/pick_place", "--episodes", "4", "--lockstep", "--jobs", "2",
            "--out", str(tmp_path / "o"), "--print-commands"]  # fmt: skip
    assert sim_cli.main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x and not x.startswith(("#", "para-sim"))]
    assert len(lines) == 2 and "--episodes 2 --seed 100002" in lines[1] and "--jobs" not in lines[0]
    assert not (tmp_path / "o").exists()
    assert sim_cli.main(["eval", "--episodes", "4", "--jobs", "2", "--out", str(tmp_path / "o")]) == 2  # no lockstep


@pytest.mark.slow
@pytest.mark.ros
def test_two_jobs_give_the_serial_runs_report(tmp_path):
    from core_fixtures import tiny_checkpoint

    ck = tiny_checkpoint(tmp_path / "ck")
    base = ["eval", "--checkpoint", str(ck), "--episodes", "3", "--time-limit", "2", "--settle", "0.5", "--lockstep",
            "--no-videos"]  # fmt: skip
    assert sim_cli.main([*base, "--out", str(tmp_path / "serial")]) == 0
    assert sim_cli.main([*base, "--jobs", "2", "--out", str(tmp_path / "parallel")]) == 0
    serial = json.loads((tmp_path / "serial" / "report.json").read_text())
    parallel = json.loads((tmp_path / "parallel" / "report.json").read_text())
    strip = [{k: v for k, v in e.items() if k != "wall_s"} for e in serial["episodes"]]
    assert [{k: v for k, v in e.items() if k != "wall_s"} for e in parallel["episodes"]] == strip
    assert parallel["summary"] == serial["summary"] and parallel["shards"] == 2


def test_a_sweep_prints_one_eval_command_a_cell_that_says_the_cells_settings(tmp_path, capsys):
    argv = ["sweep", "--checkpoint", "a=checkpoints/pick_place,b=checkpoints/pick_place_randomised", "--orbit-deg",
            "0,10", "--height-m", "0", "--fovy-deg", "38", "--episodes", "3", "--lockstep", "--out",
            str(tmp_path / "s"), "--print-commands"]  # fmt: skip
    assert sim_cli.main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if " eval " in x and not x.startswith("#")]
    assert len(lines) == 4  # 2 checkpoints x 2 points
    import shlex

    parsed = [sim_cli.build_parser().parse_args(shlex.split(x)[3:]) for x in lines]
    assert {(a.checkpoint, Path(a.out).name) for a in parsed} == {
        (c, p) for c in ("checkpoints/pick_place", "checkpoints/pick_place_randomised")
        for p in ("orbit+0_height+0cm", "orbit+10_height+0cm")
    }  # fmt: skip
    assert all(a.lockstep and a.resume and a.episodes == 3 for a in parsed)
    moved = [a for a in parsed if Path(a.out).name.startswith("orbit+10")]
    assert all(any(a.camera_rotate_deg) for a in moved)
    assert not (tmp_path / "s" / "a").exists()


def test_a_suite_prints_one_eval_command_a_condition_not_done_and_refuses_a_bad_jobs(tmp_path, capsys):
    """``para-sim suite --print-commands`` / ``--jobs``: one ``para-sim eval`` a (checkpoint, condition) whose report
    is not complete, each saying its condition (the suite's own settings for it) and continuing its folder."""
    import shlex

    from para_ros.deploy.robustness_suite import CONDITIONS

    out = tmp_path / "s"
    done = out / "a" / "told_extrinsics_10mm" / "report.json"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"summary": {"episodes": 3, "outcomes": {"success": 3}}, "episodes": [],
                                "interrupted": False}))  # fmt: skip
    argv = ["suite", "--checkpoint", "a=checkpoints/pick_place,b=checkpoints/pick_place_robust", "--conditions",
            "nominal", "told_extrinsics_10mm", "--episodes", "3", "--out", str(out), "--print-commands"]  # fmt: skip
    assert sim_cli.main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if " eval " in x and not x.startswith("#")]
    parsed = [sim_cli.build_parser().parse_args(shlex.split(x)[3:]) for x in lines]
    assert sorted((Path(a.out).parent.name, Path(a.out).name) for a in parsed) == [
        ("a", "nominal"), ("b", "nominal"), ("b", "told_extrinsics_10mm")
    ]  # fmt: skip
    assert all(a.lockstep and a.resume and a.episodes == 3 and a.seed == 100000 for a in parsed)
    told = next(a for a in parsed if Path(a.out).name == "told_extrinsics_10mm")
    params = dict(x.split(":=", 1) for x in told.node_param)
    for name, value in CONDITIONS["told_extrinsics_10mm"].sim_params.items():
        assert json.loads(params[f"sim_node:{name}"]) == value
    assert json.loads(params["chunk_executor:lockstep_latency_s"]) == 0.2
    assert not (out / "a" / "nominal").exists() and not (out / "b").exists()
    assert sim_cli.main([*argv[:-1], "--jobs", "0"]) == 2
    assert "--jobs 0: use 1.." in capsys.readouterr().err
    assert sim_cli.main([*argv[:-1], "--jobs", "2", "--no-lockstep"]) == 2
    assert "needs --lockstep" in capsys.readouterr().err
