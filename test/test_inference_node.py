"""inference_node in its own process over real DDS: chunks, markers, TF-at-stamp, and every bad-input case.

The test process plays the robot rig (two cameras, CameraInfo, TF, joint states). Expected chunks come from
``para_core.model.policy.Policy`` run here on the same observation (same random weights by seed), and the geometry of the
result is checked independently with ``cv2.projectPoints`` and the workspace box.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import cv2
import numpy as np
import pytest
from ros_helpers import start_python, stop_process, wait_for

from para_ros.ros_io.synthetic_rig import SyntheticRig, synthetic_images

pytestmark = pytest.mark.ros

SEED = 3
IMG = 64
K = np.array([[60.0, 0, 32.0], [0, 60.0, 32.0], [0, 0, 1.0]])


def look_at(eye, target) -> np.ndarray:
    """T_world_cam of an OpenCV camera at ``eye`` looking at ``target`` (x right, y down, z forward)."""
    eye = np.asarray(eye, float)
    z = np.asarray(target, float) - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, [0, 0, 1.0])
    if np.linalg.norm(x) < 1e-6:
        x = np.array([0.0, -1.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, :3] = np.stack([x, y, z], axis=1)
    T[:3, 3] = eye
    return T


T_SCENE = look_at([0.3, 0.0, 1.0], [0.3, 0.0, 0.0])
T_WRIST = look_at([0.35, 0.05, 0.22], [0.36, 0.05, 0.0])
T_EE = np.eye(4)
T_EE[:3, 3] = [0.35, 0.05, 0.12]


def Rig() -> SyntheticRig:  # noqa: N802 - the rig of this module's poses and seed
    return SyntheticRig(T_SCENE, T_WRIST, T_EE, seed=SEED, image_size=IMG, K=K)


@contextmanager
def running_inference_node(*params: str, rig_factory=None, output: list | None = None):
    """An inference_node process with ``-p`` ``params`` and a rig (this process's ROS context) talking to it.
    It decodes with ``argmax`` unless ``params`` say otherwise: the chunks are compared with ``Policy``'s reference
    (``expected_output``), and the node's default (``auto``: fused) depends on the chunks before.

    ``output``: a list that receives the node's stdout/stderr once it stopped."""
    import rclpy

    args = ["para_ros.nodes.inference_node", "--ros-args"]
    if not any(p.startswith("decoding:=") for p in params):
        params = (*params, "decoding:=argmax")
    for p in params:
        args += ["-p", p]
    proc = start_python(args, module=True)
    try:
        rclpy.init()
        r = (rig_factory or Rig)()
        r.publish_static_scene()
        # the node is up once it publishes /diagnostics (once a second)
        wait_for(
            lambda: any(s.name.startswith("para: inference") for d in r.diagnostics for s in d.status),
            60,
            what="the inference node to come up",
        )
        yield r
    finally:
        if "r" in locals():
            r.close()
        if rclpy.ok():
            rclpy.shutdown()
        rc, out = stop_process(proc, timeout_s=10)
        print(out[-4000:])
        if output is not None:
            output.append(out)
        assert rc is not None, "inference node did not stop on SIGINT"


@pytest.fixture(scope="module")
def rig():
    with running_inference_node(f"random_seed:={SEED}", "max_observation_age_s:=1.0", "tf_timeout_s:=0.2") as r:
        yield r


def expected_output(T_scene=T_SCENE, T_wrist=T_WRIST):
    from para_core.model.config import V4Config
    from para_core.model.policy import CameraObservation, Policy, RobotState

    policy = Policy.random_init(V4Config.tiny(), seed=SEED)
    cams = [
        CameraObservation(r_img, K, T)
        for r_img, T in (
            (synthetic_images(SEED, IMG)["scene"], T_scene),
            (synthetic_images(SEED, IMG)["wrist"], T_wrist),
        )
    ]
    state = RobotState(T_EE, 0.8, np.tile(T_EE[:3, 3], (policy.config.mv_past_n, 1)))
    return policy, policy.predict(cams, state)


def chunk_positions(chunk) -> np.ndarray:
    return np.array([[p.position.x, p.position.y, p.position.z] for p in chunk.poses])


def test_chunk_from_a_good_observation(rig):
    stamp = rig.now_ns()
    rig.publish_observation(stamp)
    chunk = rig.wait_chunk_with_stamp(stamp)
    policy, expected = expected_output()
    cfg = policy.config
    assert chunk.header.frame_id == "base" and chunk.tool_frame_id == "grasp_site"
    assert len(chunk.poses) == len(chunk.gripper) == len(chunk.confidence) == cfg.n_window
    offsets = [d.sec + d.nanosec * 1e-9 for d in chunk.time_from_stamp]
    np.testing.assert_allclose(offsets, np.arange(cfg.n_window) * cfg.frame_stride / cfg.dataset_fps, atol=1e-9)
    positions = chunk_positions(chunk)
    np.testing.assert_allclose(positions, expected.positions_world, atol=1e-4)
    quats = np.array([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in chunk.poses])
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-9)
    same_sign = np.sign(np.sum(quats * expected.quaternions_xyzw, axis=1, keepdims=True))  # q and -q: one rotation
    np.testing.assert_allclose(quats * same_sign, expected.quaternions_xyzw, atol=1e-4)  # xyzw order kept
    np.testing.assert_allclose(chunk.gripper, expected.gripper, atol=1e-6)
    np.testing.assert_allclose(chunk.confidence, expected.confidence, atol=1e-5)
    assert np.all((np.array(chunk.gripper) >= 0) & (np.array(chunk.gripper) <= 1))
    # Independent checks: inside this observation's voxel volume and workspace box, and in front of / inside the
    # scene camera's image (cv2.projectPoints with the published intrinsics and pose).
    lo, hi = expected.voxel_bounds_world
    assert np.all(positions >= lo - 1e-6) and np.all(positions <= hi + 1e-6)
    assert np.all(positions[:, 0] >= cfg.workspace_x_m[0]) and np.all(positions[:, 0] <= cfg.workspace_x_m[1])
    assert np.all(positions[:, 2] >= cfg.z_lo_m - 1e-6) and np.all(positions[:, 2] <= cfg.z_hi_m + 1e-6)
    T_cam_world = np.linalg.inv(T_SCENE)
    uv, _ = cv2.projectPoints(positions, cv2.Rodrigues(T_cam_world[:3, :3])[0], T_cam_world[:3, 3], K, None)
    assert np.all((uv >= 0) & (uv <= IMG)), uv
    # Markers: one sphere per step at the decoded positions; the path starts at the current EE.
    wait_for(lambda: any(m.markers[0].header.stamp == chunk.header.stamp for m in rig.markers), 5, what="markers")
    markers = next(m for m in rig.markers if m.markers[0].header.stamp == chunk.header.stamp)
    spheres = next(m for m in markers.markers if m.ns == "para_steps")
    np.testing.assert_allclose([[p.x, p.y, p.z] for p in spheres.points], positions, atol=1e-9)
    path = next(m for m in markers.markers if m.ns == "para_path")
    np.testing.assert_allclose([path.points[0].x, path.points[0].y, path.points[0].z], T_EE[:3, 3], atol=1e-9)
    assert rig.clouds, "no voxel point cloud published"
    # diagnostics carry counters and their rates
    wait_for(
        lambda: any(kv.key == "rate_hz.chunks_out" for d in rig.diagnostics for s in d.status for kv in s.values),
        5,
        what="a chunks_out rate in /diagnostics",
    )


def test_camera_pose_is_taken_from_tf_at_the_image_stamp(rig):
    """TF runs ahead of the cameras: the wrist is at pose A at the image stamp and at pose B 0.3 s later (already in
    the buffer). The chunk must use A (TF at the image stamp), not the latest transform; later images use B."""
    T_wrist_b = look_at([0.25, -0.08, 0.25], [0.27, -0.06, 0.0])
    s = rig.now_ns()
    later = s + 300_000_000
    tfs = []
    for k in range(4, -1, -1):
        tfs += [
            rig.transform("base", "wrist_cam_optical_frame", T_WRIST, s - k * 50_000_000),
            rig.transform("base", "grasp_site", T_EE, s - k * 50_000_000),
        ]
    tfs += [
        rig.transform("base", "wrist_cam_optical_frame", T_wrist_b, later),
        rig.transform("base", "grasp_site", T_EE, later),
    ]
    rig.tf.sendTransform(tfs)
    time.sleep(0.1)
    rig.publish_observation(s, skip=("tf",))
    chunk_a = rig.wait_chunk_with_stamp(s)
    while rig.now_ns() < later:
        time.sleep(0.02)
    rig.publish_observation(later, skip=("tf",))
    chunk_b = rig.wait_chunk_with_stamp(later)
    _, expected_a = expected_output(T_wrist=T_WRIST)
    _, expected_b = expected_output(T_wrist=T_wrist_b)
    assert np.abs(expected_a.positions_world - expected_b.positions_world).max() > 1e-3, (
        "test is not sensitive: both wrist poses give the same chunk"
    )
    np.testing.assert_allclose(chunk_positions(chunk_a), expected_a.positions_world, atol=1e-4)
    np.testing.assert_allclose(chunk_positions(chunk_b), expected_b.positions_world, atol=1e-4)


def _expect_rejected(rig, publish, problem_text, timeout_s=3.0):
    """``publish(stamp)`` bad data: no chunk with that stamp, a diagnostics status naming the problem, node alive."""
    stamp = rig.now_ns()
    stamp = publish(stamp) or stamp  # publish may return the stamp of its bad frames
    wait_for(lambda: rig.diagnostics_mention(problem_text), timeout_s + 3, what=f"diagnostics naming '{problem_text}'")
    time.sleep(0.3)
    stamps = {c.header.stamp.sec * 1_000_000_000 + c.header.stamp.nanosec for c in rig.chunks}
    assert stamp not in stamps, f"a chunk was published from bad data ({problem_text})"
    # still alive and working: a good observation afterwards gives a chunk
    good = rig.now_ns()
    rig.publish_observation(good)
    rig.wait_chunk_with_stamp(good)


def test_unsupported_encoding(rig):
    depth = np.zeros((IMG, IMG), np.uint16)
    _expect_rejected(
        rig,
        lambda s: rig.publish_observation(s, images={"scene": rig.image("scene", s, depth, encoding="16UC1")}),
        "not a colour image",
    )


def test_image_size_differs_from_camera_info(rig):
    _expect_rejected(
        rig,
        lambda s: rig.publish_observation(
            s, info={"wrist": rig.camera_info("wrist", s, width=IMG * 2, height=IMG * 2)}
        ),
        "its CameraInfo says",
    )


@pytest.mark.parametrize(
    "bad_K, text",
    [(np.zeros((3, 3)), "all zeros"), (np.array([[np.nan, 0, 32], [0, 60, 32], [0, 0, 1]]), "non-finite")],
)
def test_bad_intrinsics(rig, bad_K, text):
    _expect_rejected(
        rig, lambda s: rig.publish_observation(s, info={"scene": rig.camera_info("scene", s, bad_K)}), text
    )


def test_missing_tf_extrapolation_into_the_future(rig):
    """TF lags: the newest wrist-camera/EE transforms are 0.5 s older than the images. Two samples each, so the
    buffer spans an interval whatever ran before (with one sample tf2 names no direction: the test alone failed)."""

    def publish(s):
        tfs = [
            rig.transform("base", child, T, s - lag_ns)
            for lag_ns in (600_000_000, 500_000_000)
            for child, T in (("wrist_cam_optical_frame", T_WRIST), ("grasp_site", T_EE))
        ]
        rig.tf.sendTransform(tfs)
        time.sleep(0.05)
        rig.publish_observation(s, skip=("tf",))

    _expect_rejected(rig, publish, "xtrapolation into the future")


def test_missing_tf_frame(rig):
    """The CameraInfo names a frame nobody publishes in TF."""

    def publish(s):
        info = rig.camera_info("scene", s)
        info.header.frame_id = "ghost_optical_frame"
        rig.publish_observation(s, info={"scene": info})

    _expect_rejected(rig, publish, "no TF base <- ghost_optical_frame")


def test_image_stamped_in_the_future_is_dropped(rig):
    def publish(s):
        future = s + 5_000_000_000
        for view in ("scene", "wrist"):
            rig.pub[f"{view}_info"].publish(rig.camera_info(view, future))
            rig.pub[view].publish(rig.image(view, future))
        return future

    _expect_rejected(rig, publish, "in the future")


@pytest.mark.parametrize(
    "child, field, value, text",
    [
        ("wrist_cam_optical_frame", "rotation.w", 2.0, "non-unit quaternion"),
        ("grasp_site", "translation.x", float("nan"), "non-finite"),
    ],
)
def test_bad_transform_in_tf(rig, child, field, value, text):
    """A transform with a non-unit quaternion or a NaN is refused by the buffer, and the node says which and why."""
    from geometry_msgs.msg import TransformStamped

    def publish(s):
        bad = TransformStamped()
        bad.header.frame_id, bad.child_frame_id = "base", child
        bad.header.stamp.sec, bad.header.stamp.nanosec = divmod(s + 1, 1_000_000_000)
        bad.transform.rotation.w = 1.0
        part, attr = field.split(".")
        setattr(getattr(bad.transform, part), attr, value)
        rig.tf.sendTransform([bad])
        rig.publish_observation(s + 1, skip=("tf",))

    _expect_rejected(rig, publish, text)


def test_one_camera_silent(rig):
    _expect_rejected(rig, lambda s: rig.publish_observation(s, skip=("wrist",)), "wrist camera lags or is silent")


def test_images_out_of_order(rig):
    def publish(s):
        rig.publish_observation(s)  # good, newest
        time.sleep(0.3)
        old = s - 500_000_000
        for view in ("scene", "wrist"):
            rig.pub[view].publish(rig.image(view, old))
        return old

    stamp_count = len(rig.chunks)
    _expect_rejected(rig, publish, "is not newer than the last")
    assert len(rig.chunks) > stamp_count
    # ... and the problem is gone once newer frames came (it once stayed on /diagnostics for good).
    wait_for(
        lambda: not any(kv.key.startswith("problem.image_stamp") for kv in _latest_status(rig).values),
        5,
        what="/diagnostics without the image_stamp problem after newer frames",
    )


def _latest_status(rig):
    """The newest /diagnostics status of the inference node."""
    return next(s for d in reversed(list(rig.diagnostics)) for s in d.status if s.name.startswith("para: inference"))
