"""Synthetic observations for tests, demos and benchmarks: a YAM-like scene camera and a wrist camera over a table.

Nothing here is used by the model; it only makes plausible inputs (cameras that see the workspace box, a smooth
end-effector trajectory inside it) without a simulator.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .config import V4Config
from .geometry import look_at


def intrinsics_from_fovy(width: int, height: int, fovy_deg: float) -> np.ndarray:
    """Square-pixel pinhole intrinsics with the principal point at the image centre (MuJoCo camera model)."""
    f = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def scene_camera_pose(eye=(0.3, -0.55, 0.9), target=(0.3, 0.0, 0.05)) -> np.ndarray:
    """An oblique overhead scene camera, T_world_cam (4, 4) float64."""
    return look_at(torch.tensor(eye), torch.tensor(target)).numpy()


def wrist_camera_pose(ee_pos=(0.3, 0.0, 0.2), height_above_ee=0.05, tilt_m=0.05) -> np.ndarray:
    """A wrist-like camera a little above the EE, looking down and slightly forward."""
    eye = np.asarray(ee_pos, dtype=np.float64) + np.array([-tilt_m, 0.0, height_above_ee])
    target = np.asarray(ee_pos, dtype=np.float64) + np.array([0.1, 0.0, -0.2])
    return look_at(torch.tensor(eye), torch.tensor(target), up=torch.tensor([1.0, 0.0, 0.0])).numpy()


def top_down_rotation() -> np.ndarray:
    """The YAM's reachable top-down tool orientation: x=[-1,0,0], y=[0,1,0], z=[0,0,-1]."""
    return np.diag([-1.0, 1.0, -1.0])


def random_trajectory(config: V4Config, rng: np.random.Generator, n_steps: int | None = None):
    """A smooth EE trajectory inside the workspace box: positions (T, 3), rotations (T, 3, 3), gripper (T,)."""
    from scipy.spatial.transform import Rotation

    T = n_steps or config.n_window
    x0, x1 = config.workspace_x_m
    y0, y1 = config.workspace_y_m
    start = np.array([rng.uniform(0.2, 0.4), rng.uniform(-0.15, 0.15), rng.uniform(0.05, 0.15)])
    end = start + rng.uniform(-0.1, 0.1, size=3) * np.array([1.0, 1.0, 0.3])
    s = np.linspace(0.0, 1.0, T)[:, None]
    pos = start + s * (end - start)
    pos[:, 0] = np.clip(pos[:, 0], x0 + 0.05, x1 - 0.05)
    pos[:, 1] = np.clip(pos[:, 1], y0 + 0.05, y1 - 0.05)
    pos[:, 2] = np.clip(pos[:, 2], config.z_lo_m + 0.02, config.z_hi_m - 0.05)
    yaw = rng.uniform(-0.5, 0.5) * s[:, 0]
    rots = np.stack([top_down_rotation() @ Rotation.from_euler("z", a).as_matrix() for a in yaw])
    grip = (s[:, 0] < 0.5).astype(np.float64)
    return pos, rots, grip


def random_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """(H, W, 3) uint8 smooth random colours."""
    small = rng.integers(0, 256, size=(max(2, height // 16), max(2, width // 16), 3), dtype=np.uint8)
    import cv2

    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
