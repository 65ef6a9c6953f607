"""calibration.yaml (``para_calibration: 1``): the solved camera poses, what the rest of the package consumes.

Layout (either camera may be absent; a camera's intrinsics are optional)::

    para_calibration: 1
    date: "2026-12-03T04:00:00Z"
    board: {squares_x: 5, squares_y: 7, square_m: 0.03, marker_m: 0.022, dictionary: DICT_5X5_100}
    cameras:
      scene_cam: {method: eye_to_hand, parent_frame: base, frame_id: scene_cam_optical_frame,
                  xyz_m: [..], quat_xyzw: [..], board_on: gripper, board_xyz_m: [..], board_quat_xyzw: [..],
                  residuals: {...}}
      wrist_cam: {method: eye_in_hand, parent_frame: gripper, frame_id: wrist_cam_optical_frame, ...,
                  camera_matrix: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], distortion: [k1, k2, p1, p2, k3],
                  image_size: [width, height]}

``cameras.<name>`` is the transform ``parent_frame`` -> ``frame_id`` (``T_parent_child`` maps camera coordinates to
the parent frame), quaternion (x, y, z, w). Loading validates every key and names the bad one; saving writes nothing
on error and never replaces an existing file unless ``force=True``. Floats are written with Python's shortest
round-trip representation, so save -> load is exact.

Intrinsics (optional, written only when present): ``camera_matrix`` is the 3x3 pinhole matrix in the OpenCV / ROS
``CameraInfo.k`` convention (the centre of pixel (col, row) is at (col, row); ``cv2.calibrateCamera`` and ROS
``camera_calibration`` write it so): fx, fy > 0, last row [0, 0, 1]. ``distortion`` is OpenCV's coefficient list
(4, 5, 8, 12 or 14 numbers: k1, k2, p1, p2[, k3, ...]); ``image_size`` the [width, height] in pixels the matrix
describes. Both need ``camera_matrix``. ``para_core`` works in its own pixel-centre convention (cx, cy + 0.5):
convert with ``para_ros.observation.camera_model.ros_K_to_para``.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError
from para_core.model.file_modes import normal_file_mode
from para_core.model.rotations import make_matrix, matrix_to_pose

FORMAT_KEY = "para_calibration"
FORMAT_VERSION = 1
CAMERA_NAMES = ("scene_cam", "wrist_cam")
METHODS = ("eye_to_hand", "eye_in_hand")
# How far from unit length a stored quaternion may be (it is written normalised; hand edits keep a few digits).
QUATERNION_NORM_TOLERANCE = 1e-3
RESIDUAL_KEYS = {
    "samples": int,
    "samples_skipped": int,
    "reprojection_rms_px": float,
    "reprojection_max_px": float,
    "handeye_rotation_deg": float,
    "handeye_translation_mm": float,
    "rotation_coverage_deg": float,
    "rotation_axis_spread_deg": float,
    "per_sample_rms_px": list,
}
TOP_KEYS = (FORMAT_KEY, "date", "board", "cameras")
CAMERA_KEYS = (
    "method",
    "parent_frame",
    "frame_id",
    "xyz_m",
    "quat_xyzw",
    "board_on",
    "board_xyz_m",
    "board_quat_xyzw",
    "residuals",
)
INTRINSICS_KEYS = ("camera_matrix", "distortion", "image_size")  # optional, after CAMERA_KEYS
OPTIONAL_CAMERA_KEYS = ("residuals", *INTRINSICS_KEYS)
# The coefficient counts OpenCV's distortion models take (cv2.calibrateCamera / cv2.projectPoints).
DISTORTION_LENGTHS = (4, 5, 8, 12, 14)


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _number_list(value: Any, key: str, length: int) -> tuple[float, ...]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != length
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    ):
        raise CalibrationError(f"{key} = {value!r} is invalid: give a list of {length} finite numbers")
    return tuple(float(v) for v in value)


def _quaternion(value: Any, key: str) -> tuple[float, float, float, float]:
    q = _number_list(value, key, 4)
    norm = math.sqrt(sum(v * v for v in q))
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        raise CalibrationError(f"{key} = {list(q)} has length {norm:.6f}: give a unit quaternion (x, y, z, w)")
    return q


def _camera_matrix(value: Any, key: str) -> tuple[tuple[float, float, float], ...]:
    fix = "give [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] in pixels (OpenCV / CameraInfo.k convention)"
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise CalibrationError(f"{key} = {value!r} is invalid: {fix}")
    K = tuple(_number_list(row, f"{key}[{i}]", 3) for i, row in enumerate(value))
    if not (K[0][0] > 0.0 and K[1][1] > 0.0):
        raise CalibrationError(
            f"{key} has focal length fx = {K[0][0]}, fy = {K[1][1]}: both must be > 0 (an uncalibrated camera?); {fix}"
        )
    if K[1][0] != 0.0 or K[2] != (0.0, 0.0, 1.0):
        raise CalibrationError(
            f"{key} = {[list(r) for r in K]} is not a pinhole matrix: row 2 must start with 0 and "
            f"row 3 be [0, 0, 1]; {fix}"
        )
    return K


def _distortion(value: Any, key: str) -> tuple[float, ...]:
    length = len(value) if isinstance(value, (list, tuple)) and len(value) in DISTORTION_LENGTHS else -1
    if length < 0:
        raise CalibrationError(
            f"{key} = {value!r} is invalid: give OpenCV's distortion coefficients, a list of "
            f"{' / '.join(map(str, DISTORTION_LENGTHS))} finite numbers (k1, k2, p1, p2[, k3, ...])"
        )
    return _number_list(value, key, length)


def _image_size(value: Any, key: str) -> tuple[int, int]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise CalibrationError(f"{key} = {value!r} is invalid: give [width, height] in pixels, two positive integers")
    return int(value[0]), int(value[1])


def _as_tuples(value: Any) -> Any:
    """Arrays / lists (nested) -> tuples of Python numbers, so a camera built from ``cv2`` output compares equal to
    the one loaded back; anything else is left for validation to name."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CalibrationError(f"{key} = {value!r} is invalid: give a non-empty string")
    return value


@dataclass(frozen=True)
class CameraCalibration:
    """One calibrated camera (an entry of ``cameras``).

    Args:
        method: ``"eye_to_hand"`` (fixed camera; pose in ``base``) or ``"eye_in_hand"`` (camera on the flange).
        parent_frame: the frame the pose is expressed in (``base`` or ``gripper``).
        frame_id: the camera's optical frame (``scene_cam_optical_frame`` / ``wrist_cam_optical_frame``).
        xyz_m: translation of ``T_parent_child`` in metres.
        quat_xyzw: rotation of ``T_parent_child``, unit quaternion (x, y, z, w).
        board_on: the frame the board was fixed to during calibration (``gripper`` or ``base``).
        board_xyz_m / board_quat_xyzw: the board's solved pose in ``board_on``.
        residuals: the solver's report (``HandEyeResult.residuals_dict()``), or None.
        camera_matrix: optional (3, 3) intrinsics in pixels, OpenCV / ``CameraInfo.k`` convention (module docstring).
        distortion: optional OpenCV distortion coefficients (4, 5, 8, 12 or 14; an array of cv2's (1, D) shape is
            flattened); needs ``camera_matrix``.
        image_size: optional (width, height) in pixels of the images ``camera_matrix`` describes; needs it too.
    """

    method: str
    parent_frame: str
    frame_id: str
    xyz_m: tuple[float, float, float]
    quat_xyzw: tuple[float, float, float, float]
    board_on: str
    board_xyz_m: tuple[float, float, float]
    board_quat_xyzw: tuple[float, float, float, float]
    residuals: dict | None = None
    camera_matrix: tuple[tuple[float, float, float], ...] | None = None
    distortion: tuple[float, ...] | None = None
    image_size: tuple[int, int] | None = None

    def __post_init__(self):
        if isinstance(self.distortion, np.ndarray):  # cv2.calibrateCamera returns (1, D)
            object.__setattr__(self, "distortion", self.distortion.reshape(-1))
        for name in INTRINSICS_KEYS:
            object.__setattr__(self, name, _as_tuples(getattr(self, name)))

    @property
    def has_intrinsics(self) -> bool:
        """True when the entry carries a ``camera_matrix``."""
        return self.camera_matrix is not None

    def K(self) -> np.ndarray:
        """(3, 3) float64 ``camera_matrix`` (OpenCV / ``CameraInfo.k`` convention); CalibrationError when absent."""
        if self.camera_matrix is None:
            raise CalibrationError(
                f"the calibration of {self.frame_id} has no camera_matrix; add the camera's "
                "intrinsics (camera_matrix, distortion, image_size) to its entry"
            )
        return np.array(self.camera_matrix, dtype=np.float64)

    def T_parent_child(self) -> np.ndarray:
        """(4, 4) transform mapping camera (``frame_id``) coordinates to ``parent_frame``."""
        return make_matrix(self.xyz_m, self.quat_xyzw)

    def T_board(self) -> np.ndarray:
        """(4, 4) the board's pose in ``board_on`` during calibration."""
        return make_matrix(self.board_xyz_m, self.board_quat_xyzw)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "method": self.method,
            "parent_frame": self.parent_frame,
            "frame_id": self.frame_id,
            "xyz_m": [float(v) for v in self.xyz_m],
            "quat_xyzw": [float(v) for v in self.quat_xyzw],
            "board_on": self.board_on,
            "board_xyz_m": [float(v) for v in self.board_xyz_m],
            "board_quat_xyzw": [float(v) for v in self.board_quat_xyzw],
        }
        if self.residuals is not None:
            out["residuals"] = _plain(self.residuals)
        for name in INTRINSICS_KEYS:
            if getattr(self, name) is not None:
                out[name] = _plain(getattr(self, name))
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "cameras.camera") -> CameraCalibration:
        """Validated entry; CalibrationError naming the key (``where.key``) and the fix."""
        keys = (*CAMERA_KEYS, *INTRINSICS_KEYS)
        required = [k for k in keys if k not in OPTIONAL_CAMERA_KEYS]
        if not isinstance(data, dict):
            raise CalibrationError(f"{where} must be a mapping with keys {list(keys)}")
        unknown = sorted(set(data) - set(keys))
        if unknown:
            hint = " (intrinsics go in camera_matrix, distortion and image_size)" if "K" in unknown else ""
            raise CalibrationError(f"{where} has unknown keys {unknown}: the keys are {list(keys)}{hint}")
        missing = [k for k in required if k not in data]
        if missing:
            raise CalibrationError(f"{where} lacks the keys {missing}: give all of {required}")
        for name in INTRINSICS_KEYS[1:]:
            if name in data and "camera_matrix" not in data:
                raise CalibrationError(
                    f"{_where(where, name)} needs {_where(where, 'camera_matrix')}: give the "
                    "camera matrix it belongs to, or remove it"
                )
        method = data["method"]
        if method not in METHODS:
            raise CalibrationError(f"{where}.method = {method!r} is invalid: use one of {list(METHODS)}")
        parent = _text(data["parent_frame"], _where(where, "parent_frame"))
        board_on = _text(data["board_on"], _where(where, "board_on"))
        if parent == board_on:
            raise CalibrationError(
                f"{where}: parent_frame and board_on are both {parent!r}; the board is on the arm "
                "for eye_to_hand and in the scene for eye_in_hand, never on the camera's parent"
            )
        return cls(
            method=method,
            parent_frame=parent,
            frame_id=_text(data["frame_id"], _where(where, "frame_id")),
            xyz_m=_number_list(data["xyz_m"], _where(where, "xyz_m"), 3),
            quat_xyzw=_quaternion(data["quat_xyzw"], _where(where, "quat_xyzw")),
            board_on=board_on,
            board_xyz_m=_number_list(data["board_xyz_m"], _where(where, "board_xyz_m"), 3),
            board_quat_xyzw=_quaternion(data["board_quat_xyzw"], _where(where, "board_quat_xyzw")),
            residuals=_residuals(data.get("residuals"), _where(where, "residuals")),
            camera_matrix=(
                _camera_matrix(data["camera_matrix"], _where(where, "camera_matrix"))
                if "camera_matrix" in data
                else None
            ),
            distortion=(_distortion(data["distortion"], _where(where, "distortion")) if "distortion" in data else None),
            image_size=_image_size(data["image_size"], _where(where, "image_size")) if "image_size" in data else None,
        )


def _residuals(value: Any, where: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CalibrationError(f"{where} must be a mapping with keys among {list(RESIDUAL_KEYS)}")
    unknown = sorted(set(value) - set(RESIDUAL_KEYS))
    if unknown:
        raise CalibrationError(f"{where} has unknown keys {unknown}: the keys are {list(RESIDUAL_KEYS)}")
    for key, kind in RESIDUAL_KEYS.items():
        if key not in value:
            continue
        v = value[key]
        if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise CalibrationError(f"{where}.{key} = {v!r} is invalid: give a non-negative integer")
        if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise CalibrationError(f"{where}.{key} = {v!r} is invalid: give a non-negative finite number")
        if kind is list:
            _number_list(v, f"{where}.{key}", len(v) if isinstance(v, list) else -1)
    return dict(value)


def _plain(value: Any) -> Any:
    """numpy scalars / arrays / tuples -> plain Python (what yaml.safe_dump writes)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return value


@dataclass(frozen=True)
class CalibrationFile:
    """The content of a calibration.yaml: ``date`` (ISO 8601, UTC), the ``board`` used, and ``cameras`` by name
    (``scene_cam`` and / or ``wrist_cam``)."""

    date: str
    board: CharucoBoardSpec
    cameras: dict = field(default_factory=dict)

    def camera(self, name: str) -> CameraCalibration:
        """The camera ``name``; CalibrationError naming the cameras the file has."""
        if name not in self.cameras:
            raise CalibrationError(
                f"the calibration has no camera {name!r} (it has {sorted(self.cameras) or 'none'}); "
                f"run para-calib solve with that camera's images"
            )
        return self.cameras[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            FORMAT_KEY: FORMAT_VERSION,
            "date": self.date,
            "board": self.board.to_dict(),
            "cameras": {name: cam.to_dict() for name, cam in self.cameras.items()},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "calibration") -> CalibrationFile:
        """Validated content; CalibrationError naming the key and the fix."""
        if not isinstance(data, dict):
            raise CalibrationError(
                f"{source} is not a YAML mapping; it must start with '{FORMAT_KEY}: {FORMAT_VERSION}'"
            )
        if data.get(FORMAT_KEY) != FORMAT_VERSION:
            raise CalibrationError(
                f"{source}: {FORMAT_KEY} = {data.get(FORMAT_KEY)!r}; this package reads "
                f"'{FORMAT_KEY}: {FORMAT_VERSION}' files (written by para-calib solve)"
            )
        unknown = sorted(set(data) - set(TOP_KEYS))
        if unknown:
            raise CalibrationError(f"{source} has unknown keys {unknown}: the keys are {list(TOP_KEYS)}")
        missing = [k for k in TOP_KEYS if k not in data]
        if missing:
            raise CalibrationError(f"{source} lacks the keys {missing}")
        date = data["date"]
        if isinstance(date, _dt.datetime):  # an unquoted timestamp parsed by YAML
            date = date.isoformat()
        date = _text(date, "date")
        try:
            _dt.datetime.fromisoformat(date)
        except ValueError as exc:
            raise CalibrationError(f"date = {date!r} is not an ISO 8601 time (e.g. 2026-12-03T04:00:00Z)") from exc
        board = CharucoBoardSpec.from_dict(data["board"])
        cameras_data = data["cameras"]
        if not isinstance(cameras_data, dict) or not cameras_data:
            raise CalibrationError(f"{source}: cameras must map at least one of {list(CAMERA_NAMES)} to its pose")
        unknown = sorted(set(cameras_data) - set(CAMERA_NAMES))
        if unknown:
            raise CalibrationError(f"cameras has unknown names {unknown}: the cameras are {list(CAMERA_NAMES)}")
        cameras = {
            name: CameraCalibration.from_dict(cameras_data[name], f"cameras.{name}")
            for name in CAMERA_NAMES
            if name in cameras_data
        }
        return cls(date=date, board=board, cameras=cameras)


def utc_now_iso() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ`` (the ``date`` field)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def camera_from_result(result, frame_id: str, K=None, dist=None, image_size=None) -> CameraCalibration:
    """A :class:`CameraCalibration` from a ``HandEyeResult`` (its frames, poses and residuals), plus optionally the
    intrinsics the samples were solved with (``K`` (3, 3) and ``dist`` (D,) in the OpenCV convention of
    ``HandEyeSample``, ``image_size`` (width, height)), so consumers of the file find them there."""
    xyz, quat = matrix_to_pose(result.T_parent_cam)
    dist = None if dist is None or np.size(dist) == 0 else np.asarray(dist, dtype=np.float64)
    board_xyz, board_quat = matrix_to_pose(result.T_parent_board)
    return CameraCalibration(
        method=result.method,
        parent_frame=result.cam_parent_frame,
        frame_id=frame_id,
        xyz_m=tuple(float(v) for v in xyz),
        quat_xyzw=tuple(float(v) for v in quat),
        board_on=result.board_parent_frame,
        board_xyz_m=tuple(float(v) for v in board_xyz),
        board_quat_xyzw=tuple(float(v) for v in board_quat),
        residuals=result.residuals_dict(),
        camera_matrix=K,
        distortion=dist,
        image_size=image_size,
    )


def load_calibration(path: str | Path) -> CalibrationFile:
    """Read and validate a calibration.yaml.

    :raises CalibrationError: missing file, not YAML, or a key missing / unknown / invalid (the message names it).
    """
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(f"calibration file {path} does not exist; create it with para-calib solve")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CalibrationError(f"calibration file {path} is not valid YAML: {exc}") from exc
    try:
        return CalibrationFile.from_dict(data, source=str(path))
    except CalibrationError as exc:
        raise CalibrationError(f"{path}: {exc}") from exc


def dump_calibration(cal: CalibrationFile) -> str:
    """The YAML text of a calibration (validated first: what it writes loads back identically)."""
    if not isinstance(cal, CalibrationFile):
        raise CalibrationError(f"cal is a {type(cal).__name__}; give a CalibrationFile")
    data = _plain(cal.to_dict())
    CalibrationFile.from_dict(data)  # the loader's checks, before anything is written
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)


def save_calibration(cal: CalibrationFile, path: str | Path, force: bool = False) -> Path:
    """Write ``cal`` to ``path`` (atomically: a temporary file in the same folder, then a rename).

    :raises CalibrationError: ``path`` exists and ``force`` is False (nothing written), or ``cal`` is invalid.
    """
    path = Path(path)
    if path.exists() and not force:
        raise CalibrationError(
            f"{path} already exists; pass --force (force=True) to overwrite it, or give another path"
        )
    if not path.parent.is_dir():
        raise CalibrationError(f"folder {path.parent} does not exist; create it or give another path")
    text = dump_calibration(cal)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, normal_file_mode())  # mkstemp makes it 0600; the file is to be shared and read like any other
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
