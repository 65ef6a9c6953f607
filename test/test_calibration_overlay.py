"""Overlay image: green circles at the detected corners, red crosses at the reprojected ones, at the right pixels."""

from __future__ import annotations

import numpy as np
from calibration_fixtures import SPEC, synthetic_samples

from para_core.calibration.detection import CharucoDetection
from para_core.calibration.handeye import HandEyeSample, solve_eye_to_hand
from para_core.calibration.overlay import draw_overlay


def _ring(canvas, centre, radius, channel_bgr):
    """How many pixels on a ring around ``centre`` are the colour's dominant channel."""
    u, v = np.round(centre).astype(int)
    patch = canvas[v - radius - 1 : v + radius + 2, u - radius - 1 : u + radius + 2].astype(int)
    others = [c for c in range(3) if c != channel_bgr]
    return int(np.sum((patch[..., channel_bgr] > 120) & (patch[..., others].max(axis=-1) < 80)))


def test_overlay_marks_detected_and_reprojected_corners():
    samples = synthetic_samples("eye_to_hand", 8, noise_px=0.0, seed=2)
    result = solve_eye_to_hand(samples, SPEC)
    s = samples[0]
    shifted = CharucoDetection(ids=s.detection.ids, corners_px=s.detection.corners_px + [12.0, 0.0])
    sample = HandEyeSample(s.T_base_flange, shifted, s.K, s.dist, s.image_size)
    canvas = draw_overlay(np.zeros((480, 640), np.uint8), sample, result, SPEC, label="scene_cam sample 0")
    assert canvas.shape == (480, 640, 3) and canvas.dtype == np.uint8
    truth = s.detection.corners_px  # noise-free, so the reprojection lands here
    for k in range(0, len(truth), 5):
        assert _ring(canvas, truth[k], 4, 2) >= 4  # red cross at the reprojected corner
        assert _ring(canvas, truth[k] + [12.0, 0.0], 4, 1) >= 4  # green circle at the detected one
    missing = HandEyeSample(s.T_base_flange, None, s.K, s.dist, s.image_size)
    big = draw_overlay(np.zeros((480, 640, 3), np.uint8), missing, result, SPEC, scale=2.0)
    assert big.shape == (960, 1280, 3)
    assert _ring(big, (truth[0] + 0.5) * 2 - 0.5, 8, 2) >= 4


def test_the_written_overlay_shows_red_crosses_as_its_legend_says(tmp_path):
    """para-calib solve's PNG: the recorded images are RGB, the file is BGR; a red cross must be red in the file."""
    import cv2

    from para_ros.calibration.solve import overlay_bgr

    samples = synthetic_samples("eye_to_hand", 8, noise_px=0.0, seed=2)
    result = solve_eye_to_hand(samples, SPEC)
    s = samples[0]
    written = overlay_bgr(np.zeros((480, 640, 3), np.uint8), s, result, SPEC)  # RGB image in, as recorded
    cv2.imwrite(str(tmp_path / "overlay.png"), written)
    png = cv2.imread(str(tmp_path / "overlay.png"))  # BGR, as any viewer shows it
    truth = s.detection.corners_px
    for k in range(0, len(truth), 5):
        assert _ring(png, truth[k], 4, 2) >= 4  # red (BGR channel 2), not blue
        assert _ring(png, truth[k], 4, 0) == 0


def _rightmost_text_column(canvas) -> int:
    white = np.all(canvas > 200, axis=-1)  # the text is white on a black outline; nothing else drawn is white
    cols = np.nonzero(white.any(axis=0))[0]
    return int(cols.max()) if cols.size else -1


def test_the_legend_fits_a_256_px_image():
    samples = synthetic_samples("eye_to_hand", 8, noise_px=0.0, seed=2)
    result = solve_eye_to_hand(samples, SPEC)
    canvas = draw_overlay(np.zeros((256, 256), np.uint8), samples[0], result, SPEC, label="wrist_cam sample 3")
    assert 100 < _rightmost_text_column(canvas) < 256 - 3  # drawn, and not cut off at the right edge
    text_rows = np.nonzero(np.all(canvas > 200, axis=-1).any(axis=1))[0]
    assert text_rows.max() < 256 - 3
