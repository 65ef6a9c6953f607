"""Forward and inverse kinematics of the YAM on the model the i2rt SDK ships: :class:`ArmKinematics` of the YAM's
model (``config/yam.yaml``'s ``model`` section: arm ``yam``, gripper ``linear_4310``, joints ``joint1`` ..
``joint6``, tool site ``grasp_site``).

The combined MJCF has 8 joints: the 6 arm joints and the two gripper fingers (``joint7``, ``joint8``, coupled); the
fingers do not move the tool site, so IK holds them at 0 and the API speaks of the 6 arm joints only.
"""

from __future__ import annotations

from para_ros.robot.arm import ArmModel
from para_ros.robot.arm_kinematics import ArmKinematics, IkResult, combined_i2rt_xml, load_model_kinematics

__all__ = ["IkResult", "YamKinematics", "combined_yam_xml", "load_sdk_kinematics", "YAM_JOINT_NAMES"]

YAM_JOINT_NAMES = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")


def combined_yam_xml(arm_type: str = "yam", gripper_type: str = "linear_4310") -> str:
    """Path of a freshly written combined arm + gripper MJCF (the caller deletes it after loading)."""
    return combined_i2rt_xml(arm_type, gripper_type)


def yam_model(arm_type: str = "yam", gripper_type: str = "linear_4310", tool_site: str = "grasp_site") -> ArmModel:
    """The YAM's :class:`ArmModel` for an i2rt arm / gripper pair."""
    return ArmModel(YAM_JOINT_NAMES, tool_site, "base", arm_type=arm_type, gripper_type=gripper_type)


def load_sdk_kinematics(arm_type: str = "yam", gripper_type: str = "linear_4310", tool_site: str = "grasp_site"):
    """The I2RT SDK's ``Kinematics`` (mink) of the combined arm + gripper model; the temporary MJCF is removed."""
    return load_model_kinematics(yam_model(arm_type, gripper_type, tool_site))


class YamKinematics(ArmKinematics):
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
        super().__init__(yam_model(arm_type, gripper_type, tool_site), position_tol_m, rotation_tol_rad, max_iters)
