"""The inputs, training targets and outputs every model head shares (``V4Inputs``, ``V4Targets``, ``V4Output``):
plain tensor records, so that decoding (``actions``), the heads (``v4``, ``dino_kv``, ``regression``) and the
``Policy`` can all name them without importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from para_core.model.voxels import VoxelGrid


@dataclass
class V4Inputs:
    """One batch of model inputs (float tensors on the model's device)."""

    images: torch.Tensor  # (B, N, 3, S, S) ImageNet-normalised RGB at img_size
    K_img: torch.Tensor  # (B, N, 3, 3) intrinsics of those S x S images, pixels
    T_world_cam: torch.Tensor  # (B, N, 4, 4) camera (OpenCV optical) -> world
    T_world_ee: torch.Tensor  # (B, 4, 4) current end-effector pose
    gripper: torch.Tensor  # (B,) 0 closed .. 1 open
    past_positions_world: torch.Tensor  # (B, mv_past_n, 3) oldest first


@dataclass
class V4Targets:
    """Training targets (built by ``para_core.model.actions.encode_targets``)."""

    voxel_index: torch.Tensor  # (B, T, N) long: the GT point's voxel in each view (0 where not visible)
    voxel_weight: torch.Tensor  # (B, T, N) float: soft-target weights, rows sum to 1 (or 0: no visible view)
    teacher_voxel: torch.Tensor  # (B, T) long: the first visible view's voxel, -1 = none visible (a fixed GT voxel;
    # the head's training voxel is chosen among all visible views' voxels, see ``training_head_voxel``)
    gripper_bin: torch.Tensor  # (B, T) long
    rotation_bins: torch.Tensor  # (B, T, 3) long
    positions_world: torch.Tensor  # (B, T, 3) the GT points (for metrics)

    def to(self, device) -> V4Targets:
        return V4Targets(**{k: getattr(self, k).to(device) for k in self.__dataclass_fields__})


@dataclass
class V4Output:
    """Named outputs of ``ParaV4Model.forward``."""

    volume_logits: torch.Tensor  # (B, T, V), -inf at invalid voxels
    voxel_xyz: torch.Tensor  # (B, V, 3) world coordinates of voxel centres
    voxel_valid: torch.Tensor  # (B, V) bool
    voxel_feat: torch.Tensor | None  # (B, V, F); only valid voxels are meaningful; None on the fast path
    query: torch.Tensor  # (B, T, F)
    chosen_voxel: torch.Tensor  # (B, T) long: voxel the gripper/rotation head looked at
    gripper_logits: torch.Tensor  # (B, T, G)
    rotation_logits: torch.Tensor  # (B, T, 3, R)
    grid: VoxelGrid
    cls: torch.Tensor  # (B, N, C)
    patch_features: torch.Tensor | None = None  # (B, N, F, h, w) projected patch grid (para_core.model.familiarity)
    losses: dict[str, torch.Tensor] = field(default_factory=dict)
    volume_lse: torch.Tensor | None = None  # (B, T) logsumexp of each step's logits, filled on first use
    argmax_voxel: torch.Tensor | None = None  # (B, T) long: each step's most probable voxel (None: take the argmax)
