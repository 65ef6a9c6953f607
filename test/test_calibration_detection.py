"""ChArUco detection end to end on boards rendered into a synthetic camera (cv2.warpPerspective of the board image),
against the corners cv2.projectPoints gives for the same pose; PnP against the rendered pose."""

from __future__ import annotations

import numpy as np
import pytest
from calibration_fixtures import SPEC, K, board_views, project, render_board, transform_error

from para_core.calibration.detection import CharucoDetection, board_pose_from_detection, detect_charuco
from para_core.calibration.errors import CalibrationError

NO_DIST = np.zeros(5)


def test_detected_corners_match_projected_truth_without_half_pixel_bias():
    rng = np.random.default_rng(1)
    errors = []
    for T_cam_board in board_views(4, rng):
        img = render_board(T_cam_board, rng=rng)
        det = detect_charuco(img, SPEC)
        assert det is not None
        ids, truth = project(T_cam_board, dist=NO_DIST)
        truth_by_id = dict(zip(ids.tolist(), truth))
        assert len(det) >= 20
        errors.append(np.array([det.corners_px[k] - truth_by_id[i] for k, i in enumerate(det.ids.tolist())]))
    errors = np.concatenate(errors)  # (M, 2) detected - true, pixels
    assert np.sqrt(np.mean(np.sum(errors**2, axis=1))) < 0.1
    # OpenCV's CharucoDetector alone reports +0.5 px in x and y; the re-refinement removes it.
    assert np.all(np.abs(errors.mean(axis=0)) < 0.05)


def test_board_pose_by_pnp_matches_the_rendered_pose():
    rng = np.random.default_rng(2)
    T_cam_board = board_views(1, rng)[0]
    det = detect_charuco(render_board(T_cam_board, rng=rng), SPEC, K, NO_DIST)
    T = board_pose_from_detection(det, SPEC, K, NO_DIST)
    trans_mm, rot_deg = transform_error(T, T_cam_board)
    assert trans_mm < 2.0 and rot_deg < 0.3


def test_no_board_gives_none_and_bad_inputs_are_refused():
    blank = np.full((120, 160), 128, np.uint8)
    assert detect_charuco(blank, SPEC) is None
    assert board_pose_from_detection(None, SPEC, K) is None
    det = CharucoDetection(ids=np.arange(6), corners_px=np.random.default_rng(0).uniform(0, 100, (6, 2)))
    with pytest.raises(CalibrationError, match="focal length fx = 0.0"):
        board_pose_from_detection(det, SPEC, np.diag([0.0, 0.0, 1.0]))
    with pytest.raises(CalibrationError, match="outside 0..23"):
        board_pose_from_detection(CharucoDetection(ids=np.arange(20, 26), corners_px=det.corners_px), SPEC, K)
    with pytest.raises(CalibrationError, match="6 ids and 5 corners"):
        CharucoDetection(ids=np.arange(6), corners_px=np.zeros((5, 2)))
