"""ROS-free pieces of the inference node: pairing rules, the CameraInfo boundary, rviz messages."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo
from std_msgs.msg import Header

from para_ros.observation.camera_model import (
    camera_info_fields,
    distortion_ignored,
    intrinsics_from_camera_info,
    para_K_to_ros,
    ros_K_to_para,
)
from para_ros.observation.pairing import ObservationPairer
from para_ros.ros_io.rviz import chunk_markers, cloud_to_array, voxel_cloud

MS = 1_000_000


def pairer(**kw):
    return ObservationPairer(
        ("scene", "wrist"), slop_ns=kw.pop("slop", 20 * MS), max_age_ns=kw.pop("age", 500 * MS), **kw
    )


def test_newest_pair_within_slop_wins_and_is_used_once():
    p = pairer()
    for t in (0, 100, 200):
        p.add("scene", t * MS, f"s{t}")
    for t in (5, 110, 260):  # 260 has no scene partner within 20 ms; 110 pairs with 100
        p.add("wrist", t * MS, f"w{t}")
    pair = p.newest_pair(now_ns=300 * MS)
    assert [f.message for f in pair.frames] == ["s100", "w110"] and pair.stamp_ns == 110 * MS
    p.mark_used(pair)
    again = p.newest_pair(now_ns=300 * MS)
    assert again.frames is None and again.problem is None  # nothing new is not an error
    p.release(pair)  # nothing came of it: handed out again
    assert p.newest_pair(now_ns=300 * MS).stamp_ns == 110 * MS


def test_release_gives_back_only_the_pair_last_handed_out():
    p = pairer()
    p.add("scene", 100 * MS, "s1")
    p.add("wrist", 105 * MS, "w1")
    first = p.newest_pair(now_ns=120 * MS)
    p.mark_used(first)
    p.add("scene", 200 * MS, "s2")
    p.add("wrist", 205 * MS, "w2")
    second = p.newest_pair(now_ns=220 * MS)
    p.mark_used(second)
    p.release(first)  # a newer pair was handed out since: ignored
    assert p.newest_pair(now_ns=230 * MS).frames is None
    p.release(second)
    assert p.newest_pair(now_ns=230 * MS).stamp_ns == 205 * MS


def test_out_of_order_and_future_frames_are_dropped_with_a_reason():
    p = pairer(max_future_ns=100 * MS)
    assert p.add("scene", 100 * MS, "a", now_ns=100 * MS) is None
    assert "not newer" in p.add("scene", 50 * MS, "old", now_ns=100 * MS)
    assert "not newer" in p.add("scene", 100 * MS, "same", now_ns=100 * MS)
    assert "in the future" in p.add("scene", 300 * MS, "future", now_ns=100 * MS)
    assert (p.out_of_order_drops, p.future_drops) == (2, 1)
    assert p.newest_stamp_ns("scene") == 100 * MS


def test_silent_camera_and_stale_pairs_name_the_camera():
    p = pairer()
    p.add("scene", 1000 * MS, "s")
    assert "wrist camera lags or is silent" in p.newest_pair(now_ns=1000 * MS).problem
    p.add("wrist", 1000 * MS, "w")
    p.add("scene", 1900 * MS, "s2")  # the wrist stops; the scene goes on
    problem = p.newest_pair(now_ns=1950 * MS).problem  # the old pair (1000, 1000) is stale
    assert "stale pair" in problem and "wrist camera lags or is silent" in problem
    r = pairer()
    r.add("scene", 1000 * MS, "s")
    r.add("wrist", 900 * MS, "w")
    assert "no matching pair" in r.newest_pair(now_ns=1200 * MS).problem
    q = pairer()
    q.add("scene", 0, "s")
    q.add("wrist", 0, "w")
    assert "all cameras are silent" in q.newest_pair(now_ns=900 * MS).problem


def test_a_lagging_camera_is_reported_at_once_not_only_when_stale():
    p = pairer()
    p.add("scene", 1000 * MS, "s")
    p.add("wrist", 1000 * MS, "w")
    p.mark_used(p.newest_pair(now_ns=1000 * MS))
    p.add("scene", 1100 * MS, "s2")  # the wrist stops: the scene frame has no partner, the old pair is used
    assert p.newest_pair(now_ns=1110 * MS).problem is None  # its partner may still be on its way
    problem = p.newest_pair(now_ns=1300 * MS).problem  # overdue: more than slop + grace after its stamp
    assert "no matching pair" in problem and "wrist camera lags or is silent" in problem
    q = pairer()  # a still-unused older pair is used first, the unpaired newer frame waits for its partner
    q.add("scene", 1000 * MS, "s")
    q.add("wrist", 1000 * MS, "w")
    q.add("scene", 1100 * MS, "s2")
    assert q.newest_pair(now_ns=1100 * MS).frames is not None


def test_history_is_bounded():
    p = pairer(history=2)
    for t in (0, 30, 60):
        p.add("scene", t * MS, t)
    p.add("wrist", 0, "w0")  # its partner (scene 0) has left the 2-frame history
    assert p.newest_pair(now_ns=60 * MS).frames is None


def info_for(K_para, width=64, height=48, d=None):
    info = CameraInfo(width=width, height=height, **camera_info_fields(K_para))
    if d is not None:
        info.d = d
    return info


def test_camera_info_pixel_convention_matches_opencv():
    """A point projected by cv2 with the published K lands 0.5 px before para_core's convention, on both axes."""
    K_para = np.array([[50.0, 0, 32.0], [0, 50.0, 24.0], [0, 0, 1]])
    info = info_for(K_para)
    K_ros = np.array(info.k).reshape(3, 3)
    assert (K_ros[0, 2], K_ros[1, 2]) == (31.5, 23.5)  # (W - 1) / 2, (H - 1) / 2 for a centred camera
    uv_cv = cv2.projectPoints(np.array([[0.1, -0.05, 1.0]]), np.zeros(3), np.zeros(3), K_ros, None)[0].ravel()
    uv_para = (K_para @ np.array([0.1, -0.05, 1.0]))[:2]
    np.testing.assert_allclose(uv_para - uv_cv, [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(intrinsics_from_camera_info(info, 64, 48), K_para, atol=1e-12)
    np.testing.assert_allclose(intrinsics_from_camera_info(info, 64, 48, matrix="p"), K_para, atol=1e-12)
    np.testing.assert_allclose(ros_K_to_para(para_K_to_ros(K_para)), K_para, atol=1e-12)


@pytest.mark.parametrize(
    "k, text",
    [([0.0] * 9, "all zeros"), ([np.inf] + [0.0] * 8, "non-finite"), ([-5.0, 0, 1, 0, 5, 1, 0, 0, 1], "not a pinhole")],
)
def test_bad_camera_info_is_refused(k, text):
    info = info_for(np.eye(3))
    info.k = k
    with pytest.raises(ValueError, match=text):
        intrinsics_from_camera_info(info, 64, 48)
    with pytest.raises(ValueError, match="its CameraInfo says 64x48"):
        intrinsics_from_camera_info(info_for(np.diag([50.0, 50.0, 1.0])), 32, 24)
    with pytest.raises(ValueError, match="camera_matrix"):
        intrinsics_from_camera_info(info_for(np.diag([50.0, 50.0, 1.0])), 64, 48, matrix="q")


def test_distortion_is_reported_not_silently_ignored():
    K = np.diag([50.0, 50.0, 1.0])
    assert distortion_ignored(info_for(K)) is None
    assert "image_rect" in distortion_ignored(info_for(K, d=[0.1, 0, 0, 0, 0]))
    assert distortion_ignored(info_for(K, d=[0.1, 0, 0, 0, 0]), matrix="p") is None


def test_markers_and_cloud_carry_the_decoded_points():
    header = Header(frame_id="base")
    pos = np.array([[0.3, 0.0, 0.1], [0.32, 0.01, 0.09], [0.35, 0.02, 0.08]])
    conf = np.array([0.9, 0.5, 0.1])
    markers = chunk_markers(header, pos, conf, ee_position_world=np.array([0.29, 0.0, 0.12]))
    steps, path, ee = markers.markers
    np.testing.assert_allclose([[p.x, p.y, p.z] for p in steps.points], pos)
    assert [c.a for c in steps.colors] == pytest.approx([0.9, 0.5, 0.25])  # alpha = confidence, at least 0.25
    assert len(path.points) == 4 and (path.points[0].x, path.points[0].z) == (0.29, 0.12)
    assert (ee.pose.position.x, ee.header.frame_id) == (0.29, "base")
    by_conf = chunk_markers(header, pos, conf, np.zeros(3), color_by="confidence").markers[0]
    assert by_conf.colors[0].g == pytest.approx(0.9) and by_conf.colors[2].r == pytest.approx(0.9)
    probs = np.array([0.5, 0.3, 0.2])
    cloud = voxel_cloud(header, pos, probs)
    assert (cloud.width, cloud.point_step, [f.name for f in cloud.fields]) == (3, 16, ["x", "y", "z", "probability"])
    np.testing.assert_allclose(cloud_to_array(cloud), np.c_[pos, probs], atol=1e-7)
