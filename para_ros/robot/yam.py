"""The YAM arm's description: its kinematic model files, safety limits and wrist-camera mount (``config/yam.yaml``).

The executor's safety filter (``para_ros.execution.safety``) enforces these limits; the IK (``yam_ik``) and
frames (``yam_frames``) sit beside this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from para_core.model.rotations import make_matrix
from para_ros.paths import config_file

N_ARM_JOINTS = 6
WORKSPACE_TOL_M = 1e-6  # slack of the workspace box test (floating point only)


@dataclass
class YamLimits:
    """Safety limits of the YAM (units: rad, m, s; gripper 0 closed .. 1 open).

    Args:
        joint_lower_rad, joint_upper_rad: (6,) joint position range.
        max_joint_speed_rad_s: (6,) largest joint speed.
        max_ee_speed_m_s: largest tool-site speed (FK of the commanded joints).
        workspace_min_m, workspace_max_m: (3,) tool-site workspace box in the world frame.
        gripper_min, gripper_max: gripper command range.
        max_gripper_speed_per_s: largest gripper change per second.
    """

    joint_lower_rad: np.ndarray
    joint_upper_rad: np.ndarray
    max_joint_speed_rad_s: np.ndarray
    max_ee_speed_m_s: float
    workspace_min_m: np.ndarray
    workspace_max_m: np.ndarray
    gripper_min: float = 0.0
    gripper_max: float = 1.0
    max_gripper_speed_per_s: float = 2.0

    def __post_init__(self):
        for name, size in (
            ("joint_lower_rad", 6),
            ("joint_upper_rad", 6),
            ("max_joint_speed_rad_s", 6),
            ("workspace_min_m", 3),
            ("workspace_max_m", 3),
        ):
            arr = np.asarray(getattr(self, name), dtype=float).reshape(-1)
            if arr.size == 1 and size > 1 and name.startswith("max_"):
                arr = np.full(size, float(arr[0]))
            if arr.shape != (size,) or not np.all(np.isfinite(arr)):
                raise ValueError(f"YamLimits.{name}={getattr(self, name)!r}: need {size} finite numbers")
            setattr(self, name, arr)
        if not np.all(self.joint_lower_rad < self.joint_upper_rad):
            raise ValueError(
                f"YamLimits joint_lower_rad={self.joint_lower_rad.tolist()} must be < joint_upper_rad="
                f"{self.joint_upper_rad.tolist()} for every joint"
            )
        if not np.all(self.workspace_min_m < self.workspace_max_m):
            raise ValueError(
                f"YamLimits workspace_min_m={self.workspace_min_m.tolist()} must be < workspace_max_m="
                f"{self.workspace_max_m.tolist()} on every axis"
            )
        if not np.all(self.max_joint_speed_rad_s > 0):
            raise ValueError(f"YamLimits.max_joint_speed_rad_s={self.max_joint_speed_rad_s.tolist()}: must be > 0")
        for name in ("max_ee_speed_m_s", "max_gripper_speed_per_s"):
            value = float(getattr(self, name))
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"YamLimits.{name}={value!r}: must be a finite number > 0")
            setattr(self, name, value)
        if not (0.0 <= self.gripper_min < self.gripper_max <= 1.0):
            raise ValueError(
                f"YamLimits gripper range [{self.gripper_min}, {self.gripper_max}]: need "
                f"0 <= gripper_min < gripper_max <= 1"
            )

    def in_workspace(self, p_m: np.ndarray, tol_m: float = WORKSPACE_TOL_M) -> bool:
        return bool(np.all(p_m >= self.workspace_min_m - tol_m) and np.all(p_m <= self.workspace_max_m + tol_m))

    def distance_outside_workspace_m(self, p_m: np.ndarray) -> float:
        """Euclidean distance from ``p_m`` to the workspace box (0 inside)."""
        below = np.maximum(self.workspace_min_m - p_m, 0.0)
        above = np.maximum(p_m - self.workspace_max_m, 0.0)
        return float(np.linalg.norm(below + above))


@dataclass
class YamModelConfig:
    """Which YAM model the executor runs IK on (see ``config/yam.yaml``'s ``model`` section)."""

    arm_type: str = "yam"
    gripper_type: str = "linear_4310"
    tool_site: str = "grasp_site"
    world_frame: str = "base"
    joint_names: tuple[str, ...] = field(default_factory=lambda: tuple(f"joint{i}" for i in range(1, 7)))

    def __post_init__(self):
        self.joint_names = tuple(self.joint_names)
        if len(self.joint_names) != N_ARM_JOINTS:
            raise ValueError(f"YamModelConfig.joint_names={self.joint_names!r}: need exactly {N_ARM_JOINTS} names")


@dataclass
class WristCameraMount:
    """Where the wrist camera's OpenCV optical frame sits on the arm (``config/yam.yaml``'s ``wrist_camera``).

    Args:
        parent_frame: body of the arm model the mount is relative to (``gripper``: the joint6 flange).
        frame_id: TF frame of the optical frame (must equal the camera's ``CameraInfo.header.frame_id``).
        xyz_m: (3,) position of the optical frame in ``parent_frame``, metres.
        quat_xyzw: (4,) its orientation in ``parent_frame``, (x, y, z, w); normalised here.
    """

    parent_frame: str = "gripper"
    frame_id: str = "wrist_cam_optical_frame"
    xyz_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    quat_xyzw: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))

    def __post_init__(self):
        for name in ("parent_frame", "frame_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"WristCameraMount.{name}={getattr(self, name)!r}: give a non-empty frame name")
        xyz = np.asarray(self.xyz_m, dtype=float).reshape(-1)
        if xyz.shape != (3,) or not np.all(np.isfinite(xyz)):
            raise ValueError(f"WristCameraMount.xyz_m={self.xyz_m!r}: need 3 finite numbers (metres)")
        q = np.asarray(self.quat_xyzw, dtype=float).reshape(-1)
        norm = float(np.linalg.norm(q)) if q.shape == (4,) and np.all(np.isfinite(q)) else 0.0
        if not 0.9 < norm < 1.1:
            raise ValueError(f"WristCameraMount.quat_xyzw={self.quat_xyzw!r}: need a unit quaternion (x, y, z, w)")
        self.xyz_m, self.quat_xyzw = xyz, q / norm

    def T_parent_camera(self) -> np.ndarray:
        """(4, 4) pose of the optical frame in ``parent_frame``."""
        return make_matrix(self.xyz_m, self.quat_xyzw)


@dataclass
class YamConfig:
    model: YamModelConfig
    limits: YamLimits
    wrist_camera: WristCameraMount = field(default_factory=WristCameraMount)


def load_yam_config(path: str | Path | None = None) -> YamConfig:
    """Read ``config/yam.yaml`` (or ``path``): the model, limits and wrist_camera sections.

    :raises ValueError: naming the file and the bad or missing key.
    """
    if path is None or str(path) == "":
        path = config_file("yam.yaml")
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    if "limits" not in data:
        raise ValueError(f"{path}: no 'limits' section (see config/yam.yaml for the format)")
    if "wrist_camera" not in data:
        raise ValueError(f"{path}: no 'wrist_camera' section (the D405 mount; see config/yam.yaml for the format)")
    try:
        model = YamModelConfig(**(data.get("model") or {}))
        limits = YamLimits(**data["limits"])
        mount = WristCameraMount(**data["wrist_camera"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err} (see config/yam.yaml for the known keys)") from None
    return YamConfig(model, limits, mount)
