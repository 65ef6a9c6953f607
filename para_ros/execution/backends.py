"""Where commands go: one small interface, three backends.

* :class:`I2rtSdkBackend` (here, ROS-free): the I2RT SDK, ``get_yam_robot(channel=...)`` on CAN, or its MuJoCo
  ``SimRobot`` with ``sim=True`` (which teleports to each command). Reads the joints from the SDK.
* ``JointTrajectoryBackend`` and ``PoseBackend`` (``para_ros.ros_io.topic_backends``, they need rclpy):
  ``trajectory_msgs/JointTrajectory`` for ros2_control / the simulated arm, and ``geometry_msgs/PoseStamped`` tool
  targets for a Cartesian controller. Both read the joints from ``/joint_states``.

Joint vectors at this interface are the 6 arm joints in radians (SDK order joint1..joint6) plus the gripper as a
separate 0 (closed) .. 1 (open) value; a backend that cannot measure the gripper reports it as NaN (unknown), and a
command whose gripper is NaN carries no gripper command (see :class:`ExecutorCore`).
"""

from __future__ import annotations

import abc
import os

import numpy as np

from para_ros.execution.executor_core import JointCommand


class CommandBackend(abc.ABC):
    """A sink for :class:`JointCommand` and a source of the arm's measured joints."""

    name: str = "backend"

    @abc.abstractmethod
    def read_joints(self) -> tuple[np.ndarray, float] | None:
        """Latest measured (n,) arm joints (rad, the arm description's order) and gripper (0..1, NaN if not measured), or None while unknown."""

    @abc.abstractmethod
    def send(self, command: JointCommand) -> None:
        """Send one command (already checked against the limits)."""

    def close(self) -> None:  # noqa: B027 (optional: a backend with nothing to release keeps this no-op)
        """Release the hardware or the publishers."""

    def describe(self) -> str:
        """Where the commands go, in words (for the node's start-up log)."""
        return self.name


class I2rtSdkBackend(CommandBackend):
    """The I2RT SDK: ``get_yam_robot(channel=..., sim=...)``; commands of the arm joints + the gripper (0..1) last
    (the YAM: 7 = 6 joints + gripper).

    :param channel: CAN interface of the real arm (e.g. ``can0``); ignored with ``sim=True``.
    :param sim: use the SDK's MuJoCo ``SimRobot`` (no hardware; commands teleport the joints).
    :param zero_gravity_mode: passed to ``get_yam_robot``; False (default) makes the real arm hold its current pose
        with the PD gains from the start, which is what a position-commanding executor wants.
    :param robot: an already constructed SDK robot (tests); the other arguments are then ignored.
    :param n_arm_joints: the arm description's joint count; the robot must have one more DoF (its gripper).

    ``get_yam_robot`` writes the combined MJCF to /tmp; this backend deletes that file (the robot's ``xml_path``)
    once the robot is built.
    """

    name = "i2rt_sdk"

    def __init__(
        self,
        channel: str = "can0",
        sim: bool = False,
        zero_gravity_mode: bool = False,
        robot=None,
        arm_type: str = "yam",
        gripper_type: str = "linear_4310",
        n_arm_joints: int = 6,
    ):
        if robot is None:
            from i2rt.robots.get_robot import get_yam_robot  # i2rt: loaded on first use, not on import
            from i2rt.robots.utils import ArmType, GripperType

            robot = get_yam_robot(
                channel=channel,
                arm_type=ArmType.from_string_name(arm_type),
                gripper_type=GripperType.from_string_name(gripper_type),
                zero_gravity_mode=zero_gravity_mode,
                sim=sim,
            )
            xml_path = getattr(robot, "xml_path", None)
            if xml_path and os.path.basename(xml_path).startswith("i2rt_") and xml_path.startswith("/tmp"):
                try:
                    os.remove(xml_path)
                except OSError:
                    pass
        self.robot = robot
        n = int(robot.num_dofs())
        self.n_arm_joints = int(n_arm_joints)
        if n != self.n_arm_joints + 1:
            raise ValueError(
                f"I2rtSdkBackend: robot has {n} DoF, expected {self.n_arm_joints + 1} ({self.n_arm_joints} joints of "
                "the arm description + gripper); use an arm with a gripper (the YAM: gripper_type linear_4310)"
            )

    def read_joints(self) -> tuple[np.ndarray, float] | None:
        n = self.n_arm_joints
        q = np.asarray(self.robot.get_joint_pos(), dtype=float)  # (n + 1,)
        if q.shape != (n + 1,) or not np.all(np.isfinite(q)):
            return None
        return q[:n].copy(), float(q[n])

    def send(self, command: JointCommand) -> None:
        gripper = command.gripper
        if not np.isfinite(gripper):  # never the case here (the SDK measures it), kept safe anyway
            gripper = float(self.robot.get_joint_pos()[self.n_arm_joints])
        self.robot.command_joint_pos(np.append(command.q_rad, gripper))  # (n + 1,)

    def describe(self) -> str:
        return f"I2RT SDK robot {type(self.robot).__name__}"

    def close(self) -> None:
        close = getattr(self.robot, "close", None)
        if close is not None:
            close()


class RecordingBackend(CommandBackend):
    """Keeps every command in memory and echoes it back as the measured state (a perfect arm; benches, tests)."""

    name = "recording"

    def __init__(self, q0_rad: np.ndarray, gripper0: float = 0.5):
        self._q = np.asarray(q0_rad, dtype=float).copy()
        self._g = float(gripper0)
        self.commands: list[JointCommand] = []

    def read_joints(self) -> tuple[np.ndarray, float] | None:
        return self._q.copy(), self._g

    def send(self, command: JointCommand) -> None:
        self.commands.append(command)
        self._q, self._g = command.q_rad.copy(), command.gripper
