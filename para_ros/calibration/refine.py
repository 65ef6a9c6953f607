"""``para-calib refine``: the scene camera's pose re-estimated from a recording of normal operation (no board).

Reads the scene camera's images, CameraInfo and TF from a rosbag2 recording (:class:`para_ros.bag.reader.BagReader`),
finds the ArUco marker stuck on the gripper in each image (:func:`para_core.calibration.marker.detect_marker`), takes
the flange pose (``base`` -> ``gripper``) at the image's stamp and the told camera pose (``base`` -> the image's
``frame_id``, where the recording has it), and solves the camera pose with
:func:`para_core.calibration.marker_refine.refine_scene_camera`. The arm moves while it works, so no image is dropped
for motion: TF is interpolated at each image's stamp, which is right when the stamps are (the simulator's are exact;
on a real rig, the camera driver's exposure stamp).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.calibration_file import (
    CalibrationFile,
    camera_from_result,
    load_calibration,
    save_calibration,
)
from para_core.calibration.errors import CalibrationError
from para_core.calibration.marker import detect_marker
from para_core.calibration.marker_refine import MarkerSample, RefineConfig, refine_scene_camera
from para_ros.bag.reader import BagReader, BagTopicConfig, decode_image
from para_ros.calibration.samples import flange_posed_images


@dataclass
class MarkerRecording:
    """What a recording gives: the samples (marker found), the told camera pose (None where the recording has no
    TF for the camera), the image frame id and size, the counts of images and of those dropped and why."""

    samples: list = field(default_factory=list)  # MarkerSample
    T_base_cam_told: np.ndarray | None = None
    frame_id: str = ""
    image_size: tuple[int, int] = (0, 0)
    n_images: int = 0
    dropped: dict = field(default_factory=dict)

    def drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1


def read_marker_samples(
    bag_path, spec, namespace: str = "/scene_cam", flange_frame: str = "gripper", base_frame: str = "base"
) -> MarkerRecording:
    """The marker samples of the scene camera in the recording at ``bag_path``.

    :raises para_ros.bag.reader.BagError: unreadable bag, no images / CameraInfo on ``namespace``.
    :raises para_core.calibration.errors.CalibrationError: a CameraInfo with a zero focal length.
    """
    out = MarkerRecording()
    hint = "Record them (or give --scene-ns)"
    with BagReader(bag_path, BagTopicConfig(world_frame=base_frame, ee_frame=flange_frame), cameras=False) as bag:
        frames = flange_posed_images(
            bag, bag_path, namespace.rstrip("/"), "scene camera", flange_frame, base_frame, out, hint
        )
        for img, stamp, K, dist, T_base_flange in frames:
            corners = detect_marker(decode_image(img), spec)
            if corners is None:
                out.drop("marker not found")
                continue
            out.frame_id = out.frame_id or str(img.header.frame_id)
            out.image_size = (int(img.width), int(img.height))
            if out.T_base_cam_told is None and out.frame_id:
                out.T_base_cam_told = bag.try_lookup(out.frame_id, stamp)
            out.samples.append(MarkerSample(corners, T_base_flange, K, dist if dist.size else None))
    return out


def refine_recording(
    bag_path,
    spec,
    T_flange_marker: np.ndarray,
    out: Path,
    told_file: Path | None = None,
    config: RefineConfig | None = None,
    namespace: str = "/scene_cam",
    force: bool = False,
    log=print,
):
    """Read, solve and write ``out`` (a calibration.yaml: the told file's content with ``scene_cam`` replaced, or a
    new file holding ``scene_cam`` only). Nothing is written when anything fails. Returns (result, coverage,
    recording).

    :raises CalibrationError: no marker, too few images, too little motion (the coverage figures), ``out`` exists.
    :raises BagError: the recording lacks the scene camera's topics.
    """
    out = Path(out)
    if out.exists() and not force:
        raise CalibrationError(f"{out} exists: pass --force to overwrite it, or give another --out")
    told = load_calibration(told_file) if told_file else None
    rec = read_marker_samples(bag_path, spec, namespace)
    dropped = ", ".join(f"{n} {why}" for why, n in rec.dropped.items()) or "none dropped"
    log(f"scene_cam: {rec.n_images} images, {len(rec.samples)} with the marker ({dropped})")
    if not rec.samples:
        raise CalibrationError(
            f"the ArUco marker ({spec.dictionary} id {spec.marker_id}, {1000 * spec.side_m:.0f} mm) was found in none "
            f"of the {rec.n_images} scene images; check --marker-id / --marker-dictionary and that it faces the camera"
        )
    T_told = rec.T_base_cam_told
    if told is not None and "scene_cam" in told.cameras:
        T_told = told.camera("scene_cam").T_parent_child()
    result, coverage = refine_scene_camera(rec.samples, spec, T_flange_marker, T_told, config)
    log(f"  coverage: {coverage.text()}")
    log(
        f"  reprojection rms {result.reprojection_rms_px:.3f} px (max {result.reprojection_max_px:.3f} px; "
        f"initial guess {result.initial_method}: {result.initial_reprojection_rms_px:.3f} px)"
    )
    if T_told is not None:
        moved_mm = 1000.0 * float(np.linalg.norm(result.T_parent_cam[:3, 3] - T_told[:3, 3]))
        R = result.T_parent_cam[:3, :3].T @ T_told[:3, :3]
        moved_deg = float(np.degrees(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))))
        log(f"  the refined pose is {moved_mm:.1f} mm / {moved_deg:.2f} deg from the told one")
    sample = rec.samples[0]
    camera = camera_from_result(
        result, rec.frame_id or "scene_cam_optical_frame", sample.K, sample.dist, rec.image_size
    )
    cameras = dict(told.cameras) if told is not None else {}
    cameras["scene_cam"] = camera
    board = told.board if told is not None else CharucoBoardSpec()
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = save_calibration(CalibrationFile(date=date, board=board, cameras=cameras), out, force=force)
    log(f"wrote {path}")
    return result, coverage, rec
