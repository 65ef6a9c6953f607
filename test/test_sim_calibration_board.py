"""The simulator's ChArUco board and its withheld camera poses (ROS-free).

Independent reference: the board's corners (``CharucoBoardSpec.corners_board_m()``) projected with
``cv2.projectPoints`` through the camera pose the simulator RENDERS (the configured pose moved by the true offset,
composed here by hand) and the OpenCV-convention K (the CameraInfo one: centre at (W - 1) / 2); the detector
(OpenCV's ``CharucoDetector`` + ``cornerSubPix``) must find the corners there within 0.5 px. Wrong texture
orientation, a board frame flipped or shifted by the margin, a camera rendered at the told pose instead of the true one
(or the reverse) each move the corners by many pixels.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.detection import detect_charuco
from para_ros.observation.camera_model import para_K_to_ros
from para_ros.sim.calibration_board import (
    BOARD_BODY,
    BoardMount,
    offset_T,
    rpy_deg_to_matrix,
)
from para_ros.sim.told_frames import told_frames
from para_ros.sim.yam_scene import SimConfig, YamSim

SPEC = CharucoBoardSpec()
W, H = 640, 480
SCENE_OFFSET = offset_T((0.03, -0.03, 0.025), (2.0, -3.0, 2.5))
WRIST_OFFSET = offset_T((0.002, -0.002, 0.001), (1.0, -1.0, 1.0))


def project(points_board: np.ndarray, T_world_board: np.ndarray, T_world_cam: np.ndarray, K: np.ndarray) -> np.ndarray:
    T_cam_board = np.linalg.inv(T_world_cam) @ T_world_board
    rvec, _ = cv2.Rodrigues(T_cam_board[:3, :3])
    uv, _ = cv2.projectPoints(points_board.reshape(-1, 1, 3), rvec, T_cam_board[:3, 3], K, None)
    return uv.reshape(-1, 2)


@pytest.fixture(scope="module", params=["table", "flange"])
def sim(request):
    config = SimConfig(
        n_cubes=0,
        calibration_board=BoardMount(SPEC, request.param),
        scene_cam_true_offset_T=SCENE_OFFSET,
        wrist_cam_true_offset_T=WRIST_OFFSET,
    )
    s = YamSim(config)
    yield request.param, s
    s.close()


def test_rpy_matches_opencv_rodrigues_about_each_axis():
    for axis, rpy in ((0, (10.0, 0, 0)), (1, (0, 10.0, 0)), (2, (0, 0, 10.0))):
        rvec = np.zeros(3)
        rvec[axis] = np.radians(10.0)
        assert np.allclose(rpy_deg_to_matrix(rpy), cv2.Rodrigues(rvec)[0], atol=1e-12)


def test_board_frame_is_where_the_mount_says(sim):
    where, s = sim
    mount = s.config.calibration_board
    T_parent = np.eye(4) if where == "table" else s.T_world_body("gripper")
    assert np.allclose(s.T_world_body(BOARD_BODY), T_parent @ mount.T_parent_board, atol=1e-9)


@pytest.mark.parametrize("camera", ["scene", "wrist"])
def test_rendered_corners_match_projection_through_the_true_pose(sim, camera):
    where, s = sim
    if (where, camera) == ("flange", "wrist"):
        pytest.skip("the wrist camera sees the back of a flange board")
    cfg = s.config
    T_world_cam_true = (
        cfg.scene_cam_T_world_cam() @ SCENE_OFFSET
        if camera == "scene"
        else s.T_world_body("gripper") @ cfg.wrist_cam_true_T_gripper_cam()
    )
    if camera == "wrist":  # composed by hand: yam.yaml's mount @ offset
        from para_ros.robot.yam import load_yam_config

        T_true_mount = load_yam_config().wrist_camera.T_parent_camera() @ WRIST_OFFSET
        assert np.allclose(cfg.wrist_cam_true_T_gripper_cam(), T_true_mount, atol=1e-9)
    assert np.allclose(s.T_world_cam(camera), T_world_cam_true, atol=1e-6)
    K_cv = para_K_to_ros(s.intrinsics(camera, W, H))
    image = s.render(camera, W, H)
    det = detect_charuco(image, SPEC)
    assert det is not None and len(det) >= 12, f"board not found by the {camera} camera ({where})"
    expected = project(SPEC.corners_board_m()[det.ids], s.T_world_body(BOARD_BODY), T_world_cam_true, K_cv)
    err = np.linalg.norm(det.corners_px - expected, axis=1)
    assert err.max() < 0.5, f"{camera}/{where}: corner errors {np.round(err, 2)}"
    # The told pose is 5 cm / 5 deg away: projecting through it misses by far more.
    T_told = (
        cfg.scene_cam_T_world_cam()
        if camera == "scene"
        else s.T_world_body("gripper") @ told_frames(cfg).T_gripper_wrist_cam
    )
    wrong = project(SPEC.corners_board_m()[det.ids], s.T_world_body(BOARD_BODY), T_told, K_cv)
    assert np.linalg.norm(det.corners_px - wrong, axis=1).mean() > 3.0


def test_told_frames_choices():
    cfg = SimConfig(n_cubes=0, scene_cam_true_offset_T=SCENE_OFFSET, wrist_cam_true_offset_T=WRIST_OFFSET)
    from para_ros.robot.yam import load_yam_config

    cad = load_yam_config().wrist_camera.T_parent_camera()
    nominal = told_frames(cfg)
    assert np.allclose(nominal.T_base_scene_cam, cfg.scene_cam_T_world_cam())
    assert np.allclose(nominal.T_gripper_wrist_cam, cad, atol=1e-9)
    truth = told_frames(cfg, "truth", "truth")
    assert np.allclose(truth.T_base_scene_cam, cfg.scene_cam_T_world_cam() @ SCENE_OFFSET)
    assert np.allclose(truth.T_gripper_wrist_cam, cad @ WRIST_OFFSET, atol=1e-9)
    assert told_frames(cfg, "none").T_base_scene_cam is None
    with pytest.raises(ValueError, match="calibration_file"):
        told_frames(cfg, "calibration")
    with pytest.raises(ValueError, match="scene_cam_tf"):
        told_frames(cfg, "guess")
