"""Hand-eye calibration: eye-to-hand (fixed camera, board on the flange) and eye-in-hand (camera on the flange,
board fixed in the scene). Skeleton: the public names; the solver follows."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.detection import CharucoDetection
from para_core.calibration.errors import CalibrationError

EYE_TO_HAND = "eye_to_hand"
EYE_IN_HAND = "eye_in_hand"


@dataclass(frozen=True)
class HandEyeSample:
    """One calibration sample: the flange pose ``T_base_flange`` (4, 4) from the arm's kinematics, the ChArUco
    detection in the camera image (None when the board was not found), the intrinsics ``K`` (3, 3), distortion
    ``dist`` (D,) or None, and ``image_size`` (width, height) in pixels."""

    T_base_flange: np.ndarray
    detection: CharucoDetection | None
    K: np.ndarray
    dist: np.ndarray | None = None
    image_size: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class HandEyeConfig:
    min_samples: int = 6
    min_axis_spread_deg: float = 10.0
    min_rotation_deg: float = 5.0


@dataclass(frozen=True)
class RotationCoverage:
    max_relative_rotation_deg: float
    axis_spread_deg: float
    axis_eigenvalues: tuple[float, float, float]
    pairs_used: int


@dataclass(frozen=True)
class HandEyeResult:
    method: str
    T_parent_cam: np.ndarray
    T_parent_board: np.ndarray
    cam_parent_frame: str
    board_parent_frame: str
    sample_indices: list[int]
    samples_skipped: int
    per_sample_rms_px: list[float]
    reprojection_rms_px: float
    reprojection_max_px: float
    per_sample_rotation_deg: list[float]
    per_sample_translation_mm: list[float]
    handeye_rotation_deg: float
    handeye_translation_mm: float
    coverage: RotationCoverage
    initial_method: str
    initial_reprojection_rms_px: float
    T_parent_cam_initial: np.ndarray = field(repr=False, default=None)
    T_parent_board_initial: np.ndarray = field(repr=False, default=None)

    def predict_T_cam_board(self, T_base_flange: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def residuals_dict(self) -> dict:
        raise NotImplementedError


def rotation_coverage(T_base_flange_list, config: HandEyeConfig | None = None) -> RotationCoverage:
    raise NotImplementedError


def solve_eye_to_hand(samples: list[HandEyeSample], spec: CharucoBoardSpec,
                      config: HandEyeConfig | None = None) -> HandEyeResult:
    raise NotImplementedError


def solve_eye_in_hand(samples: list[HandEyeSample], spec: CharucoBoardSpec,
                      config: HandEyeConfig | None = None) -> HandEyeResult:
    raise NotImplementedError
