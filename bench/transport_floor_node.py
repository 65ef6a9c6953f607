#!/usr/bin/env python3
"""The transport floor of ``bench/bench_inference_node.py``: a node that answers each observation with an empty chunk.

It subscribes to what ``inference_node`` subscribes to, with the same QoS and endpoint options (joint states,
CameraInfo and images of the scene and wrist cameras, and ``/tf`` + ``/tf_static`` into the project's TF buffer), and
publishes an empty ``para_msgs/ActionChunk`` stamped like the wrist image from that image's own callback: no pairing,
no observation, no model, no hand-over to another thread. What the benchmark measures through it is what rclpy and
DDS cost on this machine to get one observation's messages in and a chunk out; the inference node's latency minus
its policy stages minus this floor is the node's own overhead.

Its only output besides the chunk: ``time_from_stamp[0]`` of each chunk is its receive stage (image stamp -> the wrist
image's callback), so the benchmark can print the floor's receive beside the node's. Run by the benchmark::

    python bench/transport_floor_node.py [--ros-args ...]
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument(
        "--wrist-topic",
        default="/wrist_cam/image_raw",
        help="the image that completes an observation (the rig publishes it last; default /wrist_cam/image_raw)",
    )
    args, ros_args = parser.parse_known_args(argv)

    from para_ros.dds_env import apply_loopback_dds_env

    apply_loopback_dds_env(pick_domain=False)  # the caller's ROS_DOMAIN_ID: the benchmark's rig must meet it
    import rclpy
    from builtin_interfaces.msg import Duration as DurationMsg
    from rclpy.duration import Duration
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import CameraInfo, Image, JointState

    from para_msgs.msg import ActionChunk
    from para_ros.adapters.tf import Buffer, TransformListener
    from para_ros.nodes.inference_params import VIEW_TOPIC_DEFAULTS
    from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
    from para_ros.stamps import set_stamp, stamp_to_ns

    # rclpy's own SIGINT / SIGTERM handler (the benchmark stops it with terminate()): it wakes the executor, which
    # may otherwise wait for a message that never comes once the rig is quiet.
    rclpy.init(args=[sys.argv[0], *ros_args], signal_handler_options=SignalHandlerOptions.ALL)
    node = rclpy.create_node("transport_floor")
    quiet_sub, quiet_pub = subscription_without_default_events(), publisher_without_default_events()
    tf_buffer = Buffer(cache_time=Duration(seconds=30.0), node=node)
    tf_listener = TransformListener(tf_buffer, node)  # noqa: F841 - fills the buffer, as in inference_node
    chunk_pub = node.create_publisher(ActionChunk, "/para/action_chunk", QoSProfile(depth=10), **quiet_pub)
    chunk = ActionChunk(model_id="transport_floor")
    receive = DurationMsg()

    def on_last_image(msg) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp)
        set_stamp(receive, max(0, node.get_clock().now().nanoseconds - stamp_ns))
        chunk.header.stamp = msg.header.stamp
        chunk.time_from_stamp = [receive]
        chunk_pub.publish(chunk)

    node.create_subscription(JointState, "/joint_states", lambda msg: None, qos_profile_sensor_data, **quiet_sub)
    for _, info_topic in VIEW_TOPIC_DEFAULTS.values():
        node.create_subscription(CameraInfo, info_topic, lambda msg: None, qos_profile_sensor_data, **quiet_sub)
    for image_topic, _ in VIEW_TOPIC_DEFAULTS.values():
        callback = on_last_image if image_topic == args.wrist_topic else (lambda msg: None)
        node.create_subscription(Image, image_topic, callback, qos_profile_sensor_data, **quiet_sub)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
