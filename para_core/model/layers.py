"""Building blocks every model head shares: the sin/cos height encoding, plain MLPs, the end-effector state
features of the query (``para_core.model.v4``'s module docstring, step 5) and the backbone / head optimizer groups."""

from __future__ import annotations

import math

import torch
from torch import nn

from para_core.model.config import V4Config
from para_core.model.rotations import quaternion_to_matrix_torch


def sincos_height_encoding(z_m: torch.Tensor, z_lo_m: float, z_hi_m: float, dim: int) -> torch.Tensor:
    """sin/cos PE of metric height over the GLOBAL span: [sin(2^k pi zn), cos(2^k pi zn)]_k, zn = (z-z_lo)/(z_hi-z_lo).
    (...,) -> (..., dim); order: all sines (k ascending) then all cosines."""
    zn = (z_m - z_lo_m) / (z_hi_m - z_lo_m)  # (...,)
    freqs = math.pi * (2.0 ** torch.arange(dim // 2, dtype=z_m.dtype, device=z_m.device))  # (dim/2,)
    ang = zn.unsqueeze(-1) * freqs  # (..., dim/2)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)  # (..., dim)


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers of the given widths with GELU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


def ee_state_features(
    config: V4Config, T_world_ee: torch.Tensor, gripper: torch.Tensor, past_positions_world: torch.Tensor
) -> torch.Tensor:
    """End-effector state -> (B, 10 + 3 * mv_past_n) features (see module docstring, step 5)."""
    pos = T_world_ee[:, :3, 3]  # (B, 3)
    lo = pos.new_tensor([config.workspace_x_m[0], config.workspace_y_m[0], config.z_lo_m])
    hi = pos.new_tensor([config.workspace_x_m[1], config.workspace_y_m[1], config.z_hi_m])
    pos_n = 2.0 * (pos - lo) / (hi - lo) - 1.0  # (B, 3) ~[-1, 1] inside the box
    R_ref = quaternion_to_matrix_torch(pos.new_tensor(config.rotation_ref_quat_xyzw))  # (3, 3)
    R_rel = R_ref.transpose(0, 1) @ T_world_ee[:, :3, :3]  # (B, 3, 3)
    rot6 = R_rel[:, :, :2].transpose(1, 2).reshape(-1, 6)  # (B, 6)
    grip = (2.0 * gripper.to(pos.dtype) - 1.0).unsqueeze(-1)  # (B, 1)
    past = ((past_positions_world - pos.unsqueeze(1)) / 0.1).reshape(pos.shape[0], -1)  # (B, 3 * mv_past_n)
    return torch.cat([pos_n, rot6, grip, past], dim=-1)


def backbone_and_head_groups(model: nn.Module, config: V4Config) -> list[dict]:
    """The optimizer groups every head uses: ``model.backbone`` at ``lr * backbone_lr_mult``, the rest at ``lr``."""
    bb = [p for p in model.backbone.parameters() if p.requires_grad]
    bb_ids = {id(p) for p in bb}
    head = [p for p in model.parameters() if p.requires_grad and id(p) not in bb_ids]
    return [
        {"params": head, "lr": config.lr, "name": "head"},
        {"params": bb, "lr": config.lr * config.backbone_lr_mult, "name": "backbone"},
    ]
