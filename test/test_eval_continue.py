"""``para-sim eval --continue``: which episodes of an earlier report are kept (the layouts asked for, not the lockstep
faults), a report run with other settings refused with the settings named, and a finished report extended by nothing
written again without starting a graph. (The slow sweep test runs a continued point through the real nodes.)"""

import json
from dataclasses import asdict

import pytest

from para_ros.commands import sim as sim_cli
from para_ros.deploy.closed_loop import EvalSettings, kept_episodes, write_report
from para_ros.deploy.episodes import EpisodeRow

CHECKPOINT = "checkpoints/pick_place"


def _row(k: int, seed: int, outcome: str = "success") -> EpisodeRow:
    return EpisodeRow(
        episode=k,
        seed=seed,
        outcome=outcome,
        duration_s=6.0 + k,
        place_error_m=0.01,
        max_lift_m=0.05,
        chunks=40,
        chunks_rejected=0,
        fault="lockstep: no chunk" if outcome == "fault" else "",
        wall_s=20.0 + k,
    )


def _report(tmp_path, settings: EvalSettings, rows) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_report(tmp_path, settings, rows, {"interrupted": False})
    return json.loads((tmp_path / "report.json").read_text())


def test_keeps_the_asked_layouts_and_runs_the_faults_again(tmp_path):
    before = EvalSettings(checkpoint=CHECKPOINT, episodes=4, lockstep=True, out=str(tmp_path), videos=False)
    rows = [_row(0, 100000), _row(1, 100001, "fault"), _row(2, 100002, "misplaced"), _row(3, 100003)]
    report = _report(tmp_path, before, rows)
    more = EvalSettings(checkpoint=CHECKPOINT, episodes=6, lockstep=True, out=str(tmp_path), resume=True)
    kept = kept_episodes(report, more, list(range(100000, 100006)))
    assert [r.seed for r in kept] == [100000, 100002, 100003]  # the fault's layout runs again
    assert kept[1] == rows[2]  # a kept row is the row, every field
    fewer = kept_episodes(report, more, [100000, 100001])
    assert [r.seed for r in fewer] == [100000]


@pytest.mark.parametrize(
    "change, named",
    [
        ({"lockstep": False}, "lockstep: True there, False now"),
        ({"camera_shift_m": (0.0, 0.1, 0.0)}, "camera_shift_m"),
        ({"node_params": {"inference_node": {"decoding": "fused"}}}, "node_params"),
        ({"seed": 200000}, "seed: 100000 there, 200000 now"),
    ],
)
def test_a_report_of_other_settings_is_refused_with_them_named(tmp_path, change, named):
    before = EvalSettings(checkpoint=CHECKPOINT, episodes=2, lockstep=True, out=str(tmp_path))
    report = _report(tmp_path, before, [_row(0, 100000), _row(1, 100001)])
    now = EvalSettings(**{**asdict(before), "episodes": 3, "resume": True, **change})
    with pytest.raises(ValueError, match="other settings") as err:
        kept_episodes(report, now, [100000, 100001, 100002])
    assert named in str(err.value)


def test_a_setting_newer_than_the_report_counts_as_its_default(tmp_path):
    before = EvalSettings(checkpoint=CHECKPOINT, episodes=1, lockstep=True, out=str(tmp_path))
    report = _report(tmp_path, before, [_row(0, 100000)])
    del report["settings"]["compare"], report["settings"]["resume"]  # a report written before these existed
    now = EvalSettings(**{**asdict(before), "resume": True})
    assert [r.seed for r in kept_episodes(report, now, [100000])] == [100000]


def test_continue_with_nothing_missing_rewrites_the_report_and_starts_no_graph(tmp_path, capsys):
    out = tmp_path / "eval"
    before = EvalSettings(checkpoint=CHECKPOINT, episodes=3, lockstep=True, out=str(out), videos=False)
    _report(out, before, [_row(0, 100000), _row(1, 100001, "misplaced"), _row(2, 100002)])
    argv = ["eval", "--checkpoint", CHECKPOINT, "--episodes", "2", "--lockstep", "--out", str(out), "--continue"]
    assert sim_cli.main([*argv, "--no-videos"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert [e["seed"] for e in report["episodes"]] == [100000, 100001]
    assert report["summary"]["successes"] == 1 and report["summary"]["episodes"] == 2
    assert not (out / "logs").exists()  # no graph was started
    assert "2 episode(s) kept" in capsys.readouterr().out


def test_continue_needs_out_and_refuses_a_compare(tmp_path, capsys):
    assert sim_cli.main(["eval", "--checkpoint", CHECKPOINT, "--continue"]) == 2
    assert "--continue needs --out" in capsys.readouterr().err
    argv = ["eval", "--checkpoint", CHECKPOINT, "--continue", "--out", str(tmp_path)]
    assert sim_cli.main([*argv, "--compare", "inference_node:decoding=argmax,fused"]) == 2
    assert "--continue does not apply to --compare" in capsys.readouterr().err


def test_the_same_checkpoint_by_another_path_is_the_same_setting(tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(CHECKPOINT, copy)
    before = EvalSettings(checkpoint=CHECKPOINT, episodes=1, lockstep=True, out=str(tmp_path / "r"))
    report = _report(tmp_path / "r", before, [_row(0, 100000)])
    now = EvalSettings(**{**asdict(before), "checkpoint": str(copy), "resume": True})
    assert [r.seed for r in kept_episodes(report, now, [100000])] == [100000]
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:-1] + b"\x00")
    with pytest.raises(ValueError, match="checkpoint"):  # other weights: another checkpoint
        kept_episodes(report, now, [100000])
