"""para_ros.bag.reader on real rosbag2 files (mcap and sqlite3) written with rosbags; truth from bag_fixtures."""

import numpy as np
import pytest
from bag_fixtures import (
    K_IMAGE,
    NS,
    T0_NS,
    T_SCENE,
    SyntheticBagSpec,
    camera_stamps_ns,
    reference_ee_pose,
    reference_gripper,
    reference_wrist_pose,
    write_synthetic_bag,
)

from para_ros.bag.reader import BagError, BagReader, BagTopicConfig, select_by_fps

# Scene frame 5 missing, a stale wrist frame after wrist frame 8, scene frame 12 stamped 60 ms late (> 50 ms slop).
ANOMALIES = dict(missing_scene_frames=(5,), out_of_order_after_wrist=(8,), scene_jitter_s={12: 0.06})


def expected_pairs(spec):
    """By hand, from the node's rules (newest pair within 50 ms, each pair once, out-of-order frames dropped):

    * wrist k pairs with scene k (3 ms earlier, each other's nearest) -> observation at wrist k's stamp;
    * k = 5: no scene frame within 50 ms of wrist 5 -> no observation;
    * k = 12: scene 12 is 57 ms after wrist 12 -> no pair; wrist 13 is 43 ms after scene 12, inside the slop, but
      scene 13 (3 ms before it) is its nearest: (scene 13, wrist 13), never (scene 12, wrist 13);
    * the late wrist frame (stamped 50 ms before wrist 8, received after it) is dropped as out of order.
    Returns {observation stamp: (scene frame index, wrist frame index)}.
    """
    scene, wrist = camera_stamps_ns(spec)
    pairs = {}
    for k, s in wrist.items():
        if k in (5, 12):
            continue
        pairs[s] = (k, k)
    return pairs, scene, wrist


@pytest.fixture(scope="module", params=["mcap", "sqlite3"])
def anomalous_bag(request, tmp_path_factory):
    spec = SyntheticBagSpec(storage=request.param, **ANOMALIES)
    return write_synthetic_bag(tmp_path_factory.mktemp(request.param) / "bag", spec), spec


def test_observations_are_the_nodes_pairs_with_the_true_poses(anomalous_bag):
    path, spec = anomalous_bag
    pairs, scene, wrist = expected_pairs(spec)
    tf_end_ns = T0_NS + int(spec.duration_s * NS)
    with BagReader(path) as bag:
        assert bag.image_topics == {"scene": "/scene_cam/image_raw", "wrist": "/wrist_cam/image_raw/compressed"}
        observations = list(bag.observations())
        stats = bag.stats
    # The last wrist frame (2.003 s) is after the last TF sample (2.0 s): its pair is dropped for missing TF.
    expected = sorted(s for s in pairs if s <= tf_end_ns)
    assert [o.stamp_ns for o in observations] == expected
    assert stats.pairs == len(pairs) and stats.observations == len(expected)
    assert stats.out_of_order_drops == 1 and stats.dropped["tf"] == 1
    assert stats.frames_in["wrist"] == len(wrist) + 1 and stats.frames_in["scene"] == len(scene)
    for obs in observations:
        k_scene, k_wrist = pairs[obs.stamp_ns]
        assert obs.image_stamps_ns == (scene[k_scene], wrist[k_wrist])
        assert obs.view_names == ("scene", "wrist")
        scene_cam, wrist_cam = obs.cameras
        assert int(scene_cam.image_rgb[0, 0, 0]) == (7 * k_scene) % 256  # raw rgb8: exact
        assert abs(int(wrist_cam.image_rgb[5, 5, 0]) - (7 * k_wrist) % 256) <= 3  # jpeg
        assert scene_cam.image_rgb.shape == (spec.image_wh[1], spec.image_wh[0], 3)
        np.testing.assert_allclose(scene_cam.K, K_IMAGE(spec), atol=1e-12)
        np.testing.assert_allclose(wrist_cam.K, K_IMAGE(spec), atol=1e-12)
        np.testing.assert_allclose(scene_cam.T_world_cam, T_SCENE(), atol=1e-6)
        # The wrist camera is looked up at ITS image stamp (3 ms after the scene frame: interpolated TF).
        np.testing.assert_allclose(wrist_cam.T_world_cam, reference_wrist_pose(spec, obs.image_stamps_ns[1]), atol=1e-6)
        np.testing.assert_allclose(obs.T_world_ee, reference_ee_pose(spec, obs.stamp_ns), atol=1e-6)
        assert obs.gripper == pytest.approx(reference_gripper(spec, obs.stamp_ns), abs=1e-12)
        assert obs.camera_frames == ("scene_cam_optical_frame", "wrist_cam_optical_frame")
    assert {o.gripper for o in observations} >= {0.0, 1.0}  # the gripper closes during the recording


def test_pair_stamps_and_selection(anomalous_bag):
    path, spec = anomalous_bag
    pairs, _, _ = expected_pairs(spec)
    with BagReader(path) as bag:
        assert bag.pair_stamps() == sorted(pairs)
        assert bag.stats.pairs == 0  # the cheap pass does not count
        chosen = sorted(pairs)[2:5]
        assert [o.stamp_ns for o in bag.observations(set(chosen))] == chosen


def test_past_positions_follow_the_node_rule(anomalous_bag):
    path, spec = anomalous_bag
    dt = 4 / 30
    with BagReader(path) as bag:
        first = T0_NS + 3_000_000
        current = np.array([9.0, 9.0, 9.0])
        # Before the TF data starts: the current position is repeated.
        np.testing.assert_array_equal(bag.past_positions(first, 2, dt, current), [current, current])
        # One step back exists, two steps back do not: the oldest known one fills the gap.
        t = T0_NS + 200_000_000
        past = bag.past_positions(t, 2, dt, current)
        p1 = reference_ee_pose(spec, t - int(round(dt * 1e9)))[:3, 3]
        np.testing.assert_allclose(past, [p1, p1], atol=1e-9)
        t = T0_NS + 1_000_000_000
        past = bag.past_positions(t, 2, dt, current)
        for row, k in zip(past, (2, 1)):
            np.testing.assert_allclose(row, reference_ee_pose(spec, t - int(round(k * dt * 1e9)))[:3, 3], atol=1e-9)


def test_raw_wrist_images_and_forced_transport(tmp_path):
    path = write_synthetic_bag(tmp_path / "raw", SyntheticBagSpec(wrist_compressed=False, duration_s=0.5))
    with BagReader(path) as bag:
        assert bag.image_topics["wrist"] == "/wrist_cam/image_raw"
        obs = list(bag.observations())
    assert len(obs) == 5
    assert int(obs[2].cameras[1].image_rgb[0, 0, 0]) == 14  # raw: exact colour of frame 2
    with pytest.raises(BagError, match=r"'/scene_cam/image_raw/compressed'.*The bag has: .*/scene_cam/image_raw"):
        BagReader(path, BagTopicConfig(image_transport="compressed"))


def test_cameras_10_5_ms_apart_at_30_hz_pair_with_their_nearest_partner(tmp_path):
    """A recording from another tool: the wrist camera 10.5 ms after the scene camera, both at 30 Hz. Every pair
    must be each other's nearest frames over the whole bag (brute force), 10.5 ms apart, never the 43.8 ms partner."""
    spec = SyntheticBagSpec(camera_rate_hz=30.0, wrist_delay_s=0.0105, duration_s=1.5, wrist_compressed=False)
    path = write_synthetic_bag(tmp_path / "foreign", spec)
    scene, wrist = camera_stamps_ns(spec)
    scene_all, wrist_all = np.array(sorted(scene.values())), np.array(sorted(wrist.values()))
    with BagReader(path) as bag:
        pairs = list(bag.pairs())
        observations = list(bag.observations())
    assert len(pairs) == len(scene)
    for pair in pairs:
        s, w = pair.image_stamps_ns
        assert wrist_all[np.argmin(np.abs(wrist_all - s))] == w and scene_all[np.argmin(np.abs(scene_all - w))] == s
        assert pair.gap_ns == w - s == 10_500_000
    assert {o.pair_gap_ns for o in observations} == {10_500_000}


@pytest.mark.parametrize(
    "skip, pattern",
    [
        (
            "/wrist_cam/camera_info",
            r"no topic '/wrist_cam/camera_info' \(wrist CameraInfo\).*The bag has: .*"
            r"/scene_cam/camera_info \(sensor_msgs/msg/CameraInfo",
        ),
        (
            "/wrist_cam/image_raw/compressed",
            r"no wrist camera images on '/wrist_cam/image_raw' or "
            r"'/wrist_cam/image_raw/compressed'",
        ),
    ],
)
def test_missing_topics_name_what_the_bag_has(tmp_path, skip, pattern):
    path = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=0.3, skip_topics=(skip,)))
    with pytest.raises(BagError, match=pattern):
        BagReader(path)


def test_missing_tf_frame_lists_the_known_frames(tmp_path):
    path = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=0.3, ee_frame="tool0"))
    with pytest.raises(
        BagError,
        match=r"end-effector \(ee_frame\) frame 'grasp_site'.*Frames in the bag's TF: "
        r"\[.*'tool0'",
    ):
        BagReader(path)
    with BagReader(path, BagTopicConfig(ee_frame="tool0")) as bag:  # the fix the message suggests works
        assert len(list(bag.observations())) == 3
    path = write_synthetic_bag(tmp_path / "no_tf", SyntheticBagSpec(duration_s=0.3, skip_topics=("/tf", "/tf_static")))
    with pytest.raises(BagError, match="neither '/tf' nor '/tf_static'"):
        BagReader(path)


def test_empty_unreadable_and_missing_bags(tmp_path):
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    empty = tmp_path / "empty"
    with Writer(empty, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        w.add_connection("/scene_cam/image_raw", "sensor_msgs/msg/Image", typestore=get_typestore(Stores.ROS2_KILTED))
    with pytest.raises(BagError, match="is empty"):
        BagReader(empty)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.yaml").write_text("this: is: not a rosbag2 metadata file\n")
    with pytest.raises(BagError, match="cannot read bag"):
        BagReader(broken)
    with pytest.raises(BagError, match="does not exist"):
        BagReader(tmp_path / "nope")
    stray = tmp_path / "x.mcap"
    stray.write_bytes(b"\x89MCAP0\r\n")
    with pytest.raises(BagError, match="without a metadata.yaml"):
        BagReader(stray)


def test_select_by_fps_by_hand():
    ms = 1_000_000
    # 30 fps-ish stamps with jitter -> 10 fps: nearest to 0, 100, 200 ms.
    stamps = [s * ms for s in (0, 30, 70, 98, 130, 170, 203)]
    assert select_by_fps(stamps, 10.0) == [0, 98 * ms, 203 * ms]
    # A gap: nothing within 50 ms of 200 ms; 350 is exactly half a period from 300 and kept there; 400 exact.
    assert select_by_fps([s * ms for s in (0, 100, 350, 400)], 10.0) == [0, 100 * ms, 350 * ms, 400 * ms]
    assert select_by_fps([5, 1, 3], 0) == [1, 3, 5]  # fps 0: keep everything, sorted


def test_config_from_the_inference_yaml_and_validation():
    cfg = BagTopicConfig.from_inference_yaml()
    assert cfg.image_topics == {"scene": "/scene_cam/image_raw", "wrist": "/wrist_cam/image_raw"}
    assert cfg.info_topics["wrist"] == "/wrist_cam/camera_info"
    assert (cfg.world_frame, cfg.ee_frame, cfg.gripper_joint, cfg.pair_slop_s) == (
        "base",
        "grasp_site",
        "gripper",
        0.05,
    )
    assert BagTopicConfig.from_inference_yaml(ee_frame="tool0").ee_frame == "tool0"
    with pytest.raises(ValueError, match="image_transport"):
        BagTopicConfig(image_transport="theora")
    with pytest.raises(ValueError, match="pair_slop_s"):
        BagTopicConfig(pair_slop_s=-1.0)
