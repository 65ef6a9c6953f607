"""Forward and inverse kinematics of an arm's tool site on its MJCF model (:class:`para_ros.robot.arm.ArmModel`).

The model is an MJCF file or, for the i2rt arms, the combined arm + gripper MJCF that
``i2rt.robots.utils.combine_arm_and_gripper_xml`` writes to a temp file in /tmp (loaded once and deleted at once: its
mesh paths are absolute, nothing else refers to it). Either is loaded into the I2RT SDK's ``Kinematics`` (built on
mink), which works on any MJCF.

The API speaks of the arm joints only (``model.joint_names``, in that order, wherever they sit in the model's
``qpos``); every other joint of the model (the YAM's two finger slides) is held at 0: they do not move the tool site.

IK is mink's differential IK (``Kinematics.ik``) with the model's joint ranges as a configuration limit, seeded with
the previous solution (a fraction of a millisecond per solve when seeded). Success is judged here, by FK of the
returned joints against the target, with the tolerances given at construction, not by the solver's own flag.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import rotation_angle_between
from para_ros.robot.arm import ArmModel

HINGE, SLIDE = 3, 2  # mujoco.mjtJoint values of the one-degree-of-freedom joints an arm joint may be


@dataclass
class IkResult:
    """IK outcome: ``ok`` when FK of ``q_rad`` is within tolerance of the target; errors in m and rad."""

    ok: bool
    q_rad: np.ndarray
    position_error_m: float
    rotation_error_rad: float


def combined_i2rt_xml(arm_type: str, gripper_type: str) -> str:
    """Path of a freshly written combined i2rt arm + gripper MJCF (the caller deletes it after loading)."""
    # i2rt: loaded on first use, not on import
    from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

    return combine_arm_and_gripper_xml(ArmType.from_string_name(arm_type), GripperType.from_string_name(gripper_type))


def load_model_kinematics(model: ArmModel):
    """The I2RT SDK's ``Kinematics`` (mink) of ``model``'s MJCF; a temporary i2rt MJCF is removed after loading."""
    from i2rt.robots.kinematics import Kinematics  # i2rt: loaded on first use, not on import

    if model.mjcf:
        if not os.path.isfile(model.mjcf):
            raise ValueError(f"model.mjcf={model.mjcf!r}: no such file (give the arm's MJCF model)")
        return Kinematics(model.mjcf, model.tool_site)
    xml = combined_i2rt_xml(model.arm_type, model.gripper_type)
    try:
        return Kinematics(xml, model.tool_site)
    finally:
        try:
            os.remove(xml)
        except OSError:
            pass


class ArmKinematics:
    """FK and seeded IK of an arm's tool site over its arm joints. Not thread-safe: use from one thread.

    :param model: the arm's model and names (:class:`ArmModel`).
    :param position_tol_m, rotation_tol_rad: IK success thresholds (checked by FK).
    :param max_iters: IK iteration cap per solve (bounds the time spent on unreachable targets).
    :raises ValueError: naming the joint or site of ``model`` the MJCF does not have, or a joint that is not one
        hinge or slide.

    Attributes for the description's checks: ``joint_names``, ``joint_range_rad`` (n, 2), ``bodies``, ``sites``.
    """

    def __init__(
        self,
        model: ArmModel,
        position_tol_m: float = 5e-4,
        rotation_tol_rad: float = 5e-3,
        max_iters: int = 40,
    ):
        import mink  # mink: loaded on first use, not on import

        for name, value in (("position_tol_m", position_tol_m), ("rotation_tol_rad", rotation_tol_rad)):
            if not value > 0:
                raise ValueError(f"{type(self).__name__}.{name}={value!r}: must be > 0")
        if max_iters < 1:
            raise ValueError(f"{type(self).__name__}.max_iters={max_iters!r}: must be >= 1")
        self._kin = load_model_kinematics(model)
        self.model = self._kin._configuration.model
        m = self.model
        self.bodies = {m.body(i).name for i in range(m.nbody)}
        self.sites = {m.site(i).name for i in range(m.nsite)}
        joints = {m.joint(i).name: i for i in range(m.njnt)}
        missing = [n for n in model.joint_names if n not in joints]
        if missing:
            raise ValueError(f"model.joint_names: {missing} are not joints of the model (its joints: {list(joints)})")
        ids = [joints[n] for n in model.joint_names]
        not_1dof = [n for n, i in zip(model.joint_names, ids) if int(m.jnt_type[i]) not in (HINGE, SLIDE)]
        if not_1dof:
            raise ValueError(f"model.joint_names: {not_1dof} are not hinge or slide joints (an arm joint has 1 DoF)")
        if model.tool_site not in self.sites:
            raise ValueError(
                f"model.tool_site={model.tool_site!r} is not a site of the model (its sites: {sorted(self.sites)})"
            )
        self.tool_site = model.tool_site
        self.nq = int(m.nq)
        self.n_joints = len(ids)
        self.joint_names = tuple(model.joint_names)
        self._qadr = np.array([m.jnt_qposadr[i] for i in ids], dtype=int)  # (n,) where each arm joint sits in qpos
        # (n, 2) the model's range of each arm joint; an unlimited joint (a continuous wrist) spans (-inf, inf)
        self.joint_range_rad = np.array(
            [m.jnt_range[i] if m.jnt_limited[i] else (-np.inf, np.inf) for i in ids], dtype=float
        )
        self.position_tol_m = position_tol_m
        self.rotation_tol_rad = rotation_tol_rad
        self.max_iters = max_iters
        self._limits = [mink.ConfigurationLimit(m)]

    def _full_q(self, q_arm: np.ndarray) -> np.ndarray:
        q = np.zeros(self.nq)
        q[self._qadr] = q_arm
        return q

    def _arm_q(self, q_rad: np.ndarray) -> np.ndarray:
        q = np.asarray(q_rad, dtype=float).reshape(-1)
        if q.size < self.n_joints:
            raise ValueError(f"joints {q.tolist()}: need {self.n_joints} values ({list(self.joint_names)})")
        return q[: self.n_joints]

    def fk(self, q_rad: np.ndarray) -> np.ndarray:
        """(4, 4) pose of the tool site in the base frame for (n,) arm joints."""
        return self._kin.fk(self._full_q(self._arm_q(q_rad)))

    def fk_position(self, q_rad: np.ndarray) -> np.ndarray:
        """(3,) tool-site position for (n,) arm joints."""
        return self.fk(q_rad)[:3, 3].copy()

    def ik(self, T_base_tool: np.ndarray, seed_q_rad: np.ndarray) -> IkResult:
        """Joints placing the tool site at ``T_base_tool`` (4, 4), starting from ``seed_q_rad`` (n,).

        The start is clipped into the joint ranges first (mink refuses configurations outside them). Whatever the
        solver returns is kept in ``q_rad`` (the closest it got); ``ok`` says whether that is within tolerance.
        """
        seed = np.clip(self._arm_q(seed_q_rad), self.joint_range_rad[:, 0], self.joint_range_rad[:, 1])  # (n,)
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
        q_arm = np.array(np.asarray(q)[self._qadr], dtype=float)  # (n,)
        if not np.all(np.isfinite(q_arm)):
            q_arm = seed
        T = self.fk(q_arm)
        pos_err = float(np.linalg.norm(T[:3, 3] - T_base_tool[:3, 3]))
        rot_err = rotation_angle_between(T[:3, :3], T_base_tool[:3, :3])
        ok = pos_err <= self.position_tol_m and rot_err <= self.rotation_tol_rad
        return IkResult(ok, q_arm, pos_err, rot_err)
