"""tf over real DDS (loopback): a separate process broadcasts /tf_static and /tf with the adapter's broadcasters; this
process looks the chained transform up with Buffer + TransformListener and compares it with the hand-computed one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from rclpy.duration import Duration
from rclpy.time import Time
from scipy.spatial.transform import Rotation, Slerp

from para_ros.adapters.transforms import invert_matrix, make_matrix, transform_to_matrix

pytestmark = pytest.mark.ros

PUBLISHER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import rclpy
    from geometry_msgs.msg import TransformStamped
    from rclpy.time import Time
    from scipy.spatial.transform import Rotation
    from para_ros.dds_env import apply_loopback_dds_env
    from para_ros.adapters.tf import StaticTransformBroadcaster, TransformBroadcaster

    apply_loopback_dds_env()
    spec = json.loads(sys.argv[1])

    def stamped(parent, child, T, t_s=0.0, w_override=None):
        T = np.asarray(T)
        msg = TransformStamped()
        msg.header.frame_id, msg.child_frame_id = parent, child
        msg.header.stamp = Time(nanoseconds=int(round(t_s * 1e9))).to_msg()
        q = Rotation.from_matrix(T[:3, :3]).as_quat()
        msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = T[:3, 3]
        msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z, msg.transform.rotation.w = q
        if w_override is not None:
            msg.transform.rotation.w = w_override
        return msg

    rclpy.init()
    node = rclpy.create_node("tf_test_publisher")
    static = StaticTransformBroadcaster(node)
    dynamic = TransformBroadcaster(node)
    # Two separate calls: the broadcaster must keep both frames in its latched message.
    static.sendTransform(stamped("base", "table", spec["base_table"]))
    static.sendTransform([stamped("table", "scene_cam", spec["table_scene"]),
                          stamped("arm", "wrist", spec["arm_wrist"])])
    print("ready", flush=True)
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        dynamic.sendTransform([stamped("base", "arm", spec["base_arm_0"], 100.0),
                               stamped("base", "bad_cam", np.eye(4), 100.0, w_override=1.5)])
        dynamic.sendTransform(stamped("base", "arm", spec["base_arm_1"], 101.0))
        time.sleep(0.05)
""")


def random_T(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return make_matrix(rng.normal(size=3), Rotation.random(random_state=seed).as_quat())


@pytest.fixture
def ros_node():
    # The default context, because upstream tf2_ros' listener thread spins an executor on the default context.
    import rclpy

    owns_init = not rclpy.ok()
    if owns_init:
        rclpy.init()
    node = rclpy.create_node("tf_test_listener")
    yield node
    node.destroy_node()
    if owns_init:
        rclpy.shutdown()


def test_listener_gets_chained_transform_from_another_process(ros_node):
    from para_ros.adapters.tf import Buffer, TransformListener

    spec = {
        name: random_T(seed)
        for seed, name in enumerate(["base_table", "table_scene", "arm_wrist", "base_arm_0", "base_arm_1"])
    }
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, json.dumps({k: v.tolist() for k, v in spec.items()})],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert publisher.stdout.readline().strip() == "ready", publisher.stderr.read()
        # The listener starts after the static transforms were sent: TRANSIENT_LOCAL must still deliver them.
        buffer = Buffer()
        listener = TransformListener(buffer, ros_node, spin_thread=True)
        result = buffer.lookup_transform("scene_cam", "wrist", Time(seconds=100.5), timeout=Duration(seconds=30))

        slerp = Slerp(
            [0.0, 1.0], Rotation.from_matrix(np.stack([spec["base_arm_0"][:3, :3], spec["base_arm_1"][:3, :3]]))
        )
        T_base_arm = make_matrix(
            0.5 * (spec["base_arm_0"][:3, 3] + spec["base_arm_1"][:3, 3]), slerp([0.5])[0].as_quat()
        )
        T_base_scene = spec["base_table"] @ spec["table_scene"]
        expected = invert_matrix(T_base_scene) @ T_base_arm @ spec["arm_wrist"]
        assert result.header.frame_id == "scene_cam" and result.child_frame_id == "wrist"
        np.testing.assert_allclose(transform_to_matrix(result), expected, atol=1e-9)

        # The non-unit quaternion sent on /tf was refused, with the frames named.
        deadline = time.monotonic() + 10.0
        while "bad_cam" not in buffer.rejections_by_child and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "non-unit quaternion in TF from 'base' to 'bad_cam'" in buffer.rejections_by_child["bad_cam"]
        assert not buffer.can_transform("base", "bad_cam", Time(seconds=100.0))
        listener.executor.shutdown()
        listener.dedicated_listener_thread.join(timeout=10)
        listener.unregister()
    finally:
        publisher.terminate()
        try:
            publisher.wait(timeout=10)
        except subprocess.TimeoutExpired:
            publisher.kill()
            publisher.wait()
