"""``para-sim suite``: each condition reaches the graph as the change it names (the moved camera's exact pose, the
node parameters), the table's cells are the Wilson intervals of the reports, bad input is refused before anything
runs, and (slow, real nodes over DDS in lockstep) two conditions with a tiny checkpoint."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from core_fixtures import tiny_checkpoint

from para_ros.commands import sim as sim_cli
from para_ros.deploy.closed_loop import EvalSettings, moved_camera_pose
from para_ros.deploy.robustness_suite import CONDITIONS, condition_settings, select_conditions, write_table
from para_ros.sim.camera_sampler import CameraMove, camera_pose
from para_ros.sim.pick_place import wilson_interval


def test_camera_conditions_reach_the_sim_as_their_exact_pose():
    base = EvalSettings(checkpoint="x")
    for name, move in (("orbit+25", CameraMove(orbit_deg=25)), ("lowered10cm", CameraMove(height_m=-0.1))):
        s = condition_settings(base, name)
        T = moved_camera_pose(camera_pose(CameraMove())[0], s.camera_shift_m, s.camera_rotate_deg)
        np.testing.assert_allclose(T, camera_pose(move)[0], atol=1e-9)


def test_rig_conditions_are_node_parameters_on_top_of_the_users():
    base = EvalSettings(
        checkpoint="x",
        node_params={"sim_node": {"light_scale": 1.2}, "chunk_executor": {"implausible_speed": "reject"}},
    )
    s = condition_settings(base, "told_extrinsics_10mm")
    assert s.node_params["sim_node"] == {"light_scale": 1.2, "scene_cam_true_offset_xyz_m": [0.01, 0.0, 0.0]}
    assert s.node_params["chunk_executor"] == {"implausible_speed": "reject"} and base.node_params["sim_node"] == {
        "light_scale": 1.2
    }
    assert condition_settings(base, "dim_light").node_params["sim_node"]["light_scale"] == 0.4  # the condition wins
    # focal length 5 % longer: f = (H / 2) / tan(fovy / 2), so tan(fovy' / 2) = tan(19 deg) / 1.05
    fovy = CONDITIONS["focal+5pct"].sim_params["scene_cam_fovy_deg"]
    assert math.tan(math.radians(19.0)) / math.tan(math.radians(fovy / 2)) == pytest.approx(1.05, abs=1e-5)


def test_unknown_condition_and_order():
    assert select_conditions([]) == list(CONDITIONS)
    assert select_conditions(["dim_light", "nominal"]) == ["nominal", "dim_light"]
    with pytest.raises(ValueError, match="unknown condition.*known: nominal"):
        select_conditions(["nominal", "fog"])


def test_table_cells_are_the_wilson_intervals(tmp_path):
    for name, k, n in (("nominal", 28, 30), ("dim_light", 3, 10)):
        d = tmp_path / "ck" / name
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps({"summary": {"successes": k, "episodes": n}}))
    md = write_table(tmp_path, ["ck"], ["nominal", "dim_light", "grey_cube"], {}).read_text()
    lo, hi = wilson_interval(28, 30)
    assert f"28/30 (93 %, {100 * lo:.0f}-{100 * hi:.0f})" in md
    assert "3/10 (30 %" in md and "| grey_cube: light grey cube (unseen colour) | not run |" in md
    rows = json.loads((tmp_path / "suite.json").read_text())["rows"]
    assert rows[0]["interval"] == pytest.approx(list(wilson_interval(28, 30)))


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys):
    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "suite"
    argv = ["suite", "--checkpoint", str(ck), "--out", str(out), "--conditions", "fog"]
    assert sim_cli.main(argv) == 2
    assert "unknown condition" in capsys.readouterr().err
    assert sim_cli.main(["suite", "--checkpoint", str(ck), "--out", str(out), "--episodes", "0"]) == 2
    assert sim_cli.main(["suite", "--checkpoint", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.ros
def test_suite_runs_two_conditions_with_atiny_checkpoint(tmp_path):
    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "suite"
    argv = ["suite", "--checkpoint", f"tiny={ck}", "--conditions", "nominal", "distractors4", "--episodes", "1",
            "--time-limit", "2", "--out", str(out)]  # fmt: skip
    assert sim_cli.main(argv) == 0
    rows = json.loads((out / "suite.json").read_text())["rows"]
    assert [(r["condition"], r["episodes"]) for r in rows] == [("nominal", 1), ("distractors4", 1)]
    settings = json.loads((out / "tiny" / "distractors4" / "report.json").read_text())["settings"]
    assert settings["node_params"]["sim_node"]["n_distractors"] == 4 and settings["lockstep"] is True
    assert settings["node_params"]["chunk_executor"]["lockstep_latency_s"] == 0.2  # the CPU latency by default
    assert (out / "suite.png").stat().st_size > 1000
    log = (out / "tiny" / "distractors4" / "logs" / "sim_node.log").read_text()
    assert "task reset" in log
