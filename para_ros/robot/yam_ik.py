"""Forward and inverse kinematics of the YAM on the model the i2rt SDK ships (its ``Kinematics``, built on mink).

The combined arm + gripper MJCF comes from ``i2rt.robots.utils.combine_arm_and_gripper_xml``, which writes a temp file
in /tmp; it is loaded once and deleted at once (its mesh paths are absolute, nothing else refers to it).
The MJCF has 8 joints: the 6 arm joints and the two gripper fingers (``joint7``, ``joint8``, coupled); the fingers do
not move the tool site, so IK holds them at 0 and the API here speaks of the 6 arm joints only.

IK is mink's differential IK (``Kinematics.ik``) with the model's joint ranges as a configuration limit, seeded with
the previous solution (a fraction of a millisecond per solve when seeded). Success is judged here, by FK of the
returned joints against the target, with the tolerances given at construction, not by the solver's own flag.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import rotation_angle_between

N_ARM_JOINTS = 6


@dataclass
class IkResult:
    """IK outcome: ``ok`` when FK of ``q_rad`` is within tolerance of the target; errors in m and rad."""

    ok: bool
    q_rad: np.ndarray
    position_error_m: float
    rotation_error_rad: float


def combined_yam_xml(arm_type: str = "yam", gripper_type: str = "linear_4310") -> str:
    """Path of a freshly written combined arm + gripper MJCF (the caller deletes it after loading)."""
    # i2rt: loaded on first use, not on import
    from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

    return combine_arm_and_gripper_xml(ArmType.from_string_name(arm_type), GripperType.from_string_name(gripper_type))


def load_sdk_kinematics(arm_type: str = "yam", gripper_type: str = "linear_4310", tool_site: str = "grasp_site"):
    """The I2RT SDK's ``Kinematics`` (mink) of the combined arm + gripper model; the temporary MJCF is removed."""
    from i2rt.robots.kinematics import Kinematics  # i2rt: loaded on first use, not on import

    xml = combined_yam_xml(arm_type, gripper_type)
    try:
        return Kinematics(xml, tool_site)
    finally:
        try:
            os.remove(xml)
        except OSError:
            pass


class YamKinematics:
    """FK and seeded IK of the YAM's tool site (6 arm joints). Not thread-safe: use from one thread.

    :param arm_type, gripper_type: i2rt model names (``config/yam.yaml``'s ``model`` section).
    :param tool_site: MJCF site the poses place.
    :param position_tol_m, rotation_tol_rad: IK success thresholds (checked by FK).
    :param max_iters: IK iteration cap per solve (bounds the time spent on unreachable targets).
    """

    def __init__(
        self,
        arm_type: str = "yam",
        gripper_type: str = "linear_4310",
        tool_site: str = "grasp_site",
        position_tol_m: float = 5e-4,
        rotation_tol_rad: float = 5e-3,
        max_iters: int = 40,
    ):
        import mink  # mink: loaded on first use, not on import

        for name, value in (("position_tol_m", position_tol_m), ("rotation_tol_rad", rotation_tol_rad)):
            if not value > 0:
                raise ValueError(f"YamKinematics.{name}={value!r}: must be > 0")
        if max_iters < 1:
            raise ValueError(f"YamKinematics.max_iters={max_iters!r}: must be >= 1")
        self._kin = load_sdk_kinematics(arm_type, gripper_type, tool_site)
        self.model = self._kin._configuration.model
        self.tool_site = tool_site
        self.nq = int(self.model.nq)
        self.joint_names = tuple(self.model.joint(i).name for i in range(N_ARM_JOINTS))
        self.joint_range_rad = np.array(self.model.jnt_range[:N_ARM_JOINTS], dtype=float)  # (6, 2)
        self.position_tol_m = position_tol_m
        self.rotation_tol_rad = rotation_tol_rad
        self.max_iters = max_iters
        self._limits = [mink.ConfigurationLimit(self.model)]

    def _full_q(self, q6: np.ndarray) -> np.ndarray:
        q = np.zeros(self.nq)
        q[:N_ARM_JOINTS] = q6
        return q

    def fk(self, q_rad: np.ndarray) -> np.ndarray:
        """(4, 4) pose of the tool site in the base frame for (6,) arm joints."""
        return self._kin.fk(self._full_q(np.asarray(q_rad, dtype=float)[:N_ARM_JOINTS]))

    def fk_position(self, q_rad: np.ndarray) -> np.ndarray:
        """(3,) tool-site position for (6,) arm joints."""
        return self.fk(q_rad)[:3, 3].copy()

    def ik(self, T_base_tool: np.ndarray, seed_q_rad: np.ndarray) -> IkResult:
        """Joints placing the tool site at ``T_base_tool`` (4, 4), starting from ``seed_q_rad`` (6,).

        The start is clipped into the joint ranges first (mink refuses configurations outside them). Whatever the
        solver returns is kept in ``q_rad`` (the closest it got); ``ok`` says whether that is within tolerance.
        """
        seed = np.clip(
            np.asarray(seed_q_rad, dtype=float)[:N_ARM_JOINTS], self.joint_range_rad[:, 0], self.joint_range_rad[:, 1]
        )
        try:
            _, q = self._kin.ik(
                T_base_tool,
                self.tool_site,
                init_q=self._full_q(seed),
                limits=self._limits,
                pos_threshold=self.position_tol_m * 0.5,
                ori_threshold=self.rotation_tol_rad * 0.5,
                max_iters=self.max_iters,
            )
        except Exception:  # solver failure (e.g. infeasible QP): report as unreachable from the start
            q = self._full_q(seed)
        q6 = np.array(q[:N_ARM_JOINTS], dtype=float)
        if not np.all(np.isfinite(q6)):
            q6 = seed
        T = self.fk(q6)
        pos_err = float(np.linalg.norm(T[:3, 3] - T_base_tool[:3, 3]))
        rot_err = rotation_angle_between(T[:3, :3], T_base_tool[:3, :3])
        ok = pos_err <= self.position_tol_m and rot_err <= self.rotation_tol_rad
        return IkResult(ok, q6, pos_err, rot_err)
