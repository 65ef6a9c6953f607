"""The coordinate-regression baseline (``model_kind = "coord_regression"``): the PARA paper's comparison.

Same backbone, same inputs, same data and trainer as v4; only the head differs: instead of scoring pixel-aligned
voxels, it regresses the future end-effector positions directly from global image features and the EE state::

    per view: backbone -> CLS (C) and the patch grid projected to F channels, average-pooled to 4 x 4 (16 F)
    global MLP over [EE state features, every view's CLS and pooled grid] -> hidden (G)
    positions: (T, 3) offsets from the current EE position, in units of ``REGRESSION_UNIT_M`` (10 cm)
    gripper / rotation: logits over the same bins as v4 (T, G) and (T, 3, R)

Loss: smooth-L1 of the offsets in centimetres (beta 1 cm) + the same gripper and rotation CE terms as v4. The
voxel fields of the config (pred_size, bins, workspace ...) are unused by this head, except the workspace box,
which bounds the decoded positions as in v4 (a voxel can only lie inside it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as Fn
from scipy.spatial.transform import Rotation
from torch import nn

from para_core.model.actions import DecodedChunk, decode_gripper, decode_rotation, time_offsets
from para_core.model.backbones import build_backbone
from para_core.model.config import V4Config
from para_core.model.layers import backbone_and_head_groups, ee_state_features, mlp
from para_core.model.model_io import V4Inputs, V4Targets

REGRESSION_UNIT_M = 0.1
POOL = 4  # pooled patch grid side


@dataclass
class RegressionOutput:
    """Named outputs of ``CoordRegressionModel.forward``."""

    positions_world: torch.Tensor  # (B, T, 3) metres
    gripper_logits: torch.Tensor  # (B, T, G)
    rotation_logits: torch.Tensor  # (B, T, 3, R)
    cls: torch.Tensor  # (B, N, C)
    losses: dict[str, torch.Tensor] = field(default_factory=dict)


class CoordRegressionModel(nn.Module):
    """Backbone + global MLP regressing the T future EE positions (see the module docstring)."""

    kind = "coord_regression"  # implements para_core.model.interface.ParaModel (no voxel volume)
    has_voxel_volume = False
    has_fast_path = False
    fast_inference = False
    position_loss_term = "position_l1_cm"

    def __init__(self, config: V4Config):
        super().__init__()
        self.config = config
        N, F, T = config.n_views, config.feat_dim, config.n_window
        self.backbone = build_backbone(config)
        C = self.backbone.hidden_size
        self.proj = nn.Conv2d(C, F, kernel_size=1)
        self.state_dim = 10 + 3 * config.mv_past_n
        G = config.global_mlp_hidden
        self.global_mlp = mlp([self.state_dim + N * (C + POOL * POOL * F), G, G])
        self.act = nn.GELU()
        self.n_grip, self.n_rot = config.n_gripper_bins, config.n_rotation_bins
        self.out_head = nn.Linear(G, T * (3 + self.n_grip + 3 * self.n_rot))

    def forward(self, inputs: V4Inputs, targets: V4Targets | None = None) -> RegressionOutput:
        cfg = self.config
        B, N = inputs.images.shape[:2]
        T = cfg.n_window
        bb = self.backbone(inputs.images.flatten(0, 1))  # patch grid (B*N, C, h, w), cls (B*N, C)
        pooled = Fn.adaptive_avg_pool2d(self.proj(bb.patch_grid), POOL)  # (B*N, F, 4, 4)
        img = torch.cat([bb.cls, pooled.flatten(1)], dim=-1).reshape(B, -1)  # (B, N * (C + 16 F))
        state = ee_state_features(
            cfg, inputs.T_world_ee.float(), inputs.gripper.float(), inputs.past_positions_world.float()
        ).to(img.dtype)  # (B, state_dim)
        h = self.act(self.global_mlp(torch.cat([state, img], dim=-1)))  # (B, G)
        o = self.out_head(h).float().reshape(B, T, -1)  # (B, T, 3 + G + 3R)
        offsets = o[..., :3]  # (B, T, 3) in REGRESSION_UNIT_M
        ee = inputs.T_world_ee[:, :3, 3].float().unsqueeze(1)  # (B, 1, 3)
        out = RegressionOutput(
            positions_world=ee + offsets * REGRESSION_UNIT_M,
            gripper_logits=o[..., 3 : 3 + self.n_grip],
            rotation_logits=o[..., 3 + self.n_grip :].reshape(B, T, 3, self.n_rot),
            cls=bb.cls.reshape(B, N, -1),
        )
        if targets is not None:
            out.losses = regression_losses(out, targets, cfg)
        return out

    def param_groups(self) -> list[dict]:
        return backbone_and_head_groups(self, self.config)

    def decode(self, out: RegressionOutput, refine: bool = False) -> list:
        """Outputs -> one ``para_core.model.actions.DecodedChunk`` per batch element (``refine`` has no meaning here).
        Positions are clipped into the workspace box (x, y) and [z_lo, z_hi]; confidence is 1 (no distribution)."""
        cfg = self.config
        lo = np.array([cfg.workspace_x_m[0], cfg.workspace_y_m[0], cfg.z_lo_m])
        hi = np.array([cfg.workspace_x_m[1], cfg.workspace_y_m[1], cfg.z_hi_m])
        pos = np.clip(out.positions_world.detach().double().cpu().numpy(), lo, hi)  # (B, T, 3)
        grip = out.gripper_logits.argmax(-1).cpu().numpy()  # (B, T)
        rot = out.rotation_logits.argmax(-1).cpu().numpy()  # (B, T, 3)
        chunks = []
        for b in range(pos.shape[0]):
            rots = decode_rotation(cfg, rot[b])
            chunks.append(
                DecodedChunk(
                    positions_world=pos[b],
                    rotations_world=rots,
                    quaternions_xyzw=Rotation.from_matrix(rots).as_quat(),
                    gripper=decode_gripper(cfg, grip[b]),
                    confidence=np.ones(cfg.n_window),
                    time_offsets_s=time_offsets(cfg),
                    voxel_index=np.full(cfg.n_window, -1, dtype=np.int64),
                )
            )
        return chunks

    def visualisation(self, out: RegressionOutput, top_k: int):
        """No voxel distribution to show: the decoded positions stand in for the 'most probable voxels'."""
        pos = out.positions_world[0].double().cpu().numpy()  # (T, 3)
        return pos, np.ones(len(pos)), np.stack([pos.min(0), pos.max(0)])


def regression_losses(out: RegressionOutput, targets: V4Targets, config: V4Config) -> dict[str, torch.Tensor]:
    err_cm = (out.positions_world - targets.positions_world.float()) * 100.0  # (B, T, 3)
    pos = Fn.smooth_l1_loss(err_cm, torch.zeros_like(err_cm), beta=1.0)
    grip = Fn.cross_entropy(
        out.gripper_logits.reshape(-1, out.gripper_logits.shape[-1]), targets.gripper_bin.reshape(-1)
    )
    rot = Fn.cross_entropy(
        out.rotation_logits.reshape(-1, out.rotation_logits.shape[-1]), targets.rotation_bins.reshape(-1)
    )
    total = pos + config.gripper_loss_weight * grip + config.rotation_loss_weight * rot
    return {"loss": total, "position_l1_cm": pos, "gripper_ce": grip, "rotation_ce": rot}
