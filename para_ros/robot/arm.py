"""An arm as the executor sees it: joint names and count, limits, the kinematic model, tool / base / camera frames and
the gripper's command range, in one validated :class:`ArmDescription` read from a YAML file (``config/yam.yaml`` for
the YAM).

Everything that depends on the arm takes a description instead of assuming the YAM: the executor core and its safety
filter (joint count and limits), the IK (:class:`para_ros.robot.arm_kinematics.ArmKinematics`: which MJCF, which
joints, which tool site), the calibration poses (joint range) and the simulator (joint names, wrist-camera mount).

The YAML file has three sections (units: radians, metres, seconds; gripper 0 closed .. 1 open):

* ``model``: ``joint_names`` (the arm joints in command order; their count is the arm's), ``tool_site`` (the MJCF
  site chunk poses place), ``world_frame`` (the body chunk poses are given in), and where the MJCF comes from:
  ``mjcf`` (a file, relative to the YAML file) or ``arm_type`` + ``gripper_type`` (a model the i2rt SDK ships);
* ``limits``: :class:`ArmLimits` (joint range, joint speed, tool speed, workspace box, gripper range and speed);
* ``wrist_camera``: :class:`WristCameraMount` (the optical frame on a body of the model).

Acceleration and jerk limits are those of the executor's optional smoother (``smoothing_max_*`` parameters of the
node), the same for every joint; the description holds only what differs between arms.

Checks in two steps: the dataclasses check themselves (sizes agree with ``joint_names``, ranges ordered, values
finite), and :meth:`ArmDescription.check_against_model` checks the description against the loaded model (every joint,
site and body named exists; the joint range lies inside the model's). The executor runs both before its first tick and
refuses to start on either failure; each error names the field, the bad value and what to give instead.

ROS-free and model-library-free (the model is read by :mod:`para_ros.robot.arm_kinematics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from para_core.model.rotations import make_matrix

WORKSPACE_TOL_M = 1e-6  # slack of the workspace box test (floating point only)
MODEL_RANGE_TOL_RAD = 1e-6  # the limits may equal the model's joint range up to rounding
PER_JOINT_LIMITS = ("joint_lower_rad", "joint_upper_rad", "max_joint_speed_rad_s")  # one value per joint each


def _vector(owner: str, name: str, value, size: int | None, unit: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if (size is not None and arr.shape != (size,)) or arr.size == 0 or not np.all(np.isfinite(arr)):
        need = f"{size} finite numbers" if size is not None else "finite numbers, one per joint"
        raise ValueError(f"{owner}.{name}={value!r}: need {need} ({unit})")
    return arr


@dataclass
class ArmLimits:
    """Safety limits of an arm (units: rad, m, s; gripper 0 closed .. 1 open). The joint count is that of
    ``joint_lower_rad``; every per-joint field must have as many values (a single speed applies to every joint).

    Args:
        joint_lower_rad, joint_upper_rad: (n,) joint position range (inside the model's joint range).
        max_joint_speed_rad_s: (n,) largest joint speed.
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
        owner = type(self).__name__
        self.joint_lower_rad = _vector(owner, "joint_lower_rad", self.joint_lower_rad, None, "rad")
        n = self.joint_lower_rad.size
        self.joint_upper_rad = _vector(owner, "joint_upper_rad", self.joint_upper_rad, n, "rad, one per joint")
        speed = np.asarray(self.max_joint_speed_rad_s, dtype=float).reshape(-1)
        if speed.size == 1:
            speed = np.full(n, float(speed[0]))
        self.max_joint_speed_rad_s = _vector(owner, "max_joint_speed_rad_s", speed, n, "rad/s, one per joint")
        self.workspace_min_m = _vector(owner, "workspace_min_m", self.workspace_min_m, 3, "m")
        self.workspace_max_m = _vector(owner, "workspace_max_m", self.workspace_max_m, 3, "m")
        if not np.all(self.joint_lower_rad < self.joint_upper_rad):
            raise ValueError(
                f"{owner} joint_lower_rad={self.joint_lower_rad.tolist()} must be < joint_upper_rad="
                f"{self.joint_upper_rad.tolist()} for every joint"
            )
        if not np.all(self.workspace_min_m < self.workspace_max_m):
            raise ValueError(
                f"{owner} workspace_min_m={self.workspace_min_m.tolist()} must be < workspace_max_m="
                f"{self.workspace_max_m.tolist()} on every axis"
            )
        if not np.all(self.max_joint_speed_rad_s > 0):
            raise ValueError(f"{owner}.max_joint_speed_rad_s={self.max_joint_speed_rad_s.tolist()}: must be > 0")
        for name in ("max_ee_speed_m_s", "max_gripper_speed_per_s"):
            value = float(getattr(self, name))
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{owner}.{name}={value!r}: must be a finite number > 0")
            setattr(self, name, value)
        if not (0.0 <= self.gripper_min < self.gripper_max <= 1.0):
            raise ValueError(
                f"{owner} gripper range [{self.gripper_min}, {self.gripper_max}]: need "
                f"0 <= gripper_min < gripper_max <= 1"
            )

    @property
    def n_joints(self) -> int:
        return int(self.joint_lower_rad.size)

    def in_workspace(self, p_m: np.ndarray, tol_m: float = WORKSPACE_TOL_M) -> bool:
        return bool(np.all(p_m >= self.workspace_min_m - tol_m) and np.all(p_m <= self.workspace_max_m + tol_m))

    def distance_outside_workspace_m(self, p_m: np.ndarray) -> float:
        """Euclidean distance from ``p_m`` to the workspace box (0 inside)."""
        below = np.maximum(self.workspace_min_m - p_m, 0.0)
        above = np.maximum(p_m - self.workspace_max_m, 0.0)
        return float(np.linalg.norm(below + above))


@dataclass
class ArmModel:
    """The kinematic model of an arm and the names in it (the ``model`` section).

    Args:
        joint_names: the arm joints of the MJCF in command order (the order of every joint vector; a JointState or
            JointTrajectory carries these names). Fingers and other joints of the model are not listed: IK holds
            them at 0.
        tool_site: MJCF site the chunk poses place (``ActionChunk.tool_frame_id``).
        world_frame: body of the model the chunk poses are given in (``ActionChunk.header.frame_id``); the arm's base
            at the model's origin.
        mjcf: path of the MJCF file (absolute, or relative to the description file); empty: the i2rt SDK's model
            ``arm_type`` + ``gripper_type``.
        arm_type, gripper_type: i2rt ``ArmType`` / ``GripperType`` names (used when ``mjcf`` is empty).
    """

    joint_names: tuple[str, ...]
    tool_site: str
    world_frame: str
    mjcf: str = ""
    arm_type: str = ""
    gripper_type: str = ""

    def __post_init__(self):
        owner = type(self).__name__
        names = self.joint_names
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names or ()):
            raise ValueError(f"{owner}.joint_names={names!r}: give a list of non-empty joint names of the model")
        self.joint_names = tuple(names)
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ValueError(f"{owner}.joint_names={self.joint_names!r}: give at least one joint, each name once")
        for name in ("tool_site", "world_frame"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{owner}.{name}={getattr(self, name)!r}: give the name of a frame of the model")
        self.mjcf = str(self.mjcf or "")
        if bool(self.mjcf) == bool(self.arm_type):
            raise ValueError(
                f"{owner} mjcf={self.mjcf!r}, arm_type={self.arm_type!r}: give exactly one source of the model, an "
                "MJCF file (mjcf) or an i2rt model (arm_type + gripper_type)"
            )
        if self.arm_type and not self.gripper_type:
            raise ValueError(f"{owner}.gripper_type={self.gripper_type!r}: give the i2rt GripperType with arm_type")

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)


@dataclass
class WristCameraMount:
    """Where the wrist camera's OpenCV optical frame sits on the arm (the ``wrist_camera`` section).

    Args:
        parent_frame: body of the arm model the mount is relative to (``gripper``: the YAM's joint6 flange).
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
class ArmDescription:
    """One arm: its model and names, its limits and its wrist camera (module docstring).

    Args:
        model: :class:`ArmModel` (joint names, tool site, world frame, MJCF).
        limits: :class:`ArmLimits` with one value per joint of ``model.joint_names`` (and the gripper range).
        wrist_camera: :class:`WristCameraMount` on a body of the model.
        name: what the arm is called in messages and diagnostics (the description file's stem when loaded).
    """

    model: ArmModel
    limits: ArmLimits
    wrist_camera: WristCameraMount = field(default_factory=WristCameraMount)
    name: str = "arm"

    def __post_init__(self):
        for name, kind in (("model", ArmModel), ("limits", ArmLimits), ("wrist_camera", WristCameraMount)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"ArmDescription.{name}={getattr(self, name)!r}: need a {kind.__name__}")
        n = self.model.n_joints
        if self.limits.n_joints != n:  # ArmLimits has checked its per-joint fields against joint_lower_rad
            raise ValueError(
                f"limits.joint_lower_rad has {self.limits.n_joints} values but model.joint_names has {n} joints "
                f"{list(self.model.joint_names)}: give one limit per joint, in the same order"
            )

    @property
    def n_joints(self) -> int:
        """How many arm joints (the length of every joint vector the executor handles)."""
        return self.model.n_joints

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.model.joint_names

    def check_against_model(
        self,
        joint_names: tuple[str, ...],
        joint_range_rad: np.ndarray,
        bodies: set[str] | tuple[str, ...],
        sites: set[str] | tuple[str, ...],
    ) -> None:
        """Check the description against its loaded model: every named joint, site and body exists and the joint
        limits lie inside the model's joint range (a limit outside it is one the IK can never honour).

        :param joint_names: the joints the kinematics drives, in its order (must equal ``model.joint_names``).
        :param joint_range_rad: (n, 2) the model's range of those joints (lower, upper).
        :param bodies, sites: every body and site name of the model.
        :raises ValueError: naming the field, the value and what the model has.
        """
        if tuple(joint_names) != self.model.joint_names:
            raise ValueError(
                f"{self.name}: model.joint_names={list(self.model.joint_names)} but the kinematics drives "
                f"{list(joint_names)}: list the model's arm joints in command order"
            )
        if self.model.tool_site not in sites:
            raise ValueError(
                f"{self.name}: model.tool_site={self.model.tool_site!r} is not a site of the model (its sites: "
                f"{sorted(sites)})"
            )
        for name, frame in (
            ("model.world_frame", self.model.world_frame),
            ("wrist_camera.parent_frame", self.wrist_camera.parent_frame),
        ):
            if frame not in bodies:
                raise ValueError(
                    f"{self.name}: {name}={frame!r} is not a body of the model (its bodies: {sorted(bodies)})"
                )
        rng = np.asarray(joint_range_rad, dtype=float).reshape(-1, 2)  # (n, 2)
        lim = self.limits
        for field_name, values, bad in (
            ("joint_lower_rad", lim.joint_lower_rad, lim.joint_lower_rad < rng[:, 0] - MODEL_RANGE_TOL_RAD),
            ("joint_upper_rad", lim.joint_upper_rad, lim.joint_upper_rad > rng[:, 1] + MODEL_RANGE_TOL_RAD),
        ):
            if np.any(bad):
                i = int(np.argmax(bad))
                raise ValueError(
                    f"{self.name}: limits.{field_name}[{i}]={values[i]:g} ({self.model.joint_names[i]}) is outside "
                    f"the model's joint range [{rng[i, 0]:g}, {rng[i, 1]:g}] rad: keep the limits inside it"
                )


def load_arm_description(path: str | Path) -> ArmDescription:
    """Read an arm description file (module docstring; ``config/yam.yaml`` is one).

    A relative ``model.mjcf`` is taken relative to the file's folder.

    :raises ValueError: naming the file and the bad or missing key.
    """
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    for section, what in (
        ("model", "joint names, tool site, world frame and the MJCF"),
        ("limits", "joint range and speeds, workspace box, gripper range"),
        ("wrist_camera", "the wrist camera mount"),
    ):
        if not isinstance(data.get(section), dict):
            raise ValueError(f"{path}: no '{section}' section ({what}; see config/yam.yaml for the format)")
    unknown = sorted(set(data) - {"name", "model", "limits", "wrist_camera"})
    if unknown:
        raise ValueError(f"{path}: unknown sections {unknown} (known: name, model, limits, wrist_camera)")
    try:
        model_data = dict(data["model"])
        if model_data.get("mjcf") and not Path(model_data["mjcf"]).is_absolute():
            model_data["mjcf"] = str((path.parent / model_data["mjcf"]).resolve())
        model = ArmModel(**model_data)
        for key in PER_JOINT_LIMITS:  # the count first, so the message names the joints it must match
            values = np.asarray(data["limits"].get(key, []), dtype=object).reshape(-1)
            if values.size != model.n_joints and not (key == "max_joint_speed_rad_s" and values.size == 1):
                raise ValueError(
                    f"limits.{key} has {values.size} values but model.joint_names has {model.n_joints} joints "
                    f"{list(model.joint_names)}: give one per joint, in the same order"
                )
        limits = ArmLimits(**data["limits"])
        mount = WristCameraMount(**data["wrist_camera"])
        return ArmDescription(model, limits, mount, name=str(data.get("name") or path.stem))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err} (see config/yam.yaml for the known keys)") from None
