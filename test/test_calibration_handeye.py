"""Hand-eye solver against synthetic scenes with known truth (corners projected by cv2.projectPoints with pixel noise,
and boards rendered into images and detected), degenerate sets, the reported residuals and the coverage."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from calibration_fixtures import (
    SPEC,
    T_BASE_BOARD,
    T_BASE_CAM,
    T_FLANGE_BOARD,
    T_FLANGE_CAM,
    K,
    board_views,
    flange_pose,
    pose,
    render_board,
    synthetic_samples,
    transform_error,
)
from scipy.spatial.transform import Rotation

from para_core.calibration.detection import detect_charuco
from para_core.calibration.errors import CalibrationError
from para_core.calibration.handeye import (
    HandEyeConfig,
    HandEyeSample,
    rotation_coverage,
    solve_eye_in_hand,
    solve_eye_to_hand,
)

CASES = [
    ("eye_to_hand", solve_eye_to_hand, T_BASE_CAM, T_FLANGE_BOARD),
    ("eye_in_hand", solve_eye_in_hand, T_FLANGE_CAM, T_BASE_BOARD),
]


@pytest.mark.parametrize("method,solve,T_cam_truth,T_board_truth", CASES)
def test_noise_free_samples_give_the_truth_exactly(method, solve, T_cam_truth, T_board_truth):
    result = solve(synthetic_samples(method, 8, noise_px=0.0, seed=3), SPEC)
    for T, truth in ((result.T_parent_cam, T_cam_truth), (result.T_parent_board, T_board_truth)):
        trans_mm, rot_deg = transform_error(T, truth)
        assert trans_mm < 1e-3 and rot_deg < 1e-4
    assert result.reprojection_rms_px < 1e-4
    assert result.method == method
    assert (result.cam_parent_frame, result.board_parent_frame) == (
        ("base", "gripper") if method == "eye_to_hand" else ("gripper", "base")
    )


@pytest.mark.parametrize("method,solve,T_cam_truth,T_board_truth", CASES)
def test_noisy_samples_recover_the_truth_and_refinement_beats_the_closed_form(
    method, solve, T_cam_truth, T_board_truth
):
    samples = synthetic_samples(method, 15, noise_px=0.3, seed=0)
    result = solve(samples, SPEC)
    cam_mm, cam_deg = transform_error(result.T_parent_cam, T_cam_truth)
    board_mm, board_deg = transform_error(result.T_parent_board, T_board_truth)
    assert cam_mm < 1.0 and cam_deg < 0.1, (cam_mm, cam_deg)
    assert board_mm < 1.0 and board_deg < 0.1, (board_mm, board_deg)
    # The closed form is in the right frames (near the truth), and the refinement is at least as good.
    init_mm, init_deg = transform_error(result.T_parent_cam_initial, T_cam_truth)
    assert init_mm < 10.0 and init_deg < 1.0
    assert result.reprojection_rms_px <= result.initial_reprojection_rms_px + 1e-12
    assert cam_mm <= init_mm and cam_deg <= init_deg
    # Reported errors, recomputed here with cv2.projectPoints: 0.3 px per axis is 0.3 * sqrt(2) px per corner.
    errors, pnp_rot_deg, pnp_trans_mm = [], [], []
    for s in samples:
        T_cam_board = (
            np.linalg.inv(result.T_parent_cam)
            @ (s.T_base_flange if method == "eye_to_hand" else np.linalg.inv(s.T_base_flange))
            @ result.T_parent_board
        )
        uv = cv2.projectPoints(
            SPEC.corners_board_m()[s.detection.ids],
            cv2.Rodrigues(T_cam_board[:3, :3])[0],
            T_cam_board[:3, 3],
            s.K,
            s.dist,
        )[0].reshape(-1, 2)
        errors.append(np.linalg.norm(uv - s.detection.corners_px, axis=1))
        _, rvec, tvec = cv2.solvePnP(SPEC.corners_board_m()[s.detection.ids], s.detection.corners_px, s.K, s.dist)
        pnp_rot_deg.append(
            np.degrees(np.linalg.norm(Rotation.from_matrix(T_cam_board[:3, :3].T @ cv2.Rodrigues(rvec)[0]).as_rotvec()))
        )
        pnp_trans_mm.append(1000.0 * np.linalg.norm(T_cam_board[:3, 3] - tvec.ravel()))
    np.testing.assert_allclose(result.per_sample_rms_px, [np.sqrt(np.mean(e**2)) for e in errors], rtol=1e-6)
    all_errors = np.concatenate(errors)
    assert result.reprojection_rms_px == pytest.approx(np.sqrt(np.mean(all_errors**2)), rel=1e-6)
    assert result.reprojection_max_px == pytest.approx(all_errors.max(), rel=1e-6)
    assert 0.3 * np.sqrt(2) * 0.85 < result.reprojection_rms_px < 0.3 * np.sqrt(2) * 1.15
    # Hand-eye residuals: each sample's PnP pose (cv2.solvePnP here) against the calibration's prediction.
    np.testing.assert_allclose(result.per_sample_rotation_deg, pnp_rot_deg, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(result.per_sample_translation_mm, pnp_trans_mm, rtol=1e-3, atol=1e-3)
    assert result.handeye_rotation_deg == pytest.approx(np.sqrt(np.mean(np.square(pnp_rot_deg))), rel=1e-3)
    assert result.residuals_dict()["samples"] == 15 and result.samples_skipped == 0


@pytest.mark.parametrize("method,solve,T_cam_truth,T_board_truth", CASES)
def test_rendered_images_detected_and_solved_end_to_end(method, solve, T_cam_truth, T_board_truth):
    """From images: the board rendered at each flange pose, detected, solved; one image without the board."""
    rng = np.random.default_rng(5)
    samples = []
    for T_cam_board in board_views(10, rng):
        image = render_board(T_cam_board, rng=rng)
        samples.append(
            HandEyeSample(
                T_base_flange=flange_pose(method, T_cam_board),
                detection=detect_charuco(image, SPEC),
                K=K,
                dist=None,
                image_size=(640, 480),
            )
        )
    samples.append(
        HandEyeSample(T_base_flange=np.eye(4), detection=detect_charuco(np.full((480, 640), 90, np.uint8), SPEC), K=K)
    )
    result = solve(samples, SPEC)
    cam_mm, cam_deg = transform_error(result.T_parent_cam, T_cam_truth)
    board_mm, board_deg = transform_error(result.T_parent_board, T_board_truth)
    # Measured: 0.03 mm, 0.012 deg, 0.06 px rms (rendered corners are detected to 0.07 px).
    assert cam_mm < 0.3 and cam_deg < 0.05, (cam_mm, cam_deg)
    assert board_mm < 0.3 and board_deg < 0.05, (board_mm, board_deg)
    assert result.samples_skipped == 1 and result.sample_indices == list(range(10))
    assert result.reprojection_rms_px < 0.15


def test_rotations_about_one_axis_are_refused():
    samples = synthetic_samples("eye_to_hand", 10, noise_px=0.3, single_axis=True)
    with pytest.raises(CalibrationError, match="one axis only.*second, non-parallel axis"):
        solve_eye_to_hand(samples, SPEC)


def test_pure_translations_are_refused():
    samples = synthetic_samples("eye_in_hand", 8, noise_px=0.3)
    R = samples[0].T_base_flange[:3, :3]
    same_rotation = []
    for s in samples:
        T = s.T_base_flange.copy()
        T[:3, :3] = R
        same_rotation.append(HandEyeSample(T, s.detection, s.K, s.dist, s.image_size))
    with pytest.raises(CalibrationError, match="barely rotates"):
        solve_eye_in_hand(same_rotation, SPEC)


def test_too_few_samples_and_too_few_detections_are_refused():
    with pytest.raises(CalibrationError, match="only 5 of 5 samples show the board.*at least 6"):
        solve_eye_to_hand(synthetic_samples("eye_to_hand", 5, 0.3), SPEC)
    samples = synthetic_samples("eye_to_hand", 8, 0.3)
    missing = [
        HandEyeSample(s.T_base_flange, None if k % 2 else s.detection, s.K, s.dist) for k, s in enumerate(samples)
    ]
    with pytest.raises(CalibrationError, match="only 4 of 8 samples show the board \\(4 without"):
        solve_eye_to_hand(missing, SPEC)
    with pytest.raises(CalibrationError, match="no samples"):
        solve_eye_in_hand([], SPEC)


def test_zero_focal_length_is_refused():
    samples = synthetic_samples("eye_in_hand", 8, 0.3, K=np.array([[0.0, 0, 320], [0, 0.0, 240], [0, 0, 1]]))
    with pytest.raises(CalibrationError, match="focal length fx = 0.0.*not calibrated"):
        solve_eye_in_hand(samples, SPEC)


def test_rotation_coverage_hand_computed():
    about_x = [pose([0, 0, 0], [a, 0, 0]) for a in (-20.0, 0.0, 25.0)]
    coverage = rotation_coverage(about_x)
    assert coverage.max_relative_rotation_deg == pytest.approx(45.0)
    assert coverage.axis_spread_deg == pytest.approx(0.0, abs=1e-6) and coverage.pairs_used == 3
    # Two poses 30 deg about x, two 30 deg about y, none shared: pairs (0, x1), (0, y1) and (x1, y1) -- and the
    # spread of their axes is large; a pair below min_rotation_deg does not count.
    mixed = [
        pose([0, 0, 0], [0, 0, 0]),
        pose([0, 0, 0], [30, 0, 0]),
        pose([0, 0, 0], [0, 30, 0]),
        pose([0, 0, 0], [0, 0, 2.0]),
    ]
    coverage = rotation_coverage(mixed, HandEyeConfig(min_rotation_deg=5.0))
    assert coverage.pairs_used == 5
    angle_xy = np.degrees(
        np.linalg.norm(
            (
                Rotation.from_rotvec([np.radians(30), 0, 0]).inv() * Rotation.from_rotvec([0, np.radians(30), 0])
            ).as_rotvec()
        )
    )
    assert coverage.max_relative_rotation_deg == pytest.approx(angle_xy)
    assert coverage.axis_spread_deg > 45.0


def test_config_is_validated():
    with pytest.raises(CalibrationError, match="min_samples"):
        HandEyeConfig(min_samples=2)
    with pytest.raises(CalibrationError, match="min_axis_spread_deg"):
        HandEyeConfig(min_axis_spread_deg=-1.0)


def test_distortion_is_used():
    """Samples projected with distortion are solved exactly only when the solver applies the same distortion."""
    strong = np.array([-0.25, 0.1, 0.0, 0.0, 0.0])  # barrel distortion, several pixels at the image edges
    samples = synthetic_samples("eye_to_hand", 8, noise_px=0.0, seed=4, dist=strong)
    undistorted = [HandEyeSample(s.T_base_flange, s.detection, s.K, None, s.image_size) for s in samples]
    assert solve_eye_to_hand(undistorted, SPEC).reprojection_rms_px > 0.05
    assert solve_eye_to_hand(samples, SPEC).reprojection_rms_px < 1e-4
