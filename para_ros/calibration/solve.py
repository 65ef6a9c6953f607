"""``para-calib solve``: recording -> hand-eye solution per camera -> figures, ``calibration.yaml`` and overlays.

``scene_cam`` is solved eye-to-hand (fixed camera, board on the flange: the camera's pose in ``base``), ``wrist_cam``
eye-in-hand (camera on the flange, board fixed: the mount in ``gripper``), by
:func:`para_core.calibration.handeye.solve_eye_to_hand` / ``solve_eye_in_hand`` (OpenCV's hand-eye solvers, then a
non-linear refinement of the reprojection error over all samples). Nothing is written unless every requested camera
solved: a bad recording leaves no half-written file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import cv2
import numpy as np

from para_core.calibration.calibration_file import (
    CalibrationFile,
    camera_from_result,
    load_calibration,
    save_calibration,
)
from para_core.calibration.errors import CalibrationError
from para_core.calibration.handeye import solve_eye_in_hand, solve_eye_to_hand
from para_core.calibration.overlay import draw_overlay
from para_core.model.rotations import matrix_to_quaternion, rotation_angle_between
from para_ros.calibration.samples import read_camera_samples

SOLVERS = {"scene_cam": "eye_to_hand", "wrist_cam": "eye_in_hand"}
DEFAULT_FRAME_IDS = {"scene_cam": "scene_cam_optical_frame", "wrist_cam": "wrist_cam_optical_frame"}


@dataclass
class CameraSolution:
    camera: str
    frame_id: str
    result: object  # para_core.calibration.handeye.HandEyeResult
    samples: object  # para_ros.calibration.samples.CameraSamples


def solve_camera(bag_path, camera: str, spec, namespace: str | None = None, log=print) -> CameraSolution:
    """Read the samples of ``camera`` and solve them.

    :raises para_core.calibration.errors.CalibrationError: no board, too few samples, degenerate poses (the message
        says what to do).
    :raises para_ros.bag.reader.BagError: the recording lacks the camera's topics or the arm's TF.
    """
    got = read_camera_samples(bag_path, camera, spec, namespace)
    dropped = ", ".join(f"{n} {why}" for why, n in got.dropped.items()) or "none dropped"
    log(f"{camera}: {got.n_images} images, {len(got.samples)} with the board ({dropped})")
    if not got.samples:
        raise CalibrationError(
            f"{camera}: the {spec.squares_x}x{spec.squares_y} board ({spec.dictionary}, {spec.square_m} m squares) was "
            f"found in none of the {got.n_images} images. Check the board options (--squares-x/--squares-y/"
            "--square-m/--marker-m/--dictionary) and that the board was in view"
            + (" (for the scene camera: on the flange; for the wrist camera: on the table)" if got.n_images else "")
        )
    solver = solve_eye_to_hand if SOLVERS[camera] == "eye_to_hand" else solve_eye_in_hand
    result = solver(got.samples, spec)
    return CameraSolution(camera, got.frame_id or DEFAULT_FRAME_IDS[camera], result, got)


def describe(solution: CameraSolution) -> str:
    """Per-sample and overall figures of a solution, as printed by ``para-calib solve``."""
    r = solution.result
    lines = [
        f"{solution.camera} ({r.method}: camera in {r.cam_parent_frame!r}, board in {r.board_parent_frame!r}), "
        f"{len(r.sample_indices)} samples used, {r.samples_skipped} skipped"
    ]
    lines.append("  sample  corners  reproj_rms_px  handeye_rot_deg  handeye_trans_mm")
    for k, i in enumerate(r.sample_indices):
        det = solution.samples.samples[i].detection
        rot = r.per_sample_rotation_deg[k] if k < len(r.per_sample_rotation_deg) else float("nan")
        trans = r.per_sample_translation_mm[k] if k < len(r.per_sample_translation_mm) else float("nan")
        lines.append(f"  {i:6d}  {len(det):7d}  {r.per_sample_rms_px[k]:13.3f}  {rot:15.3f}  {trans:16.2f}")
    T = r.T_parent_cam
    q = matrix_to_quaternion(T[:3, :3])
    lines.append(
        f"  overall: reprojection rms {r.reprojection_rms_px:.3f} px (max {r.reprojection_max_px:.3f} px; "
        f"{r.initial_method} initial guess {r.initial_reprojection_rms_px:.3f} px), hand-eye residuals "
        f"{r.handeye_rotation_deg:.3f} deg / {r.handeye_translation_mm:.2f} mm, rotation coverage: largest "
        f"relative rotation {r.coverage.max_relative_rotation_deg:.1f} deg, axis spread "
        f"{r.coverage.axis_spread_deg:.1f} deg"
    )
    lines.append(
        f"  T_{r.cam_parent_frame}_{solution.camera}: xyz_m [{', '.join(f'{v:.5f}' for v in T[:3, 3])}] "
        f"quat_xyzw [{', '.join(f'{v:.6f}' for v in q)}]"
    )
    return "\n".join(lines)


def overlay_path(out: Path, camera: str) -> Path:
    return out.with_name(f"{out.stem}_{camera}_overlay.png")


def write_outputs(
    solutions: list[CameraSolution], spec, out: Path, force: bool = False, merge: bool = False, log=print
) -> Path:
    """Write ``calibration.yaml`` (refused if it exists, unless ``force``; ``merge`` keeps the other cameras of an
    existing file) and one overlay PNG per camera (its worst sample: detected corners vs the reprojection through the
    solved calibration and the arm's kinematics)."""
    out = Path(out)
    cameras = {}
    if merge and out.exists():
        old = load_calibration(out)
        if old.board != spec:
            raise CalibrationError(f"{out} was solved with another board ({old.board}); --merge needs the same board")
        clash = [s.camera for s in solutions if s.camera in old.cameras]
        if clash and not force:
            raise CalibrationError(f"{out} already holds {', '.join(clash)}: pass --force to replace it")
        cameras.update(old.cameras)
        force = True
    for s in solutions:
        cameras[s.camera] = camera_from_result(s.result, s.frame_id)
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = save_calibration(CalibrationFile(date=date, board=spec, cameras=cameras), out, force=force)
    log(f"wrote {path}")
    for s in solutions:
        r = s.result
        k = int(np.argmax(r.per_sample_rms_px))
        i = r.sample_indices[k]
        p = overlay_path(out, s.camera)
        cv2.imwrite(str(p), overlay_bgr(s.samples.images[i], s.samples.samples[i], r, spec))
        log(f"wrote {p} (sample {i}, the worst: {r.per_sample_rms_px[k]:.3f} px rms)")
    return path


OVERLAY_MIN_WIDTH_PX = 640  # smaller camera images are enlarged (whole factors) so the crosses and text can be read


def overlay_bgr(image_rgb: np.ndarray, sample, result, spec) -> np.ndarray:
    """(H * s, W * s, 3) uint8 BGR overlay of one sample, what ``cv2.imwrite`` takes: the recorded RGB (or grey)
    image turned to BGR first (``draw_overlay`` draws BGR colours), enlarged by a whole factor s to at least
    :data:`OVERLAY_MIN_WIDTH_PX` pixels wide."""
    image = np.asarray(image_rgb)
    bgr = image[:, :, ::-1] if image.ndim == 3 else image  # (H, W, 3) BGR, or (H, W) grey
    scale = float(max(1, math.ceil(OVERLAY_MIN_WIDTH_PX / image.shape[1])))
    return np.ascontiguousarray(draw_overlay(np.ascontiguousarray(bgr), sample, result, spec, scale=scale))


def pose_error(T_est: np.ndarray, T_true: np.ndarray) -> tuple[float, float]:
    """(translation error mm, rotation error deg) between two poses."""
    return (
        1000.0 * float(np.linalg.norm(T_est[:3, 3] - T_true[:3, 3])),
        math.degrees(rotation_angle_between(T_est[:3, :3], T_true[:3, :3])),
    )
