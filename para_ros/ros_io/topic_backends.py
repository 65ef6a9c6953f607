"""The two ROS-topic backends of the chunk executor; both read the arm's joints from ``sensor_msgs/JointState``.

* :class:`JointTrajectoryBackend`: one ``trajectory_msgs/JointTrajectory`` per tick with a single point:
  ``header.stamp`` = 0 (the ROS convention for "start on receipt"), ``points[0].time_from_start`` = the command
  lookahead (the point is the chunk pose due at tick + lookahead), positions of the 6 arm joints (rad, names
  ``joint_names``). Where the gripper (0 closed .. 1 open) goes:

  - ``gripper_joint_name`` set (the project's simulated YAM, which publishes and follows ``gripper``): inside the
    trajectory under that name, and read back from ``JointState`` under it;
  - ``gripper_joint_name`` empty (a ros2_control ``joint_trajectory_controller``, which rejects the WHOLE trajectory
    when it names a joint the controller does not own: "Incoming joint gripper doesn't match the controller's
    joints"): the trajectory carries the arm joints only, and the gripper goes out as ``std_msgs/Float64``
    (0 closed .. 1 open, every tick) on ``gripper_command_topic`` (empty = not sent). A gripper controller speaks
    its own units (a ``GripperActionController`` wants metres and an action), so a Float64 in the policy's 0..1
    convention is the one interface that fits any of them through a small adapter; the gripper is not read back
    (it is NaN = unknown in :meth:`read_joints`: the first gripper command is then the chunk's own value).

  Why stamp 0 and not the tick time: ros2_control's ``joint_trajectory_controller`` drops a trajectory whose
  ``header.stamp + time_from_start`` of its last point is already in the past on receipt, so with a tick stamp any
  delivery delay longer than the lookahead would silently lose the command.
* :class:`PoseBackend`: ``geometry_msgs/PoseStamped`` of the tool (FK of the checked joint command, so the pose
  satisfies the same limits) for a Cartesian controller, plus ``std_msgs/Float64`` gripper commands. The pose is
  stamped with the time it is meant for (tick + lookahead, :attr:`JointCommand.target_time_s`): a pose target says
  where the tool should be at its stamp, like a chunk step at its due time.
"""

from __future__ import annotations

import threading

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from para_ros.execution.backends import CommandBackend
from para_ros.execution.executor_core import JointCommand
from para_ros.stamps import s_to_fields

COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
# Sensor-data QoS (best effort, keep last 5): it matches both reliable and best-effort JointState publishers (a
# RELIABLE subscription never hears a best-effort publisher, as many robot drivers are), and a stale joint state
# is worth nothing, so nothing is re-sent.
JOINT_STATE_QOS = qos_profile_sensor_data


class JointStateReader:
    """Keeps the latest arm joints and gripper from a ``JointState`` topic, matched by name."""

    def __init__(self, node, topic: str, joint_names: tuple[str, ...], gripper_joint_name: str):
        self.joint_names = tuple(joint_names)
        self.gripper_joint_name = gripper_joint_name
        self._latest: tuple[np.ndarray, float] | None = None
        self._lock = threading.Lock()
        self._partial: dict[str, float] = {}
        self.sub = node.create_subscription(JointState, topic, self._on_joint_state, JOINT_STATE_QOS)

    def _on_joint_state(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            return
        # Joints may arrive split over several JointState messages (one per controller): merge by name.
        for name, pos in zip(msg.name, msg.position):
            if np.isfinite(pos):
                self._partial[name] = float(pos)
        names = self.joint_names + ((self.gripper_joint_name,) if self.gripper_joint_name else ())
        if not all(n in self._partial for n in names):
            return
        q = np.array([self._partial[n] for n in self.joint_names])
        g = self._partial[self.gripper_joint_name] if self.gripper_joint_name else float("nan")  # nan: not measured
        with self._lock:
            self._latest = (q, g)

    def read(self) -> tuple[np.ndarray, float] | None:
        with self._lock:
            return None if self._latest is None else (self._latest[0].copy(), self._latest[1])


class JointTrajectoryBackend(CommandBackend):
    """Publish each command as a one-point ``JointTrajectory``; read joints from ``joint_states_topic``."""

    name = "joint_trajectory"

    def __init__(
        self,
        node,
        topic: str,
        joint_states_topic: str,
        joint_names: tuple[str, ...],
        gripper_joint_name: str = "gripper",
        gripper_command_topic: str = "",
    ):
        self.joint_names = tuple(joint_names)
        self.gripper_joint_name = gripper_joint_name
        self.topic = topic
        self.pub = node.create_publisher(JointTrajectory, topic, COMMAND_QOS)
        # The gripper's own topic only when it is not inside the trajectory (see the module docstring).
        self.gripper_topic = "" if gripper_joint_name else gripper_command_topic
        self.gripper_pub = (
            node.create_publisher(Float64, self.gripper_topic, COMMAND_QOS) if self.gripper_topic else None
        )
        self.reader = JointStateReader(node, joint_states_topic, self.joint_names, gripper_joint_name)

    def describe(self) -> str:
        if self.gripper_joint_name:
            gripper = f"gripper inside it as {self.gripper_joint_name!r}"
        elif self.gripper_topic:
            gripper = f"gripper (std_msgs/Float64, 0..1) on {self.gripper_topic}"
        else:
            gripper = "gripper not commanded"
        return f"JointTrajectory on {self.topic} (joints {', '.join(self.joint_names)}), {gripper}"

    def read_joints(self) -> tuple[np.ndarray, float] | None:
        return self.reader.read()

    def make_msg(self, command: JointCommand) -> JointTrajectory:
        msg = JointTrajectory()
        msg.header.stamp.sec, msg.header.stamp.nanosec = 0, 0  # start on receipt (see the module docstring)
        msg.joint_names = list(self.joint_names) + ([self.gripper_joint_name] if self.gripper_joint_name else [])
        point = JointTrajectoryPoint()
        positions = [float(v) for v in command.q_rad]
        if self.gripper_joint_name:
            positions.append(float(command.gripper))
        point.positions = positions
        point.time_from_start.sec, point.time_from_start.nanosec = s_to_fields(command.time_from_start_s)
        msg.points = [point]
        return msg

    def send(self, command: JointCommand) -> None:
        self.pub.publish(self.make_msg(command))
        if self.gripper_pub is not None and np.isfinite(command.gripper):
            self.gripper_pub.publish(Float64(data=float(command.gripper)))


class PoseBackend(CommandBackend):
    """Publish the tool pose of each command (``PoseStamped`` in ``world_frame``) and the gripper (``Float64``)."""

    name = "pose"

    def __init__(
        self,
        node,
        topic: str,
        gripper_topic: str,
        joint_states_topic: str,
        joint_names: tuple[str, ...],
        gripper_joint_name: str = "gripper",
        world_frame: str = "base",
    ):
        self.world_frame = world_frame
        self.pub = node.create_publisher(PoseStamped, topic, COMMAND_QOS)
        self.gripper_pub = node.create_publisher(Float64, gripper_topic, COMMAND_QOS) if gripper_topic else None
        self.reader = JointStateReader(node, joint_states_topic, tuple(joint_names), gripper_joint_name)

    def read_joints(self) -> tuple[np.ndarray, float] | None:
        return self.reader.read()

    def send(self, command: JointCommand) -> None:
        self.pub.publish(pose_stamped(command, self.world_frame))
        if self.gripper_pub is not None and np.isfinite(command.gripper):
            self.gripper_pub.publish(Float64(data=float(command.gripper)))


def pose_stamped(command: JointCommand, frame_id: str) -> PoseStamped:
    """The tool pose of ``command`` as a ``PoseStamped`` stamped with the time it is meant for.

    The stamp is :attr:`JointCommand.target_time_s` (tick + lookahead: the chunk was sampled there), not the tick
    time: the pose is where the tool should be at its stamp.
    """
    msg = PoseStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec = s_to_fields(command.target_time_s)
    msg.header.frame_id = frame_id
    p = command.T_base_tool[:3, 3]
    q = command.quat_xyzw
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in p)
    msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w = (
        float(v) for v in q
    )
    return msg
