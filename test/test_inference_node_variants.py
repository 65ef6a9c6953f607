"""inference_node variants that need their own node process: a CameraInfo that never arrives, compressed images,
and the geometric check that moving the camera in TF moves the decoded point by the same transform."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from ros_helpers import wait_for
from test_inference_node import IMG, SEED, T_EE, T_SCENE, T_WRIST, chunk_positions, running_inference_node

from para_ros.ros_io.synthetic_rig import SyntheticRig

pytestmark = pytest.mark.ros


def test_camera_info_that_never_arrives():
    """A node that never gets the wrist CameraInfo: nothing is published, diagnostics say why."""
    with running_inference_node(f"random_seed:={SEED}", "wrist_info_topic:=/nobody/camera_info") as r:

        def publish_and_check():
            r.publish_observation(r.now_ns())
            return r.diagnostics_mention("no CameraInfo received on /nobody/camera_info")

        wait_for(publish_and_check, 10, what="diagnostics naming the missing CameraInfo")
        assert not r.chunks


def test_compressed_images_give_the_same_chunk_as_raw():
    """image_transport:=compressed: PNG CompressedImage on <topic>/compressed decodes to the same pixels."""
    from test_inference_node import expected_output

    with running_inference_node(f"random_seed:={SEED}", "image_transport:=compressed") as r:
        compressed = {
            view: r.node.create_publisher(type(r.compressed(view, 0)), f"/{view}_cam/image_raw/compressed", 10)
            for view in ("scene", "wrist")
        }
        stamp = r.now_ns()
        r.publish_observation(stamp, skip=("scene", "wrist"))
        for view, pub in compressed.items():
            pub.publish(r.compressed(view, stamp))
        chunk = r.wait_chunk_with_stamp(stamp)
        _, expected = expected_output()
        np.testing.assert_allclose(chunk_positions(chunk), expected.positions_world, atol=1e-4)


def one_pixel_per_patch_checkpoint(path):
    """A single-view (scene) tiny model whose feature map has one pixel per backbone patch (pred_size = img_size /
    patch_size): no bilinear upsampling, whose border clamping gives neighbouring pixels exactly equal features, so
    the best voxel of each step is unique (see ``best_voxel_margins``)."""
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.config import V4Config
    from para_core.model.registry import build_model

    tiny = V4Config.tiny()
    cfg = V4Config.tiny(view_names=("scene",), pred_size=tiny.img_size // tiny.patch_size)
    torch.manual_seed(SEED)
    model = build_model(cfg)
    return save_checkpoint(path, model, model_id="para_v4:one-pixel-per-patch")


def best_voxel_margins(ckpt, K: np.ndarray, T_scene: np.ndarray) -> np.ndarray:
    """(T,) each step's best voxel logit minus its runner-up's, computed here on the observation the rig publishes.

    Logits that are equal in exact arithmetic come out of float32 a few 1e-9 apart, differently for each camera pose
    (the voxel's projection back onto its pixel, ``grid_sample``'s bilinear weights), so among such ties the argmax
    picks a pose-dependent voxel. The margin must dwarf that noise for the chosen voxel to be the same grid cell."""
    from para_core.model.policy import CameraObservation, Policy, RobotState
    from para_ros.ros_io.synthetic_rig import synthetic_images

    policy = Policy.from_checkpoint(ckpt)
    state = RobotState(T_EE, 0.8, np.tile(T_EE[:3, 3], (policy.config.mv_past_n, 1)))
    policy.predict([CameraObservation(synthetic_images(SEED, IMG)["scene"], K, T_scene)], state)
    top = torch.topk(policy.last_output.volume_logits[0].float(), 2, dim=-1).values  # (T, 2)
    return (top[:, 0] - top[:, 1]).numpy()


@pytest.mark.parametrize("shift_m", [(0.04, -0.03, 0.0), (-0.05, 0.02, 0.0)])
def test_moving_the_scene_camera_in_tf_moves_the_decoded_points_by_the_same_translation(tmp_path, shift_m):
    """With one view a voxel's logit depends only on its own pixel's features (it projects back onto that pixel) and
    its height bin, neither of which changes when the camera moves horizontally with the same image; with a unique
    best voxel per step the chosen voxel is then the same grid cell for any camera pose. Translating the camera
    horizontally by d (static TF, same image) translates every voxel of its grid, hence every decoded step, by
    exactly d. Proves the node places the grid with the TF it received."""
    ckpt = one_pixel_per_patch_checkpoint(tmp_path / "ckpt")
    K_narrow = np.array([[120.0, 0, 32.0], [0, 120.0, 32.0], [0, 0, 1.0]])  # footprint inside the workspace box
    margins = best_voxel_margins(ckpt, K_narrow, T_SCENE)
    assert np.all(margins > 1e-5), f"the test needs a unique best voxel per step, runner-up margins {margins}"

    def rig_factory():
        return SyntheticRig(T_SCENE, T_WRIST, T_EE, seed=SEED, image_size=IMG, K=K_narrow)

    with running_inference_node(f"checkpoint:={ckpt}", "publish_pointcloud:=false", rig_factory=rig_factory) as r:
        s1 = r.now_ns()
        r.publish_observation(s1)
        before = chunk_positions(r.wait_chunk_with_stamp(s1))
        T_moved = T_SCENE.copy()
        T_moved[:3, 3] += shift_m
        r.publish_static_scene(T_moved)
        # Wait for the latched /tf_static update to reach the node: observe until the chunk changes (it is atomic).
        deadline = time.monotonic() + 20
        after = before
        while np.allclose(after, before, atol=1e-9) and time.monotonic() < deadline:
            s2 = r.now_ns()
            r.publish_observation(s2)
            after = chunk_positions(r.wait_chunk_with_stamp(s2))
    assert np.all(np.isfinite(before))
    np.testing.assert_allclose(after - before, np.tile(shift_m, (len(before), 1)), atol=1e-4)


def test_a_repeated_problem_is_logged_throttled_not_per_frame():
    """40 bad frames in about 2.5 s give at most a few log lines for that problem (throttled to one per 2 s per
    problem), while /diagnostics names it and the node stays up."""
    output: list[str] = []
    depth = np.zeros((IMG, IMG), np.uint16)
    with running_inference_node(f"random_seed:={SEED}", output=output) as r:
        t0 = time.monotonic()
        for _ in range(40):
            s = r.now_ns()
            r.publish_observation(s, images={"scene": r.image("scene", s, depth, encoding="16UC1")}, tf_lead_s=0.0)
            time.sleep(0.05)
        wait_for(lambda: r.diagnostics_mention("not a colour image"), 5, what="the problem on /diagnostics")
        elapsed_s = time.monotonic() - t0
        good = r.now_ns()
        r.publish_observation(good)
        r.wait_chunk_with_stamp(good)  # alive and working
    problem_lines = [line for line in output[0].splitlines() if "[image]" in line and "not a colour image" in line]
    assert 1 <= len(problem_lines) <= int(elapsed_s / 2.0) + 2, problem_lines


@pytest.mark.parametrize("keep", [True, False])
def test_dtype_auto_resolves_for_the_device_and_the_allocator_follows_its_parameter(keep):
    from ros_helpers import in_process_inference_node

    from para_core.model.hardware import resolve_inference_dtype

    for node in in_process_inference_node(
        "inference_dtype_test", random_seed=2, dtype="auto", device="cpu", keep_freed_memory=keep
    ):
        assert node.policy.dtype == resolve_inference_dtype("auto", torch.device("cpu"))
        assert node.policy.dtype in ("bf16", "fp32")  # auto never picks fp16 on a CPU
        assert ("keeps freed memory" in node.policy.allocator) == keep, node.policy.allocator
