"""Shared synthetic inputs for the para_core tests (not a test module)."""

import numpy as np
import torch

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.model.model_io import V4Inputs


def make_inputs(cfg: V4Config, batch: int = 1, seed: int = 0, dtype=torch.float32) -> V4Inputs:
    """Scene camera (oblique, ~0.9 m up) + wrist camera (~0.25 m up, looking down), random smooth images."""
    rng = np.random.default_rng(seed)
    S, N = cfg.img_size, cfg.n_views
    K = torch.tensor(syn.intrinsics_from_fovy(S, S, 60.0), dtype=dtype)
    Ts, ees = [], []
    for b in range(batch):
        ee = np.array([0.3 + 0.05 * b, 0.02 * b, 0.2])
        Ts.append(np.stack([syn.scene_camera_pose(), syn.wrist_camera_pose(ee)][:N]))
        T_ee = np.eye(4)
        T_ee[:3, :3] = syn.top_down_rotation()
        T_ee[:3, 3] = ee
        ees.append(T_ee)
    imgs = np.stack([np.stack([syn.random_image(rng, S, S) for _ in range(N)]) for _ in range(batch)])
    images = (torch.tensor(imgs, dtype=dtype).permute(0, 1, 4, 2, 3) / 255.0 - 0.45) / 0.225
    T_ee = torch.tensor(np.stack(ees), dtype=dtype)
    return V4Inputs(
        images=images,
        K_img=K.expand(batch, N, 3, 3).clone(),
        T_world_cam=torch.tensor(np.stack(Ts), dtype=dtype),
        T_world_ee=T_ee,
        gripper=torch.ones(batch, dtype=dtype),
        past_positions_world=T_ee[:, None, :3, 3].expand(-1, cfg.mv_past_n, -1).clone(),
    )


def make_trajectory(cfg: V4Config, batch: int = 1, seed: int = 0):
    rng = np.random.default_rng(seed)
    trajs = [syn.random_trajectory(cfg, rng) for _ in range(batch)]
    pos = torch.tensor(np.stack([t[0] for t in trajs]))
    rot = np.stack([t[1] for t in trajs])
    grip = np.stack([t[2] for t in trajs])
    return pos, rot, grip


def tiny_checkpoint(path, **overrides):
    """A tiny two-view checkpoint (random weights) at ``path``, for graph tests that need a policy, not a good one
    (``overrides``: :meth:`V4Config.tiny`'s)."""
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.registry import build_model

    cfg = V4Config.tiny(**{"view_names": ("scene", "wrist"), **overrides})
    save_checkpoint(path, build_model(cfg), cfg)
    return path
