"""The YAM's TF frames from its 6 arm joints, by forward kinematics on the I2RT SDK's model (its ``Kinematics``).

When the executor owns the arm (``i2rt_sdk`` backend: the SDK holds the CAN bus), no robot driver can publish the
arm's TF, so the executor does, from the joints it reads. The frames are those of ``docs/contracts.md`` (and of the
simulator): the chain ``base`` -> ``link1`` .. ``link5`` -> ``gripper``, then ``gripper`` -> the tool site
(``grasp_site``) and ``gripper`` -> the wrist camera's optical frame at the mount of ``config/yam.yaml``
(``wrist_camera``). So ``base <- grasp_site`` and ``base <- wrist_cam_optical_frame`` resolve exactly as on the
simulated rig.

ROS-free; not thread-safe (one SDK ``Kinematics`` instance per :class:`YamFrames`; use it from one thread).
"""

from __future__ import annotations

import numpy as np

from para_ros.robot.yam import WristCameraMount
from para_ros.robot.yam_ik import YAM_JOINT_NAMES, load_sdk_kinematics

N_ARM_JOINTS = len(YAM_JOINT_NAMES)
ARM_LINK_CHAIN = ("base", "link1", "link2", "link3", "link4", "link5", "gripper")


class YamFrames:
    """(parent, child, T_parent_child) of every published YAM frame for given arm joints.

    :param mount: the wrist camera mount (its ``parent_frame`` must be a body of the chain).
    :param arm_type, gripper_type: i2rt model names (``config/yam.yaml``'s ``model`` section).
    :param tool_site: MJCF site published as the tool frame (``grasp_site``).
    """

    def __init__(
        self,
        mount: WristCameraMount,
        arm_type: str = "yam",
        gripper_type: str = "linear_4310",
        tool_site: str = "grasp_site",
    ):

        self._kin = load_sdk_kinematics(arm_type, gripper_type, tool_site)
        self._config = self._kin._configuration  # the SDK Kinematics' mink configuration (bodies' FK)
        model = self._config.model
        bodies = {model.body(i).name for i in range(model.nbody)}
        missing = [b for b in ARM_LINK_CHAIN if b not in bodies]
        if missing:
            raise ValueError(
                f"YamFrames: the {arm_type}/{gripper_type} model has no bodies {missing}; the frames "
                f"published are {ARM_LINK_CHAIN}"
            )
        if mount.parent_frame not in ARM_LINK_CHAIN:
            raise ValueError(
                f"wrist_camera.parent_frame={mount.parent_frame!r} is not a frame of the arm chain "
                f"{ARM_LINK_CHAIN}: give the body the camera is mounted on (gripper for the D405)"
            )
        self.tool_site = tool_site
        self.mount = mount
        self._T_parent_camera = mount.T_parent_camera()
        self.nq = int(model.nq)

    def transforms(self, q_rad: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """The frames for (6,) arm joints: the chain, ``gripper`` -> tool site, mount parent -> camera frame."""
        q = np.zeros(self.nq)
        q[:N_ARM_JOINTS] = np.asarray(q_rad, dtype=float)[:N_ARM_JOINTS]  # fingers at 0: they move no frame here
        T_world_tool = self._kin.fk(q, self.tool_site)  # updates the configuration to q
        T_world = {b: self._config.get_transform_frame_to_world(b, "body").as_matrix() for b in ARM_LINK_CHAIN}
        out = []
        for parent, child in zip(ARM_LINK_CHAIN[:-1], ARM_LINK_CHAIN[1:]):
            out.append((parent, child, np.linalg.inv(T_world[parent]) @ T_world[child]))
        out.append(("gripper", self.tool_site, np.linalg.inv(T_world["gripper"]) @ T_world_tool))
        out.append((self.mount.parent_frame, self.mount.frame_id, self._T_parent_camera.copy()))
        return out
