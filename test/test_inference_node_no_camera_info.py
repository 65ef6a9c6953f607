"""inference_node whose wrist CameraInfo never arrives (own module: it needs its own node and ROS context)."""
from __future__ import annotations

import pytest

from ros_helpers import start_python, stop_process, wait_for
from test_inference_node import SEED, Rig

pytestmark = pytest.mark.ros


def test_camera_info_that_never_arrives():
    """A fresh node that never gets the wrist CameraInfo: nothing is published, diagnostics say why."""
    import rclpy

    proc = start_python(["para_ros.inference_node", "--ros-args", "-p", f"random_seed:={SEED}",
                         "-p", "wrist_info_topic:=/nobody/camera_info"], module=True)
    try:
        rclpy.init()
        r = Rig()
        r.publish_static_scene()
        wait_for(lambda: any(s.name.startswith("para: inference") for d in r.diagnostics for s in d.status), 60,
                 what="the inference node to come up")

        def publish_and_check():
            r.publish_observation(r.now_ns())
            return r.diagnostics_mention("no CameraInfo received on /nobody/camera_info")

        wait_for(publish_and_check, 10, what="diagnostics naming the missing CameraInfo")
        assert not r.chunks
    finally:
        if "r" in locals():
            r.close()
        if rclpy.ok():
            rclpy.shutdown()
        rc, _ = stop_process(proc, timeout_s=10)
        assert rc is not None
