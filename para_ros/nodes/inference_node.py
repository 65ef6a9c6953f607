"""``inference_node``: scene + wrist camera images and TF in, ``para_msgs/ActionChunk`` and rviz markers out.

The ROS side of :class:`para_ros.inference.pipeline.InferencePipeline`, which owns everything else (pairing, the
observation, the camera and familiarity checks, the policy and its chunk decoding, the order of the outputs, what a
clock jump forgets, the latency stages and every diagnostic; its docstring has the rules). The node declares its
parameters (:mod:`para_ros.nodes.inference_params`; the pipeline and policy they set up:
:mod:`para_ros.inference.pipeline_settings`, :mod:`para_ros.inference.policy_choice`), subscribes, answers pose
look-ups from its TF buffer, runs the pipeline in its inference thread (:mod:`para_ros.inference.inference_thread`),
turns what comes back into messages and reports on ``/diagnostics``.

* Each camera's pose is looked up in TF (``world_frame`` <- the frame id of that camera's CameraInfo header) at that
  image's stamp; the end-effector pose comes from TF (``world_frame`` <- ``ee_frame``; ``ee_source: tf``, the
  default: the simulator, the executor's i2rt backend and robot_state_publisher publish ``grasp_site``), or from
  ``/joint_states`` and the YAM's forward kinematics (``ee_source: joint_states``, for drivers without a tool frame
  in TF) (:mod:`para_ros.observation.world_poses`).
* Time jumps (``use_sim_time`` and a ``/clock`` that goes back: a simulator reset, a bag loop): the node registers an
  rclpy clock jump callback (a backward jump of :data:`~para_ros.inference.pipeline.TIME_JUMP_BACK_MIN_S` or more,
  and a switch of time source) BEFORE its TF buffer, so it runs first. Before the new time is set it clears the TF
  buffer's history (dynamic transforms; static ones stay, as in tf2) and hands the jump to the pipeline; after it,
  the pipeline counts it, the node logs a warning. A callback rather than comparing consecutive ``now()`` values:
  the node reads its clock in several threads (image callbacks, the inference thread), whose reads interleave, so a
  comparison needs a tolerance and catches a jump only at its next read, after an image on the new clock may already
  have met the old frames; rcl compares each ``/clock`` with the previous one and calls the pre-jump callback in the
  executor thread before any callback sees the new time.
* Bad input never crashes the node: each problem is logged (throttled, per problem) and reported on ``/diagnostics``
  (``para_ros.nodes.health``).
"""

from __future__ import annotations

import numpy as np
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState, PointCloud2
from std_msgs.msg import Int64MultiArray
from visualization_msgs.msg import MarkerArray

from para_core.model.hardware import configure_cpu_threads, describe_precision
from para_msgs.msg import ActionChunk
from para_ros.adapters.tf import Buffer, TransformException, TransformListener
from para_ros.inference import pipeline_settings
from para_ros.inference.inference_thread import InferenceThread
from para_ros.inference.pipeline import TIME_JUMP_BACK_MIN_S, Prediction
from para_ros.inference.policy_choice import PolicyChoice
from para_ros.nodes.health import HealthReporter
from para_ros.nodes.inference_params import PARAMETERS, view_topic_params
from para_ros.nodes.lockstep_hooks import ACK_QOS
from para_ros.nodes.runtime import run_node, time_jump_text
from para_ros.observation.world_poses import PoseLookupError, WorldPoses
from para_ros.ros_io.chunk_msg import action_chunk_msg
from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
from para_ros.ros_io.rviz import chunk_markers, rgb_image, voxel_cloud
from para_ros.sim.lockstep import no_chunk_ack
from para_ros.stamps import stamp_to_ns
from para_ros.viz.chunk_visualisation import Visualisation


class InferenceNode(Node):
    """See the module docstring. The policy loads in ``__init__``, before any callback can run."""

    def __init__(self, node_name: str = "inference_node", parameter_overrides=None, **kwargs):
        super().__init__(node_name, parameter_overrides=parameter_overrides or [], **kwargs)
        self.params = p = PARAMETERS.declare(self)
        self.ee_from_joints = pipeline_settings.ee_from_joints(p)
        self.cpu_threads = configure_cpu_threads(p["threads"] or "auto")  # before the policy's first forward
        self.policy = PolicyChoice.from_parameters(p).load(warn=self.get_logger().warning)
        self.views = tuple(self.policy.view_names)
        extra = view_topic_params(self.views)
        p.update(PARAMETERS.declare(self, extra))
        PARAMETERS.on_set(self, self._apply_parameters, extra)

        self.health = HealthReporter(self, f"para: {self.get_name()}", hardware_id=self.policy.model_id)
        self.pipeline = pipeline_settings.build_pipeline(self.policy, p, self.health, self.ee_from_joints)
        # Before the TF buffer, so this runs first (an upstream tf2_ros Buffer registers a jump callback of its own,
        # and rcl calls no callback registered after one that raised).
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(seconds=-TIME_JUMP_BACK_MIN_S), on_clock_change=True),
            pre_callback=self._before_time_jump,
            post_callback=self._after_time_jump,
        )
        self.tf_buffer = Buffer(cache_time=Duration(seconds=30.0), node=self)
        self.tf_listener = TransformListener(self.tf_buffer, self)
        self.poses = WorldPoses(
            self._tf_lookup,
            p["world_frame"],
            p["ee_frame"],
            p["tf_timeout_s"],
            ee_from_joints=self.ee_from_joints,
            joint_states_topic=p["joint_states_topic"],
            rejections=lambda: getattr(self.tf_buffer, "rejections_by_child", {}),
        )

        quiet_sub, quiet_pub = subscription_without_default_events(), publisher_without_default_events()
        # Every frame wakes the executor: endpoints without per-wake event polling. CameraInfo and joint states first:
        # rclpy runs the ready callbacks of one wake in creation order, so the image callbacks (which wake the
        # inference thread) come last, and the executor goes back to waiting right after them.
        self.create_subscription(
            JointState, p["joint_states_topic"], self._on_joint_states, qos_profile_sensor_data, **quiet_sub
        )
        for view in self.views:
            self.create_subscription(
                CameraInfo,
                p[f"{view}_info_topic"],
                lambda m, v=view: self._on_info(v, m),
                qos_profile_sensor_data,
                **quiet_sub,
            )
        compressed = p["image_transport"] == "compressed"
        for view in self.views:
            self.create_subscription(
                CompressedImage if compressed else Image,
                p[f"{view}_image_topic"] + ("/compressed" if compressed else ""),
                lambda m, v=view: self._on_image(v, m),
                qos_profile_sensor_data,
                **quiet_sub,
            )
        self.chunk_pub = self.create_publisher(ActionChunk, p["chunk_topic"], QoSProfile(depth=10), **quiet_pub)
        self.ack_pub = (  # lockstep: a refused frame is answered with "no chunk" (para_ros.sim.lockstep, rule 4)
            self.create_publisher(Int64MultiArray, p["lockstep_ack_topic"], ACK_QOS, **quiet_pub)
            if p["lockstep_ack_topic"]
            else None
        )
        self._chunk_msg = ActionChunk()  # refilled for every chunk (inference thread only): no T pose constructors
        self.marker_pub = self.create_publisher(MarkerArray, p["markers_topic"], QoSProfile(depth=10), **quiet_pub)
        self.cloud_pub = self.create_publisher(PointCloud2, p["pointcloud_topic"], QoSProfile(depth=2), **quiet_pub)
        self.overlay_pub = (
            self.create_publisher(Image, p["overlay_topic"], QoSProfile(depth=2), **quiet_pub)
            if p["overlay_topic"]
            else None
        )
        self.inference = InferenceThread(self.try_infer, lambda: self.params["max_rate_hz"])
        self.inference.start()
        self.get_logger().info(
            f"ready: model {self.policy.model_id} on {self.policy.device} "
            f"({describe_precision(p['dtype'], self.policy.device)[1]}, "
            f"attention {self.policy.attention}, allocator: {self.policy.allocator}, decoding "
            f"{self.policy.decoding.mode}), views {self.views}, world frame '{p['world_frame']}'; "
            f"familiarity check: {pipeline_settings.familiarity_summary(self.pipeline)}; {self.cpu_threads.describe()}"
        )

    def _apply_parameters(self, changes: dict) -> None:
        """On-set callback (after the table's checks): the dynamic parameters take effect from the next frame."""
        self.params = {**self.params, **changes}
        pipeline_settings.apply_parameter_changes(self.pipeline, self.params, changes)
        if "tf_timeout_s" in changes:
            self.poses.tf_timeout_s = float(changes["tf_timeout_s"])
        self.inference.wake()  # the inference loop re-reads max_rate_hz
        self.get_logger().info("parameters changed: " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # --------------------------------------------------------------------------------------------- callbacks
    def _before_time_jump(self) -> None:
        """rclpy pre-jump callback (executor thread, before the new time is set): forget everything on the old clock
        (module docstring). Never raises: an exception here would escape from the /clock subscription's callback."""
        try:
            self.pipeline.clock_jumped_back()
            self.tf_buffer.clear()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f"clearing after a clock jump failed: {type(exc).__name__}: {exc}")

    def _after_time_jump(self, jump) -> None:
        """rclpy post-jump callback: the pipeline counts it; logged, and /diagnostics published at once."""
        try:
            what = time_jump_text(jump, self.get_clock().now().nanoseconds / 1e9)
            self.pipeline.report_clock_jump(what)
            self.get_logger().warning(
                f"{what}: TF history, camera frames and joint-state history cleared; "
                "observations from before the jump are dropped"
            )
            self.health.publish()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f"reporting a clock jump failed: {type(exc).__name__}: {exc}")

    def _on_info(self, view: str, msg) -> None:
        self.pipeline.add_camera_info(view, msg)

    def _on_joint_states(self, msg) -> None:
        self.pipeline.add_joint_states(stamp_to_ns(msg.header.stamp), msg.name, msg.position)

    def _on_image(self, view: str, msg) -> None:
        if self.pipeline.add_image(view, stamp_to_ns(msg.header.stamp), msg, self.get_clock().now().nanoseconds):
            self.inference.wake()

    def shutdown(self) -> None:
        """Stop the inference thread (``run_node`` calls this before the node and context go away)."""
        self.inference.stop(timeout_s=5.0)

    # ------------------------------------------------------------------------------------------ inference
    def try_infer(self) -> None:
        """One observation through the pipeline (the inference thread's step); never raises."""
        self.pipeline.infer_newest(self._now_ns, self.poses.frame_pose, self.poses.ee_pose, self)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _tf_lookup(self, target: str, source: str, stamp_ns: int, timeout_ns: int) -> np.ndarray:
        """(4, 4) ``T_target_source`` from the TF buffer (the look-up of ``WorldPoses``)."""
        try:
            return self.tf_buffer.lookup_matrix(
                target, source, Time(nanoseconds=stamp_ns), Duration(nanoseconds=timeout_ns)
            )
        except TransformException as exc:
            raise PoseLookupError(f"{type(exc).__name__}: {exc}") from None

    # -------------------------------------------------------------- outputs (para_ros.inference.pipeline.Outputs)
    def chunk_message(self, prediction: Prediction) -> ActionChunk:
        """The chunk as this node's one ActionChunk message, refilled."""
        p = self.params
        return action_chunk_msg(
            prediction.output,
            prediction.stamp_ns,
            p["world_frame"],
            p["ee_frame"],
            self.policy.model_id,
            into=self._chunk_msg,
        )

    def send_chunk(self, message: ActionChunk) -> None:
        self.chunk_pub.publish(message)

    def send_visualisation(self, message: ActionChunk, viz: Visualisation) -> None:
        """Markers, the voxel cloud (``publish_pointcloud``) and the overlay image (``overlay_topic``), stamped as
        the chunk."""
        header = message.header
        self.marker_pub.publish(
            chunk_markers(
                header,
                viz.positions_world,
                viz.confidence,
                viz.ee_xyz,
                voxel_size_m=viz.voxel_size_m,
                color_by=self.params["marker_color_by"],
            )
        )
        if self.params["publish_pointcloud"]:
            self.cloud_pub.publish(voxel_cloud(header, viz.top_voxels_world, viz.top_voxels_prob))
        if self.overlay_pub is not None and viz.overlay_rgb is not None:
            self.overlay_pub.publish(rgb_image(header.stamp, viz.overlay_frame, viz.overlay_rgb))

    def send_no_chunk(self, stamp_ns: int) -> None:
        if self.ack_pub is not None:
            self.ack_pub.publish(Int64MultiArray(data=no_chunk_ack(stamp_ns)))


def main(argv: list[str] | None = None) -> int:
    """Run the inference node (``ros2 run para_ros inference_node --ros-args -p checkpoint:=DIR``)."""
    return run_node(
        InferenceNode,
        prog="inference_node",
        description=__doc__.split("\n\n")[0],
        default_params_file="inference.yaml",
        argv=argv,
        epilog=PARAMETERS.help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
