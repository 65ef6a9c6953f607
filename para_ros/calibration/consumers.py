"""How the rest of the package consumes a ``calibration.yaml`` (:mod:`para_core.calibration.calibration_file`).

* ``cameras.scene_cam`` is the static transform ``base`` -> scene camera optical frame (published by ``sim_node``
  with ``scene_cam_tf: calibration``, or by the ``calibration_tf`` node on a real rig);
* ``cameras.wrist_cam`` is the wrist mount, replacing ``config/yam.yaml``'s ``wrist_camera`` (the executor's TF with
  backend ``i2rt_sdk``, ``sim_node`` with ``wrist_cam_tf: calibration``).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import yaml

from para_core.calibration.calibration_file import load_calibration
from para_core.calibration.errors import CalibrationError
from para_core.model.rotations import matrix_to_quaternion
from para_ros.robot.yam import WristCameraMount

CALIBRATION_FILE_NAME = "calibration.yaml"


def load(path):
    """The :class:`para_core.calibration.calibration_file.CalibrationFile` at ``path`` (validated).

    :raises para_core.calibration.errors.CalibrationError: unreadable or invalid (the message says what).
    """
    if not Path(path).is_file():
        raise CalibrationError(f"calibration file {str(path)!r} does not exist; write one with para-calib solve")
    return load_calibration(path)


def wrist_mount(path, default):
    """``WristCameraMount`` from the file's ``wrist_cam`` (``default``, e.g. yam.yaml's, when the file has none)."""
    cal = load(path)
    if "wrist_cam" not in cal.cameras:
        return default
    cam = cal.camera("wrist_cam")
    T = cam.T_parent_child()
    return WristCameraMount(
        parent_frame=cam.parent_frame, frame_id=cam.frame_id, xyz_m=T[:3, 3], quat_xyzw=matrix_to_quaternion(T[:3, :3])
    )


def static_transforms(path, include_wrist: bool = False) -> list[tuple[str, str, object]]:
    """(parent, child, T (4, 4)) of the file's scene camera (and its wrist mount when ``include_wrist``)."""
    cal = load(path)
    out = []
    for name in ("scene_cam",) + (("wrist_cam",) if include_wrist else ()):
        if name in cal.cameras:
            cam = cal.camera(name)
            out.append((cam.parent_frame, cam.frame_id, cam.T_parent_child()))
    return out


def file_record(path) -> dict:
    """What a dataset or checkpoint keeps about a calibration: its name, sha256 and content (as loaded)."""
    p = Path(path)
    data = p.read_bytes()
    return {"file": p.name, "sha256": hashlib.sha256(data).hexdigest(), "content": yaml.safe_load(data)}


def keep_next_to(path, directory) -> Path:
    """Copy the (validated) calibration file into ``directory`` as ``calibration.yaml``."""
    load(path)
    dst = Path(directory) / CALIBRATION_FILE_NAME
    if Path(path).resolve() != dst.resolve():
        shutil.copy2(path, dst)
    return dst
