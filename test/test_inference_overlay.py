"""The inference node's optional overlay image topic (calibration check, live): the first view with the tool frame
from TF and the predicted path drawn; every drawn pixel lies near cv2's projection of the tool or of the path."""

import cv2
import numpy as np
import pytest
from ros_helpers import wait_for
from test_inference_node import IMG, SEED, T_EE, T_SCENE, K, chunk_positions, running_inference_node

from para_ros.ros_io.synthetic_rig import synthetic_images

pytestmark = pytest.mark.ros


def _project(points):
    T_cw = np.linalg.inv(T_SCENE)
    uv, _ = cv2.projectPoints(
        np.asarray(points, dtype=np.float64).reshape(-1, 3), cv2.Rodrigues(T_cw[:3, :3])[0], T_cw[:3, 3], K, None
    )
    return uv.reshape(-1, 2)


def test_overlay_draws_the_tool_frame_and_the_path_where_they_project():
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image

    images = []
    with running_inference_node(
        f"random_seed:={SEED}", "max_observation_age_s:=1.0", "tf_timeout_s:=0.2", "overlay_topic:=/para/overlay"
    ) as rig:
        rig.node.create_subscription(Image, "/para/overlay", images.append, QoSProfile(depth=5))
        stamp = rig.now_ns()
        rig.publish_observation(stamp)
        chunk = rig.wait_chunk_with_stamp(stamp)
        wait_for(lambda: any(i.header.stamp == chunk.header.stamp for i in images), 10, what="the overlay image")
    msg = next(i for i in images if i.header.stamp == chunk.header.stamp)
    assert (msg.width, msg.height, msg.encoding) == (IMG, IMG, "rgb8")
    assert msg.header.frame_id == "scene_cam_optical_frame"
    drawn = np.frombuffer(bytes(msg.data), np.uint8).reshape(IMG, IMG, 3).astype(int)
    raw = synthetic_images(SEED, IMG)["scene"].astype(int)
    assert np.abs(drawn - raw).max(axis=2).astype(bool).sum() > 10
    tool = _project(T_EE[:3, 3])[0]  # OpenCV pixel coordinates (centres at integers)
    path = _project(np.vstack([T_EE[:3, 3], chunk_positions(chunk)]))
    # the tool ring (magenta) is centred on cv2's projection of the tool frame from TF
    ring = np.argwhere(
        (drawn[..., 0] > 150) & (drawn[..., 1] < 90) & (drawn[..., 2] > 150) & (np.abs(drawn - raw).max(axis=2) > 40)
    )[:, ::-1]
    assert len(ring) >= 6
    # the ring's centre from a least-squares circle through its pixels (x^2 + y^2 + a x + b y + c = 0): the path drawn
    # over an arc of it moves the mean of what is left, not the circle the rest lies on
    xy = ring.astype(float)
    A = np.column_stack([xy, np.ones(len(xy))])
    a, b, _ = np.linalg.lstsq(A, -(xy**2).sum(axis=1), rcond=None)[0]
    np.testing.assert_allclose([-a / 2.0, -b / 2.0], tool, atol=1.0)

    def dist_to_segments(p, pts):
        d = []
        for a, b in zip(pts[:-1], pts[1:]):
            ab = b - a
            t = np.clip(np.dot(p - a, ab) / max(np.dot(ab, ab), 1e-12), 0, 1)
            d.append(np.linalg.norm(p - (a + t * ab)))
        return min(d)

    # the path (yellow) lies on cv2's projection of the tool -> step polyline
    yellow = np.argwhere(
        (drawn[..., 0] > 200) & (drawn[..., 1] > 170) & (drawn[..., 2] < 80) & (np.abs(drawn - raw).max(axis=2) > 40)
    )[:, ::-1]
    assert len(yellow) >= 4
    for p in yellow:
        assert dist_to_segments(p + 0.0, path) <= 3.0, f"path pixel {p} off the projected path {path}"
