"""``/joint_states`` and the arm's ``/tf`` from the I2RT SDK, for the chunk executor's ``i2rt_sdk`` backend.

With the SDK backend the executor owns the arm's CAN bus, so no separate robot driver can publish the arm's state;
the inference node still needs TF ``base <- grasp_site`` and ``base <- wrist_cam_optical_frame`` at every image
stamp and ``/joint_states`` for the gripper. :class:`SdkStatePublisher` reads the joints from the SDK at a fixed
rate (a ROS timer on the node's clock) and publishes, both stamped with the time of that read:

* ``sensor_msgs/JointState``: ``joint1`` .. ``joint6`` (rad, SDK order) and the gripper (0 closed .. 1 open, as the
  SDK reports it) under ``gripper_joint_name``;
* ``/tf`` (through :class:`para_ros.adapters.tf.TransformBroadcaster`): the frames of
  :class:`para_ros.robot.yam_frames.YamFrames` (chain ``base`` .. ``gripper``, ``grasp_site``, the wrist camera's
  optical frame at the mount of ``config/yam.yaml``), by forward kinematics of the joints just read.
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from para_ros.adapters.transforms import matrix_to_transform


class SdkStatePublisher:
    """Publish the SDK arm's joint states (and its TF) at ``rate_hz`` from ``read_joints``.

    :param node: the executor node (its clock stamps the messages; its executor runs the timer).
    :param read_joints: returns ((n,) rad, gripper 0..1) or None (as :meth:`CommandBackend.read_joints`).
    :param topic: JointState output topic.
    :param joint_names: the 6 arm joint names; ``gripper_joint_name`` ("" = no gripper entry).
    :param rate_hz: publish rate (> 0).
    :param frames: a :class:`YamFrames` (TF published when given), else None (no TF).
    """

    def __init__(
        self,
        node,
        read_joints,
        topic: str,
        joint_names: tuple[str, ...],
        gripper_joint_name: str,
        rate_hz: float,
        frames=None,
    ):
        if not (math.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f"parameter state_publish_rate_hz={rate_hz!r}: must be a finite number > 0 (Hz)")
        self.node = node
        self.read_joints = read_joints
        self.names = list(joint_names) + ([gripper_joint_name] if gripper_joint_name else [])
        self.with_gripper = bool(gripper_joint_name)
        self.frames = frames
        self.pub = node.create_publisher(JointState, topic, QoSProfile(depth=10))
        self.tf_broadcaster = None
        if frames is not None:
            from para_ros.adapters.tf import TransformBroadcaster  # tf2_ros: only with frames to broadcast

            self.tf_broadcaster = TransformBroadcaster(node)
        self.published = 0
        self.failures = 0
        self.last_error = ""
        self.timer = node.create_timer(1.0 / rate_hz, self.publish_once)

    def publish_once(self) -> bool:
        """Read the joints once and publish them (and TF); False when the SDK had no valid reading."""
        try:
            stamp = self.node.get_clock().now()
            if stamp.nanoseconds <= 0:  # use_sim_time and no /clock yet
                return False
            measured = self.read_joints()
            if measured is None:
                return False
            q, gripper = measured
            q = np.asarray(q, dtype=float)  # (n,) arm joints
            stamp_msg = stamp.to_msg()
            msg = JointState()
            msg.header.stamp = stamp_msg
            msg.name = list(self.names)
            msg.position = [float(v) for v in q] + ([float(gripper)] if self.with_gripper else [])
            self.pub.publish(msg)
            if self.tf_broadcaster is not None:
                transforms = []
                for parent, child, T in self.frames.transforms(q):
                    t = TransformStamped()
                    t.header.stamp = stamp_msg
                    t.header.frame_id = parent
                    t.child_frame_id = child
                    t.transform = matrix_to_transform(T)
                    transforms.append(t)
                self.tf_broadcaster.sendTransform(transforms)
            self.published += 1
            return True
        except Exception as err:  # noqa: BLE001 - a failed read must not take the node (and the arm's control) down
            self.failures += 1
            self.last_error = f"{type(err).__name__}: {err}"
            self.node.get_logger().error(
                f"joint state / TF publishing failed: {self.last_error}", throttle_duration_sec=1.0
            )
            return False

    def close(self) -> None:
        self.node.destroy_timer(self.timer)
