"""One observation path for live and recorded data: the inference node and the bag reader, fed the SAME
messages, build identical observations, because both call :func:`para_ros.observation.builder.build_observation`.

The node path is the real ``InferenceNode`` (rclpy, its TF buffer, its joint-state callback) fed the bag's own bytes
deserialised by rclpy; the bag path is :class:`para_ros.bag.reader.BagReader`. Also the builder's rules by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bag_fixtures import SyntheticBagSpec, reference_ee_pose, reference_gripper, write_synthetic_bag

from para_ros.observation.builder import GripperHistory, ObservationProblem, ObservationSettings, gripper_opening


def _rclpy_messages(bag_dir):
    """(log ns, topic, rclpy message) of every message of the bag, in log order, deserialised by rclpy itself."""
    import importlib

    from rclpy.serialization import deserialize_message
    from rosbags.highlevel import AnyReader

    def message_class(msgtype: str):  # "sensor_msgs/msg/Image" -> sensor_msgs.msg.Image
        package, _, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.msg"), name)

    out = []
    with AnyReader([Path(bag_dir)]) as reader:
        for conn, log_ns, raw in reader.messages():
            out.append((log_ns, conn.topic, deserialize_message(raw, message_class(conn.msgtype))))
    return out


@pytest.fixture(scope="module")
def node():
    from ros_helpers import in_process_inference_node

    # the fixture bag's wrist camera is jpeg: compressed transport
    yield from in_process_inference_node(
        "observation_builder_test", random_seed=1, publish_pointcloud=False, image_transport="compressed"
    )


def test_node_and_bag_reader_build_identical_observations_from_the_same_messages(tmp_path, node):
    from para_ros.bag.reader import BagReader, BagTopicConfig
    from para_ros.observation.pairing import Frame, PairResult
    from para_ros.stamps import stamp_to_ns

    spec = SyntheticBagSpec(duration_s=1.5, wrist_distortion=(0.01, 0.0, 0.0, 0.0, 0.0))
    bag_dir = write_synthetic_bag(tmp_path / "bag", spec)
    cfg = node.policy.config
    assert cfg.mv_past_n > 0  # the history is part of what is compared
    with BagReader(bag_dir, BagTopicConfig()) as bag:
        recorded = list(bag.observations(past_n=cfg.mv_past_n, step_dt_s=cfg.step_dt_s))
        summary = bag.stats.summary()
    assert len(recorded) >= 10
    assert "distortion.wrist" in summary  # the bag path now reports what the node reports

    # The node: the same bytes, through its own callbacks and TF buffer.
    images = {}  # (view, stamp ns) -> rclpy image message
    topic_view = {"/scene_cam/image_raw": "scene", "/wrist_cam/image_raw/compressed": "wrist"}
    for _, topic, msg in _rclpy_messages(bag_dir):
        if topic in ("/tf", "/tf_static"):
            for t in msg.transforms:
                if topic == "/tf_static":
                    node.tf_buffer.set_transform_static(t, "bag")
                else:
                    node.tf_buffer.set_transform(t, "bag")
        elif topic.endswith("camera_info"):
            node._on_info(topic.split("/")[1].split("_")[0], msg)
        elif topic == "/joint_states":
            node._on_joint_states(msg)
        elif topic in topic_view:
            images[(topic_view[topic], stamp_to_ns(msg.header.stamp))] = msg
    infos = dict(node.pipeline.camera_info)
    for obs in recorded:
        frames = tuple(Frame(s, images[(view, s)]) for view, s in zip(obs.view_names, obs.image_stamps_ns))
        pair = PairResult(frames=frames)
        cameras, state = node.pipeline.build_observation(pair, infos, node.poses.frame_pose, node.poses.ee_pose)
        for live, rec in zip(cameras, obs.cameras):
            np.testing.assert_array_equal(live.image_rgb, rec.image_rgb)
            np.testing.assert_array_equal(live.K, rec.K)
            np.testing.assert_array_equal(live.T_world_cam, rec.T_world_cam)
        np.testing.assert_array_equal(state.T_world_ee, obs.state.T_world_ee)
        np.testing.assert_array_equal(state.past_positions_world, obs.state.past_positions_world)
        assert state.gripper == obs.state.gripper
        assert tuple(node.pipeline.camera_frames[v] for v in obs.view_names) == obs.camera_frames
    # ... and both are right (independent references: the fixture's analytic truth).
    last = recorded[-1]
    np.testing.assert_allclose(last.T_world_ee, reference_ee_pose(spec, last.stamp_ns), atol=1e-6)
    assert last.gripper == pytest.approx(reference_gripper(spec, last.stamp_ns), abs=1e-9)
    step_ns = int(round(cfg.step_dt_s * 1e9))
    for k, past in zip(range(cfg.mv_past_n, 0, -1), last.state.past_positions_world):
        np.testing.assert_allclose(past, reference_ee_pose(spec, last.stamp_ns - k * step_ns)[:3, 3], atol=1e-6)
    keys = {kv.key for kv in node.health.status().values}
    assert "problem.distortion.wrist" in keys and "problem.distortion.scene" not in keys


def test_gripper_opening_and_settings_rules():
    s = ObservationSettings(gripper_joint="g", gripper_open_position=0.04)
    assert gripper_opening(["a", "g"], [1.0, 0.02], s) == pytest.approx(0.5)
    assert gripper_opening(["a", "g"], [1.0, 0.09], s) == 1.0  # clipped
    assert gripper_opening(["a", "g"], [1.0, -0.01], s) == 0.0
    assert gripper_opening(["a", "g"], [1.0, float("nan")], s) is None
    assert gripper_opening(["a", "g"], [1.0], s) is None  # fewer positions than names
    assert gripper_opening(["a"], [1.0], s) is None
    for bad in (0.0, -0.04, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="gripper_open_position"):
            ObservationSettings(gripper_open_position=bad)
    with pytest.raises(ValueError, match="camera_matrix"):
        ObservationSettings(camera_matrix="q")


def test_gripper_history_clears_live_and_inserts_recorded():
    live = GripperHistory(on_time_back="clear")
    for t, v in ((10, 0.1), (20, 0.2), (30, 0.3)):
        live.add(t, v)
    assert (live.at(5), live.at(10), live.at(25), live.at(99)) == (0.1, 0.1, 0.2, 0.3)
    live.add(15, 0.9)  # time went back: the old time line is gone
    assert len(live) == 1 and live.at(30) == 0.9
    rec = GripperHistory(on_time_back="insert")
    for t, v in ((10, 0.1), (30, 0.3), (20, 0.2)):
        rec.add(t, v)
    assert rec.stamps_ns == [10, 20, 30] and rec.at(25) == 0.2
    capped = GripperHistory(max_len=2)
    for t in (1, 2, 3):
        capped.add(t, t / 10)
    assert capped.stamps_ns == [2, 3]
    assert GripperHistory().at(5) is None


def test_builder_names_the_camera_and_key_of_the_first_failure():
    from para_ros.observation.builder import build_observation

    class Info:
        def __init__(self, w=4, h=3):
            self.width, self.height = w, h
            self.k = [2.0, 0, 1.5, 0, 2.0, 1.0, 0, 0, 1.0]
            self.p = self.k[:3] + [0.0] + self.k[3:6] + [0.0] + self.k[6:] + [0.0]
            self.d = [0.0] * 5
            self.header = type("H", (), {"frame_id": "cam"})()

    from sensor_msgs.msg import Image

    img = Image(height=3, width=4, encoding="rgb8", step=12, data=bytes(36))
    img.header.frame_id = "cam_img"
    eye = lambda *a: np.eye(4)  # noqa: E731
    settings = ObservationSettings(view_names=("scene",), past_n=2)
    obs = build_observation(settings, 100, [(img, 100)], [Info()], eye, eye, gripper=None)
    assert obs.camera_frames == ("cam",) and obs.gripper == 1.0 and "gripper" in obs.notes
    assert obs.state.past_positions_world.shape == (2, 3)
    with pytest.raises(ObservationProblem, match="no CameraInfo received on /i yet: cannot place the scene") as e:
        build_observation(settings, 100, [(img, 100)], [None], eye, eye, None, info_sources=["/i"])
    assert e.value.key == "camera_info"
    with pytest.raises(ObservationProblem, match="scene camera: image is 4x3 but its CameraInfo says 5x3") as e:
        build_observation(settings, 100, [(img, 100)], [Info(w=5)], eye, eye, None)
    assert e.value.key == "camera_info"

    def no_tf(frame, stamp_ns, wait):
        raise ObservationProblem("tf", f"no TF base <- {frame}")

    with pytest.raises(ObservationProblem, match="scene camera pose: no TF base <- cam") as e:
        build_observation(settings, 100, [(img, 100)], [Info()], no_tf, eye, None)
    assert e.value.key == "tf"
