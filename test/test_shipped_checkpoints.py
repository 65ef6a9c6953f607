"""Every checkpoint committed under checkpoints/ is a usable artefact: it loads from safetensors + JSON, can drive the
simulator, says how to reproduce it with a command that exists, names the weights it was fine-tuned from (which
exist, with the same architecture, and differ from it), and predicts a finite chunk inside its workspace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.checkpoint import load_checkpoint
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.train.init_from import check_compatible
from para_ros.deploy.closed_loop import check_checkpoint_matches_sim

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for p in (REPO / "checkpoints").iterdir() if p.is_dir())


def test_the_shipped_set():
    names = {p.name for p in SHIPPED}
    assert {"pick_place", "pick_place_regression"} <= names, names


@pytest.mark.parametrize("ck", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_loads_reproduces_and_predicts(ck):
    assert not list(ck.glob("*.pt")) and not list(ck.glob("*.pth")) and not list(ck.glob("*.pkl")), "pickles"
    check_checkpoint_matches_sim(ck)
    model, cfg, _meta = load_checkpoint(ck)
    recipe = json.loads((ck / "recipe.json").read_text())
    command = recipe["reproduce"].split()[0]
    assert (REPO / command).is_file(), f"{ck.name}: recipe's command {command!r} is not in the repository"
    source = recipe.get("init_from") or ""
    if source:
        src_model, src_cfg, _ = load_checkpoint(REPO / source)
        check_compatible(src_cfg, cfg, str(REPO / source))  # the same architecture (schedule fields may differ)
        moved = [
            k for k, v in model.state_dict().items() if not torch.equal(v, src_model.state_dict()[k])
        ]  # fine-tuning changed the weights
        assert len(moved) > len(model.state_dict()) // 2, f"{ck.name}: {len(moved)} tensors differ from {source}"

    policy = Policy(model, cfg, torch.device("cpu"))
    rng = np.random.default_rng(0)
    ee = np.array([0.3, 0.0, 0.1])
    cams = [
        CameraObservation(
            syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 38.0), syn.scene_camera_pose()
        ),
        CameraObservation(
            syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 58.0), syn.wrist_camera_pose(ee)
        ),
    ]
    T = np.eye(4)
    T[:3, :3] = syn.top_down_rotation()
    T[:3, 3] = ee
    out = policy.predict(cams, RobotState(T, 1.0, np.tile(ee, (cfg.mv_past_n, 1))))
    xyz = out.positions_world  # (T, 3)
    assert xyz.shape == (cfg.n_window, 3) and np.isfinite(xyz).all()
    margin = 0.05
    assert np.all(xyz[:, 0] >= cfg.workspace_x_m[0] - margin) and np.all(xyz[:, 0] <= cfg.workspace_x_m[1] + margin)
    assert np.all(xyz[:, 1] >= cfg.workspace_y_m[0] - margin) and np.all(xyz[:, 1] <= cfg.workspace_y_m[1] + margin)
