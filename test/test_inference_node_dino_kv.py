"""The single-view dino_kv head through the real inference node over DDS: the node subscribes the one camera the
checkpoint names and publishes the chunk Policy computes on that observation (the user switches by checkpoint only)."""

import numpy as np
import pytest
import torch
from test_inference_node import SEED, T_EE, T_SCENE, K, chunk_positions, running_inference_node

from para_ros.ros_io.synthetic_rig import synthetic_images

pytestmark = pytest.mark.ros


def test_dino_kv_checkpoint_runs_in_the_inference_node(tmp_path):
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.config import V4Config
    from para_core.model.policy import CameraObservation, Policy, RobotState
    from para_core.model.registry import build_model

    torch.manual_seed(7)
    cfg = V4Config.tiny_dino_kv()
    ckpt = save_checkpoint(tmp_path / "dino_kv", build_model(cfg), cfg)
    with running_inference_node(f"checkpoint:={ckpt}", "max_observation_age_s:=1.0", "tf_timeout_s:=0.2") as rig:
        stamp = rig.now_ns()
        rig.publish_observation(stamp, skip=("wrist", "wrist_info"))  # the model has no wrist view
        chunk = rig.wait_chunk_with_stamp(stamp)
    policy = Policy.from_checkpoint(ckpt)
    assert policy.view_names == ("scene",)
    cams = [CameraObservation(synthetic_images(SEED, 64)["scene"], K, T_SCENE)]
    expected = policy.predict(cams, RobotState(T_EE, 0.8, np.tile(T_EE[:3, 3], (cfg.mv_past_n, 1))))
    assert len(chunk.poses) == cfg.n_window
    np.testing.assert_allclose(chunk_positions(chunk), expected.positions_world, atol=1e-4)
