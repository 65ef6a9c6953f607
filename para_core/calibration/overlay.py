"""Overlay image for one calibration sample: the ChArUco corners the detector found (green circles) against the
corners reprojected through the solved calibration and the arm's kinematics (red crosses), joined by a yellow line,
with the sample's error written on it. What ``para-calib solve`` writes per camera to let a user SEE the fit."""

from __future__ import annotations

import cv2
import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.handeye import HandEyeResult, HandEyeSample

DETECTED_BGR = (0, 200, 0)
REPROJECTED_BGR = (0, 0, 255)
ERROR_LINE_BGR = (0, 220, 255)
TEXT_BGR = (255, 255, 255)


def draw_overlay(
    image: np.ndarray,
    sample: HandEyeSample,
    result: HandEyeResult,
    spec: CharucoBoardSpec,
    scale: float = 1.0,
    label: str = "",
) -> np.ndarray:
    """(H * scale, W * scale, 3) uint8 BGR copy of ``image`` ((H, W) grey or (H, W, 3) BGR) with the detected
    corners (circles), the reprojected corners (crosses: all the board's corners that project inside the image) and
    a text line ``label``, the sample's rms / max error (px) and the calibration's overall rms.

    :param scale: enlarge the image first (small camera images are hard to read otherwise); positions are scaled.
    """
    image = np.asarray(image)
    if image.ndim == 2:
        canvas = cv2.cvtColor(image.astype(np.uint8), cv2.COLOR_GRAY2BGR)
    elif image.ndim == 3 and image.shape[2] == 3:
        canvas = image.astype(np.uint8).copy()
    else:
        raise ValueError(f"image has shape {image.shape}; give an (H, W) grey or (H, W, 3) BGR image")
    if scale != 1.0:
        canvas = cv2.resize(canvas, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    height, width = canvas.shape[:2]
    radius = max(3, int(round(4 * scale)))
    # Pixel-centre coordinates (OpenCV's) -> the scaled canvas's: centre of pixel u is at (u + 0.5) * scale - 0.5.

    def to_canvas(uv):
        return (np.asarray(uv) + 0.5) * scale - 0.5

    projected = to_canvas(result.project_corners(sample.T_base_flange, spec, sample.K, sample.dist))  # (N, 2)
    text = label
    det = sample.detection
    if det is not None and len(det):
        detected = to_canvas(det.corners_px)  # (M, 2)
        errors = np.linalg.norm(
            det.corners_px - result.project_corners(sample.T_base_flange, spec, sample.K, sample.dist, ids=det.ids),
            axis=1,
        )  # (M,)
        for (u, v), (pu, pv) in zip(detected, projected[det.ids]):
            cv2.line(canvas, _pt(u, v), _pt(pu, pv), ERROR_LINE_BGR, 1, cv2.LINE_AA)
            cv2.circle(canvas, _pt(u, v), radius, DETECTED_BGR, 1, cv2.LINE_AA)
        text += f" rms {np.sqrt(np.mean(errors**2)):.2f} px, max {errors.max():.2f} px"
    else:
        text += " board not detected"
    for u, v in projected:
        if -radius <= u < width + radius and -radius <= v < height + radius:
            cv2.drawMarker(canvas, _pt(u, v), REPROJECTED_BGR, cv2.MARKER_CROSS, 2 * radius, 1, cv2.LINE_AA)
    text += f" | all samples rms {result.reprojection_rms_px:.2f} px"
    font_scale = max(0.35, 0.4 * min(width, 800) / 400)
    lines = _wrap(text.strip(), font_scale, width - 10) + _wrap(LEGEND, font_scale, width - 10)
    for line_no, line in enumerate(lines):
        origin = (5, int(16 * font_scale / 0.4) * (line_no + 1))
        cv2.putText(canvas, line, origin, cv2.FONT_HERSHEY_SIMPLEX, font_scale, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(canvas, line, origin, cv2.FONT_HERSHEY_SIMPLEX, font_scale, TEXT_BGR, 1, cv2.LINE_AA)
    return canvas


LEGEND = "green o: detected   red +: reprojected (calibration + kinematics)"


def _wrap(text: str, font_scale: float, max_width_px: int) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``max_width_px`` at ``font_scale`` (a single word that is
    wider stays on its own line)."""
    lines: list[str] = []
    for word in text.split(" "):
        candidate = f"{lines[-1]} {word}" if lines else word
        fits = cv2.getTextSize(candidate, cv2.FONT_HERSHEY_SIMPLEX, font_scale, 3)[0][0] <= max_width_px
        if lines and fits:
            lines[-1] = candidate
        else:
            lines.append(word)
    return [line for line in lines if line.strip()]


def _pt(u: float, v: float) -> tuple[int, int]:
    return int(round(float(u))), int(round(float(v)))
