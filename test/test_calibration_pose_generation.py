"""Calibration pose generation: count, workspace box, board facing the camera, tilt range, rotation coverage, and
that the generated poses calibrate (synthetic projections at those poses recover the truth)."""

from __future__ import annotations

import numpy as np
import pytest
from calibration_fixtures import (
    DIST,
    SPEC,
    T_BASE_BOARD,
    T_BASE_CAM,
    T_FLANGE_BOARD,
    T_FLANGE_CAM,
    K,
    pose,
    project,
    transform_error,
)

from para_core.calibration.detection import CharucoDetection
from para_core.calibration.errors import CalibrationError
from para_core.calibration.handeye import HandEyeSample, rotation_coverage, solve_eye_in_hand, solve_eye_to_hand
from para_core.calibration.pose_generation import (
    PoseGenerationConfig,
    eye_in_hand_flange_poses,
    eye_to_hand_flange_poses,
)

REFERENCE = pose([0.3, 0.0, 0.3], [180.0, 0.0, 0.0])  # flange pointing down
LO, HI = np.array([0.2, -0.2, 0.15]), np.array([0.45, 0.2, 0.45])


def _angle_deg(a, b) -> float:
    return float(np.degrees(np.arccos(np.clip(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))))


def _solve_at(method, poses, seed=0):
    rng = np.random.default_rng(seed)
    samples = []
    for T in poses:
        T_cam_board = (
            np.linalg.inv(T_BASE_CAM) @ T @ T_FLANGE_BOARD
            if method == "eye_to_hand"
            else np.linalg.inv(T_FLANGE_CAM) @ np.linalg.inv(T) @ T_BASE_BOARD
        )
        ids, uv = project(T_cam_board)
        samples.append(HandEyeSample(T, CharucoDetection(ids, uv + rng.normal(0, 0.3, uv.shape)), K, DIST))
    return (solve_eye_to_hand if method == "eye_to_hand" else solve_eye_in_hand)(samples, SPEC), samples


def test_eye_to_hand_poses_face_the_camera_inside_the_box_and_calibrate():
    config = PoseGenerationConfig(n_poses=15, tilt_min_deg=15.0, tilt_max_deg=30.0, yaw_max_deg=30.0)
    poses = eye_to_hand_flange_poses(T_BASE_CAM, T_FLANGE_BOARD, REFERENCE, LO, HI, config, spec=SPEC)
    assert poses.shape == (15, 4, 4)
    assert np.all(poses[:, :3, 3] >= LO) and np.all(poses[:, :3, 3] <= HI)
    centre = np.array([0.075, 0.105, 0.0, 1.0])
    tilts = []
    for T in poses:
        board_centre = (T @ T_FLANGE_BOARD @ centre)[:3]
        board_z = (T @ T_FLANGE_BOARD)[:3, 2]
        tilts.append(_angle_deg(board_z, board_centre - T_BASE_CAM[:3, 3]))  # 0: the printed face looks at the camera
    assert tilts[0] < 1e-6 and max(tilts) <= 30.0 + 1e-6 and min(tilts[1:]) >= 15.0 - 1e-6
    coverage = rotation_coverage(poses)
    assert coverage.axis_spread_deg > 30.0 and coverage.max_relative_rotation_deg > 40.0
    result, samples = _solve_at("eye_to_hand", poses)
    assert min(len(s.detection) for s in samples) >= 20  # the board in view (the fixture camera is 640 x 480)
    cam_mm, cam_deg = transform_error(result.T_parent_cam, T_BASE_CAM)
    assert cam_mm < 1.0 and cam_deg < 0.1


def test_eye_in_hand_poses_look_at_the_board_from_the_distance_and_calibrate():
    poses = eye_in_hand_flange_poses(
        T_BASE_BOARD,
        T_FLANGE_CAM,
        REFERENCE,
        [0.0, -0.5, 0.05],
        [0.7, 0.5, 0.7],
        0.4,
        PoseGenerationConfig(n_poses=12),
        spec=SPEC,
    )
    assert poses.shape == (12, 4, 4)
    for T in poses:
        T_cam_board = np.linalg.inv(T @ T_FLANGE_CAM) @ T_BASE_BOARD
        # Where the optical axis meets the board plane: within aim_offset_m (3 cm) of the board's centre.
        origin, axis = np.linalg.inv(T_cam_board) @ [0, 0, 0, 1], np.linalg.inv(T_cam_board)[:3, 2]
        hit = origin[:3] - origin[2] / axis[2] * axis
        assert np.linalg.norm(hit[:2] - [0.075, 0.105]) <= 0.03 + 1e-9
        assert 0.4 * 0.85 - 1e-9 <= np.linalg.norm(hit - origin[:3]) <= 0.4 * 1.15 + 1e-9
        assert _angle_deg(T_cam_board[:3, 2], [0.0, 0.0, 1.0]) <= 30.0 + 1e-6  # optical axis vs board normal
    assert rotation_coverage(poses).axis_spread_deg > 30.0
    result, _ = _solve_at("eye_in_hand", poses)
    cam_mm, cam_deg = transform_error(result.T_parent_cam, T_FLANGE_CAM)
    assert cam_mm < 1.0 and cam_deg < 0.1


def test_refusals():
    with pytest.raises(CalibrationError, match="only 0 of 15 eye-in-hand poses"):
        eye_in_hand_flange_poses(T_BASE_BOARD, T_FLANGE_CAM, REFERENCE, [2.0, 2.0, 2.0], [2.1, 2.1, 2.1], 0.4)
    with pytest.raises(CalibrationError, match="workspace box"):
        eye_to_hand_flange_poses(T_BASE_CAM, T_FLANGE_BOARD, REFERENCE, HI, LO)
    with pytest.raises(CalibrationError, match="n_poses"):
        PoseGenerationConfig(n_poses=3)
    with pytest.raises(CalibrationError, match="tilt range"):
        PoseGenerationConfig(tilt_min_deg=40.0, tilt_max_deg=20.0)
