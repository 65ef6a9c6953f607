"""The arms the arm-generic executor tests run on: the YAM (``config/yam.yaml`` on the i2rt SDK's model) and a
5-joint arm (``test/fixtures/arm5``: its own MJCF and description), each with a bent-arm IK seed from which top-down
tabletop poses (x 0.25-0.35 m, |y| <= 0.1 m, z 0.05-0.15 m) are reached.

A test that takes the ``rig`` fixture (``conftest``-free: ``pytest.fixture(params=ARM_NAMES)`` in the test module)
runs once per arm, unchanged: joint vectors have the arm's length, limits and frames come from its description.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
ARM5_YAML = REPO / "test" / "fixtures" / "arm5" / "arm5.yaml"
ARM5_XML = ARM5_YAML.parent / "arm5.xml"
ARM_NAMES = ("yam", "arm5")
TOP_DOWN_R = np.array([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]).T  # columns: tool x, y, z in base
SEEDS = {"yam": [0.0, 1.6, 1.3, -1.2, 0.0, 0.0], "arm5": [0.0, -1.0, 1.3, 1.3, 0.0]}


@dataclass
class ArmRig:
    """One arm for the tests: its description, kinematics and a bent-arm seed (n,) rad."""

    name: str
    arm: object  # para_ros.robot.arm.ArmDescription
    kin: object  # para_ros.robot.arm_kinematics.ArmKinematics
    seed_q_rad: np.ndarray

    @property
    def n(self) -> int:
        return self.arm.n_joints

    def unit(self, joint: int) -> np.ndarray:
        """(n,) zeros with a 1 at ``joint``."""
        return np.eye(self.n)[joint]

    def top_down_q(self, p_m) -> np.ndarray:
        """Joints (n,) that put the tool at ``p_m`` pointing straight down (IK started at ``seed_q_rad``)."""
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = TOP_DOWN_R, p_m
        res = self.kin.ik(T, self.seed_q_rad)
        assert res.ok, f"{self.name}: top-down pose at {p_m} not reached ({res.position_error_m:.2g} m)"
        return res.q_rad


@functools.cache
def load_rig(name: str) -> ArmRig:
    from para_ros.robot.arm import load_arm_description
    from para_ros.robot.arm_kinematics import ArmKinematics
    from para_ros.robot.yam import load_yam_config
    from para_ros.robot.yam_ik import YamKinematics

    if name == "yam":
        return ArmRig(name, load_yam_config(), YamKinematics(), np.array(SEEDS[name]))
    if name == "arm5":
        arm = load_arm_description(ARM5_YAML)
        return ArmRig(name, arm, ArmKinematics(arm.model), np.array(SEEDS[name]))
    raise ValueError(f"no test arm {name!r}: known {ARM_NAMES}")


class MujocoFk:
    """Tool-site pose from MuJoCo's own forward kinematics (``mj_kinematics``), not from the code under test."""

    def __init__(self, name: str):
        import mujoco

        self._mujoco = mujoco
        raw = yaml.safe_load((REPO / "config" / "yam.yaml").read_text() if name == "yam" else ARM5_YAML.read_text())
        self.joint_names = raw["model"]["joint_names"]
        self.site = raw["model"]["tool_site"]
        if name == "yam":
            from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

            xml = combine_arm_and_gripper_xml(ArmType.YAM, GripperType.LINEAR_4310)
            try:
                self.model = mujoco.MjModel.from_xml_path(xml)
            finally:
                os.remove(xml)
        else:
            self.model = mujoco.MjModel.from_xml_path(str(ARM5_XML))
        self.data = mujoco.MjData(self.model)
        self.qadr = [self.model.jnt_qposadr[self.model.joint(n).id] for n in self.joint_names]

    def __call__(self, q) -> np.ndarray:
        self.data.qpos[:] = 0.0
        self.data.qpos[self.qadr] = q
        self._mujoco.mj_kinematics(self.model, self.data)
        T = np.eye(4)
        T[:3, :3] = self.data.site(self.site).xmat.reshape(3, 3)
        T[:3, 3] = self.data.site(self.site).xpos
        return T
