"""report.md of ``para-sim eval`` says where the scene camera really was: moved through ``--camera-shift`` or through
``--node-param sim_node scene_cam_...`` alike (the same parameters the simulator is started with)."""

import numpy as np
import pytest

from para_ros.deploy.closed_loop import EvalSettings, scene_camera_move, write_report
from para_ros.deploy.episodes import EpisodeRow

CHECKPOINT = "checkpoints/pick_place"


def _report_line(tmp_path, settings) -> str:
    row = EpisodeRow(0, 100000, "success", 6.0, 0.01, 0.05, 40, 0, "", 20.0)
    write_report(tmp_path, settings, [row], {"interrupted": False})
    (line,) = [x for x in (tmp_path / "report.md").read_text().splitlines() if "scene camera moved" in x]
    return line


def test_a_camera_moved_through_node_params_is_reported(tmp_path):
    moved = {"sim_node": {"scene_cam_position_m": [0.33, -0.45, 0.62]}}  # config/sim.yaml: [0.33, -0.5, 0.6]
    settings = EvalSettings(checkpoint=CHECKPOINT, episodes=1, node_params=moved, videos=False)
    shift_m, _ = scene_camera_move(settings)
    np.testing.assert_allclose(shift_m, [0.0, 0.05, 0.02], atol=1e-9)
    assert "moved by [0.0, 0.05, 0.02] m" in _report_line(tmp_path, settings)


def test_the_camera_shift_option_and_no_move_are_reported_as_before(tmp_path):
    shifted = EvalSettings(
        checkpoint=CHECKPOINT, episodes=1, camera_shift_m=(0.02, 0.0, -0.01), camera_rotate_deg=(0, 0, 5.0)
    )
    shift_m, rotate_deg = scene_camera_move(shifted)
    np.testing.assert_allclose(shift_m, [0.02, 0.0, -0.01], atol=1e-9)
    np.testing.assert_allclose(rotate_deg, [0.0, 0.0, 5.0], atol=1e-9)
    assert "moved by [0.0, 0.0, 0.0] m, turned by [0.0, 0.0, 0.0] deg" in _report_line(
        tmp_path, EvalSettings(checkpoint=CHECKPOINT, episodes=1)
    )


def test_a_full_pose_given_as_a_node_param_is_reported():
    from para_ros.deploy.closed_loop import scene_camera_pose

    T = scene_camera_pose()
    T[:3, 3] += [0.1, 0.0, 0.0]
    settings = EvalSettings(
        checkpoint=CHECKPOINT, episodes=1, node_params={"sim_node": {"scene_cam_T_world_cam": T.ravel().tolist()}}
    )
    assert scene_camera_move(settings)[0] == pytest.approx([0.1, 0.0, 0.0], abs=1e-9)
