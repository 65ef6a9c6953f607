"""Overlay image: detected ChArUco corners vs the corners reprojected through the solved calibration. Skeleton."""
from __future__ import annotations

import numpy as np


def draw_overlay(image: np.ndarray, sample, result, spec) -> np.ndarray:
    raise NotImplementedError
