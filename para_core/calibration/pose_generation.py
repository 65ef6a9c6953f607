"""Calibration flange poses diverse in rotation, for the capture command. Skeleton."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PoseGenerationConfig:
    n_poses: int = 15
    tilt_min_deg: float = 15.0
    tilt_max_deg: float = 30.0
    yaw_max_deg: float = 30.0


def eye_to_hand_flange_poses(T_base_cam, T_flange_board, T_base_flange_reference, workspace_min_m, workspace_max_m,
                             config: PoseGenerationConfig | None = None) -> np.ndarray:
    raise NotImplementedError


def eye_in_hand_flange_poses(T_base_board, T_flange_cam, T_base_flange_reference, workspace_min_m, workspace_max_m,
                             viewing_distance_m: float, config: PoseGenerationConfig | None = None) -> np.ndarray:
    raise NotImplementedError
