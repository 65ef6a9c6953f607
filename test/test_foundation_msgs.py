"""ActionChunk crosses real DDS between two processes with every field intact."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ros_helpers import start_python, stop_process, wait_for

pytestmark = pytest.mark.ros

T_STEPS = 7
SEED = 1234

# The publisher process builds the chunk from SEED with the same recipe as `expected_fields` below.
PUBLISHER = f"""
import time, numpy as np, rclpy
from para_ros.dds_env import apply_loopback_dds_env
apply_loopback_dds_env()
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Pose
from para_msgs.msg import ActionChunk
rng = np.random.default_rng({SEED})
pos = rng.uniform(-1, 1, ({T_STEPS}, 3)); q = rng.normal(size=({T_STEPS}, 4)); q /= np.linalg.norm(q, axis=1, keepdims=True)
grip = rng.uniform(0, 1, {T_STEPS}); conf = rng.uniform(0, 1, {T_STEPS})
rclpy.init(); node = rclpy.create_node('chunk_publisher')
pub = node.create_publisher(ActionChunk, '/para/action_chunk', 10)
msg = ActionChunk()
msg.header.stamp.sec = 1700000000; msg.header.stamp.nanosec = 123456789; msg.header.frame_id = 'base'
msg.tool_frame_id = 'grasp_site'; msg.model_id = 'para_v4@deadbeef'
for i in range({T_STEPS}):
    ns = i * 133333333
    msg.time_from_stamp.append(Duration(sec=ns // 10**9, nanosec=ns % 10**9))
    p = Pose(); p.position.x, p.position.y, p.position.z = (float(v) for v in pos[i])
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in q[i])
    msg.poses.append(p)
msg.gripper = [float(g) for g in grip]; msg.confidence = [float(c) for c in conf]
end = time.monotonic() + 20
while time.monotonic() < end:
    pub.publish(msg); rclpy.spin_once(node, timeout_sec=0.1)
"""


def expected_fields():
    rng = np.random.default_rng(SEED)
    pos = rng.uniform(-1, 1, (T_STEPS, 3))
    q = rng.normal(size=(T_STEPS, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    grip = rng.uniform(0, 1, T_STEPS)
    conf = rng.uniform(0, 1, T_STEPS)
    return pos, q, grip, conf


def test_action_chunk_round_trips_between_processes():
    import rclpy

    from para_msgs.msg import ActionChunk

    publisher = start_python(PUBLISHER)
    rclpy.init()
    try:
        node = rclpy.create_node("chunk_listener")
        received = []
        node.create_subscription(ActionChunk, "/para/action_chunk", received.append, 10)
        wait_for(
            lambda: bool(received),
            15.0,
            spin=lambda: rclpy.spin_once(node, timeout_sec=0.1),
            what="an ActionChunk from the publisher process",
        )
        msg = received[0]
        pos, q, grip, conf = expected_fields()
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1700000000, 123456789)
        assert msg.header.frame_id == "base" and msg.tool_frame_id == "grasp_site"
        assert msg.model_id == "para_v4@deadbeef"
        assert len(msg.poses) == len(msg.time_from_stamp) == len(msg.gripper) == len(msg.confidence) == T_STEPS
        for i in range(T_STEPS):
            ns = i * 133333333
            assert msg.time_from_stamp[i].sec * 10**9 + msg.time_from_stamp[i].nanosec == ns
            p = msg.poses[i]
            # float64 fields survive exactly
            assert (p.position.x, p.position.y, p.position.z) == tuple(pos[i])
            assert (p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w) == tuple(q[i])
            # float32 fields survive to float32 precision
            assert math.isclose(msg.gripper[i], grip[i], rel_tol=0, abs_tol=1e-7)
            assert math.isclose(msg.confidence[i], conf[i], rel_tol=0, abs_tol=1e-7)
        node.destroy_node()
    finally:
        rclpy.shutdown()
        stop_process(publisher)
