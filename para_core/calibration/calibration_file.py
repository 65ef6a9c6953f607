"""calibration.yaml (``para_calibration: 1``): the solved camera poses, validated on load, never overwritten
without ``force``. Skeleton: the public names; the implementation follows."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError

FORMAT_KEY = "para_calibration"
FORMAT_VERSION = 1
CAMERA_NAMES = ("scene_cam", "wrist_cam")


@dataclass(frozen=True)
class CameraCalibration:
    method: str
    parent_frame: str
    frame_id: str
    xyz_m: tuple[float, float, float]
    quat_xyzw: tuple[float, float, float, float]
    board_on: str
    board_xyz_m: tuple[float, float, float]
    board_quat_xyzw: tuple[float, float, float, float]
    residuals: dict | None = None

    def T_parent_child(self) -> np.ndarray:
        raise NotImplementedError

    def T_board(self) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class CalibrationFile:
    date: str
    board: CharucoBoardSpec
    cameras: dict = field(default_factory=dict)

    def camera(self, name: str) -> CameraCalibration:
        raise NotImplementedError


def camera_from_result(result, frame_id: str) -> CameraCalibration:
    raise NotImplementedError


def load_calibration(path) -> CalibrationFile:
    raise NotImplementedError


def save_calibration(cal: CalibrationFile, path, force: bool = False) -> Path:
    raise NotImplementedError
