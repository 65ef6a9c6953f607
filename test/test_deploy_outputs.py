"""The pieces of para-deploy's output on synthetic data: projection (vs cv2.projectPoints), the snapshot drawing,
the summary figures (vs hand-computed numbers), and the MCAP recording (read back with rosbags' Reader).
"""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest

from para_core.eval.projection import project_points
from para_ros.deploy.snapshot import SnapshotScene, draw_snapshot, scale_intrinsics
from para_ros.deploy.summary import (
    RunRecord,
    achieved_rate_hz,
    format_summary,
    joint_motion_rad,
    latencies_s,
    percentiles_ms,
    summary_dict,
)


def look_at(position, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """T_world_cam of an OpenCV optical camera at ``position`` looking at ``target`` (built here, independently)."""
    z = np.asarray(target, float) - position
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, :3] = np.stack([x, y, z], axis=1)
    T[:3, 3] = position
    return T


K = np.array([[210.0, 0.0, 127.3], [0.0, 205.0, 121.9], [0.0, 0.0, 1.0]])
T_WORLD_CAM = look_at(np.array([0.05, -0.3, 1.0]), np.array([0.33, 0.0, 0.0]), up=(1.0, 0.0, 0.0))


def test_scaled_intrinsics_scale_pixel_coordinates():
    p = np.array([[0.3, 0.1, 0.05]])
    uv, _ = project_points(p, K, T_WORLD_CAM)
    uv3, _ = project_points(p, scale_intrinsics(K, 3.0), T_WORLD_CAM)
    np.testing.assert_allclose(uv3, 3.0 * uv)


def test_snapshot_draws_each_step_where_it_projects():
    image = np.full((256, 256, 3), 128, np.uint8)
    path = np.array([[0.30, -0.10, 0.05], [0.35, 0.0, 0.10], [0.40, 0.10, 0.05]])
    scale = 3.0
    out = draw_snapshot(
        SnapshotScene(
            image_rgb=image,
            K=K,
            T_world_cam=T_WORLD_CAM,
            path_world=path,
            ee_world=np.array([0.3, 0.0, 0.2]),
            voxel_size_m=0.01,
        ),
        scale=scale,
    )
    assert out.shape == (768, 768, 3) and out.dtype == np.uint8
    ref, _ = cv2.projectPoints(
        path, cv2.Rodrigues(np.linalg.inv(T_WORLD_CAM)[:3, :3])[0], np.linalg.inv(T_WORLD_CAM)[:3, 3], K, np.zeros(5)
    )
    for i, (u, v) in enumerate(ref.reshape(-1, 2) * scale):
        col, row = int(np.floor(u)), int(np.floor(v))  # the pixel that contains the continuous point
        b, g, r = out[row, col].astype(int)
        assert (r, g, b) != (128, 128, 128), f"step {i} not drawn at pixel ({col}, {row})"
        assert g > 70 and r < 60, f"step {i}: pixel ({col}, {row}) is {(r, g, b)}, not a step colour"
    assert np.array_equal(out[700, 20], [128, 128, 128])  # far from everything: untouched


def test_snapshot_refuses_a_grey_image():
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        draw_snapshot(
            SnapshotScene(
                image_rgb=np.zeros((8, 8), np.uint8), K=K, T_world_cam=T_WORLD_CAM, path_world=np.zeros((1, 3))
            )
        )


def test_summary_figures_against_hand_computation():
    start = 1_000_000_000_000
    chunk_stamps = [start + k * 100_000_000 for k in range(5)]
    lat_ms = [80, 90, 100, 110, 400]
    record = RunRecord(
        duration_s=10.0,
        graph_start_ns=start - 2_000_000_000,
        scene_frame_recv_ns=[start + k * 100_000_000 for k in range(11)],  # 11 frames over 1 s: 10 Hz
        chunk_stamp_ns=chunk_stamps,
        chunk_recv_ns=[s + m * 1_000_000 for s, m in zip(chunk_stamps, lat_ms)],
        command_recv_ns=[start + k * 10_000_000 for k in range(101)],  # 101 commands over 1 s: 100 Hz
        joint_positions_first={"joint1": 0.0, "joint2": 1.7, "gripper": 1.0},
        joint_positions_last={"joint1": 0.25, "joint2": 1.2, "gripper": 0.0},
        joint_state_count=50,
        diagnostics={
            "para: inference_node": {
                "frames_in.scene": "11",
                "chunks_out": "5",
                "stage_median_ms.receive": "21.5",
                "stage_median_ms.model": "5.25",
            },
            "chunk_executor: chunk_executor": {
                "commands": "101",
                "limit_events": "7",
                "chunks_modified": "4",
                "chunks_truncated": "3",
                "control_rate_hz": "100.0",
            },
            "sim_node: sim_node": {"publish_delay_median_ms.scene": "12.25", "tick_errors": "0"},
        },
        model_id="para_v4:tiny:random-seed0",
        untrained=True,
    )
    s = summary_dict(record)
    assert s["scene_frames_seen"] == 11 and s["scene_frame_rate_hz"] == pytest.approx(10.0)
    assert s["control_rate_hz"] == pytest.approx(100.0)
    assert s["latency_median_ms"] == pytest.approx(100.0)
    assert s["latency_p99_ms"] == pytest.approx(110 + 0.96 * 290)  # numpy's linear interpolation between 4th and 5th
    assert s["first_chunk_after_s"] == pytest.approx(2.08)
    assert s["max_joint_motion_rad"] == pytest.approx(0.5)  # joint2; the gripper is not an arm joint
    assert s["gripper_change"] == pytest.approx(1.0)
    assert (s["commands_limited"], s["chunks_modified"], s["chunks_truncated"], s["chunks_out_node"]) == (7, 4, 3, 5)
    assert s["latency_stages_median_ms"] == {"receive": 21.5, "model": 5.25}
    text = format_summary(record, ["  snapshot              /tmp/x.png"])
    assert "UNTRAINED" in text and "median 100.0 ms" in text and "/tmp/x.png" in text
    assert "latency stages        receive 21.5, model 5.2 ms" in text
    assert "modified 4 (clamped into the workspace or truncated before an implausibly fast step: 3 truncated)" in text
    assert s["sim_publish_delay_median_ms"] == {"scene": 12.25}
    assert "of which the camera's  scene 12.2 ms" in text


def test_summary_helpers_with_no_data():
    assert np.isnan(achieved_rate_hz([])) and np.isnan(achieved_rate_hz([5]))
    assert all(np.isnan(percentiles_ms([])))
    assert np.isnan(joint_motion_rad({}, {"joint1": 1.0}))
    assert latencies_s([1_000_000_000], [1_250_000_000])[0] == pytest.approx(0.25)
    text = format_summary(RunRecord())
    assert "n/a" in text and "no chunk received" in text


@pytest.mark.ros
def test_recording_round_trip(tmp_path):
    import yaml
    from mcap.reader import make_reader
    from rclpy.serialization import deserialize_message, serialize_message
    from rosbags.rosbag2 import Reader
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from para_msgs.msg import ActionChunk
    from para_ros.bag.recording import McapRecorder, make_typestore, ros_type_name

    topics = {
        "/joint_trajectory": ros_type_name(JointTrajectory),
        "/para/action_chunk": ros_type_name(ActionChunk),
        "/joint_states": ros_type_name(JointState),
    }
    assert topics["/para/action_chunk"] == "para_msgs/msg/ActionChunk"
    recorder = McapRecorder(tmp_path / "bag", topics)
    cmd = JointTrajectory(joint_names=["joint1", "gripper"], points=[JointTrajectoryPoint(positions=[0.5, 0.25])])
    chunk = ActionChunk(model_id="m", gripper=[0.5, 1.0])
    cmd_bytes, chunk_bytes = serialize_message(cmd), serialize_message(chunk)  # (padding bytes vary per call)
    recorder.write("/joint_trajectory", 10, cmd_bytes)
    recorder.write("/para/action_chunk", 20, chunk_bytes)
    recorder.close()
    recorder.write("/joint_trajectory", 30, serialize_message(cmd))  # after close: ignored, no error
    assert [p.suffix for p in recorder.mcap_files()] == [".mcap"]
    metadata = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["storage_identifier"] == "mcap" and metadata["message_count"] == 2
    with open(recorder.mcap_files()[0], "rb") as f:  # the mcap library's own reader: a valid ROS 2 MCAP file
        mcap_reader = make_reader(f)
        profile = mcap_reader.get_header().profile
        summary = mcap_reader.get_summary()
    assert profile == "ros2"
    assert {c.topic: c.message_encoding for c in summary.channels.values()} == {
        "/joint_trajectory": "cdr",
        "/para/action_chunk": "cdr",
        "/joint_states": "cdr",
    }
    with Reader(tmp_path / "bag") as reader:  # the bytes come back unchanged, and deserialize as the ROS types
        got = [(c.topic, c.msgtype, t, bytes(raw)) for c, t, raw in reader.messages()]
    assert [g[:3] for g in got] == [
        ("/joint_trajectory", "trajectory_msgs/msg/JointTrajectory", 10),
        ("/para/action_chunk", "para_msgs/msg/ActionChunk", 20),
    ]
    assert got[0][3] == cmd_bytes and got[1][3] == chunk_bytes
    assert list(deserialize_message(got[0][3], JointTrajectory).points[0].positions) == [0.5, 0.25]
    back = deserialize_message(got[1][3], ActionChunk)
    assert back.model_id == "m" and list(back.gripper) == [0.5, 1.0]
    assert "para_msgs/msg/ActionChunk" in make_typestore().fielddefs  # the bag's schema for the project's type


@pytest.mark.ros
def test_monitor_hears_best_effort_sensor_publishers():
    """Camera and joint-state drivers are often best effort: the monitor (and so the recording) must still hear them."""
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from ros_helpers import wait_for
    from sensor_msgs.msg import JointState

    from para_ros.deploy.monitor import DeployMonitor

    monitor = DeployMonitor(recorder=None)
    rclpy.init()
    try:
        node = rclpy.create_node("best_effort_joint_driver")
        pub = node.create_publisher(JointState, "/joint_states", qos_profile_sensor_data)

        def publish_and_check():
            pub.publish(JointState(name=["joint1"], position=[0.1]))
            time.sleep(0.05)
            return monitor.data.joint_state_count > 0

        wait_for(publish_and_check, 10, what="the monitor to hear a best-effort /joint_states")
        node.destroy_node()
    finally:
        rclpy.shutdown()
        monitor.stop()
