"""The single-view "dino_kv" head of the PARA v4 design's figure script (``model_kind = "para_dino_kv"``).

One camera view. Per pixel of the P x P prediction grid a ray volume of ``n_height_bins`` heights: voxel (z, u, v)
is the point where the ray through pixel (u, v) meets the horizontal plane at bin height z, the same closed-form grid
as v4's (``para_core.model.voxels.build_voxel_grid`` with one view, so the adaptive / fixed z range rules, the workspace mask
and the decoding are shared). The logits factorise over pixels and (step, height) keys::

    F(u, v) = normalize(upsample_P(proj_1x1(backbone patch tokens)))              (B, F, P, P), unit vectors
    K(t, z) = normalize(t_emb[t] + h_emb[z])                                        (B, T, Z, F), unit vectors
    volume_logits[b, t, z, u, v] = exp(logit_scale) * F(u, v) . K(t, z)             flattened to (B, T, Z * P * P)

``t_emb[t]`` is a sinusoidal embedding of the step index and ``h_emb[z]`` one of the bin's metric height normalised by
the global span [z_lo, z_hi] (``para_core.model.layers.sincos_height_encoding``, both F wide); both are fixed (the
design's keys have no learned part), only ``logit_scale`` is learned (initialised to log 10). The keys do not see the
end-effector state: this head localises from the image alone, as in the design. Gripper and rotation: a 4-layer MLP on
[F(u, v), K(t, z)] at the chosen voxel: the argmax at inference, the GT voxel in training. Outputs are a
``para_core.model.model_io.V4Output`` (``voxel_feat`` holds F(u, v) repeated over the heights), so losses, decoding,
checkpoints, the Policy, the inference node and the bag tools work unchanged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as Fn
from torch import nn

from para_core.model.actions import decode_volume, top_voxels
from para_core.model.backbones import build_backbone
from para_core.model.config import V4Config
from para_core.model.interface import ScoreExplanation
from para_core.model.layers import backbone_and_head_groups, mlp, sincos_height_encoding
from para_core.model.model_io import V4Inputs, V4Output, V4Targets
from para_core.model.v4 import compute_losses
from para_core.model.voxels import build_voxel_grid


def step_embedding(n_steps: int, dim: int, device=None) -> torch.Tensor:
    """(T, dim) sinusoidal embedding of step indices 0..T-1 (transformer-style frequencies)."""
    t = torch.arange(n_steps, dtype=torch.float32, device=device).unsqueeze(-1)  # (T, 1)
    freq = torch.exp(-math.log(100.0) * torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim)  # (dim/2,)
    ang = t * freq  # (T, dim/2)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)[:, :dim]  # (T, dim)


class ParaDinoKVModel(nn.Module):
    """Single-view pixel-feature x (step, height)-key head (see the module docstring)."""

    kind = "para_dino_kv"  # implements para_core.model.interface.VoxelVolumeModel
    has_voxel_volume = True
    has_fast_path = False
    fast_inference = False
    position_loss_term = "voxel_ce"

    def __init__(self, config: V4Config):
        super().__init__()
        if config.n_views != 1:
            raise ValueError(
                f"V4Config.view_names = {config.view_names}: model_kind 'para_dino_kv' takes ONE view "
                "(PARA v4's single-view head); e.g. view_names=('scene',)"
            )
        if config.feat_dim % 2:
            raise ValueError(f"V4Config.feat_dim = {config.feat_dim}: para_dino_kv's sin/cos keys need an even size")
        self.config = config
        F = config.feat_dim
        self.backbone = build_backbone(config)
        self.proj = nn.Conv2d(self.backbone.hidden_size, F, kernel_size=1)
        self.logit_log_scale = nn.Parameter(torch.tensor(math.log(10.0)))
        self.n_grip, self.n_rot = config.n_gripper_bins, config.n_rotation_bins
        H = config.head_hidden
        self.grip_rot_head = mlp([2 * F, H, H, H, self.n_grip + 3 * self.n_rot])  # 4 layers

    def pixel_features(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 1, 3, S, S) -> unit per-pixel features (B, F, P, P) and the CLS token (B, 1, C)."""
        out = self.backbone(images[:, 0])  # patch grid (B, C, h, w)
        P = self.config.pred_size
        feat = Fn.interpolate(self.proj(out.patch_grid), size=(P, P), mode="bilinear", align_corners=False)
        return Fn.normalize(feat, dim=1), out.cls.unsqueeze(1)  # (B, F, P, P), (B, 1, C)

    def keys(self, bin_heights_m: torch.Tensor) -> torch.Tensor:
        """(B, Z) bin heights (metres) -> unit keys (B, T, Z, F)."""
        cfg = self.config
        t_emb = step_embedding(cfg.n_window, cfg.feat_dim, bin_heights_m.device)  # (T, F)
        h_emb = sincos_height_encoding(bin_heights_m, cfg.z_lo_m, cfg.z_hi_m, cfg.feat_dim)  # (B, Z, F)
        return Fn.normalize(t_emb[None, :, None, :] + h_emb[:, None, :, :], dim=-1)  # (B, T, Z, F)

    def forward(self, inputs: V4Inputs, targets: V4Targets | None = None) -> V4Output:
        cfg = self.config
        B = inputs.images.shape[0]
        Z, P, F, T = cfg.n_height_bins, cfg.pred_size, cfg.feat_dim, cfg.n_window
        with torch.autocast(device_type=inputs.K_img.device.type, enabled=False):
            grid = build_voxel_grid(cfg, inputs.K_img.float(), inputs.T_world_cam.float())  # geometry in fp32
        feat, cls = self.pixel_features(inputs.images)  # (B, F, P, P), (B, 1, C)
        heights = grid.voxel_xyz.reshape(B, Z, P * P, 3)[..., 2].amax(-1)  # (B, Z): the plane of each bin
        keys = self.keys(heights.float())  # (B, T, Z, F)
        pix = feat.flatten(2).float()  # (B, F, P*P)
        logits = torch.einsum("btzf,bfp->btzp", keys, pix) * self.logit_log_scale.exp()  # (B, T, Z, P*P)
        logits = logits.reshape(B, T, Z * P * P).masked_fill(~grid.valid.unsqueeze(1), float("-inf"))  # (B, T, V)
        chosen = logits.detach().argmax(dim=-1)  # (B, T)
        if targets is not None:
            chosen = torch.where(targets.teacher_voxel >= 0, targets.teacher_voxel, chosen)
        z_idx, p_idx = chosen // (P * P), chosen % (P * P)  # (B, T)
        f_at = torch.gather(pix.transpose(1, 2), 1, p_idx.unsqueeze(-1).expand(-1, -1, F))  # (B, T, F)
        k_at = torch.gather(keys, 2, z_idx[..., None, None].expand(-1, -1, 1, F)).squeeze(2)  # (B, T, F)
        head = self.grip_rot_head(torch.cat([f_at, k_at], dim=-1).to(feat.dtype)).float()  # (B, T, G + 3R)
        voxel_feat = pix.transpose(1, 2).unsqueeze(1).expand(B, Z, P * P, F).reshape(B, Z * P * P, F)  # (B, V, F)
        out = V4Output(
            volume_logits=logits,
            voxel_xyz=grid.voxel_xyz,
            voxel_valid=grid.valid,
            voxel_feat=voxel_feat,
            query=keys[:, :, 0],
            chosen_voxel=chosen,
            gripper_logits=head[..., : self.n_grip],
            rotation_logits=head[..., self.n_grip :].reshape(B, T, 3, self.n_rot),
            grid=grid,
            cls=cls,
        )
        if targets is not None:
            out.losses = compute_losses(out, targets, cfg)
        return out

    def decode(self, out: V4Output, refine: bool = False) -> list:
        """``ParaModel.decode``: the argmax voxel of each step, refined by the local soft-argmax with ``refine``."""
        return decode_volume(self.config, out, refine=refine)

    def visualisation(self, out: V4Output, top_k: int):
        """``ParaModel.visualisation``: the most probable voxels (``para_core.model.actions.top_voxels``)."""
        return top_voxels(out, top_k)

    def feature_maps(self, inputs: V4Inputs) -> torch.Tensor:
        """``VoxelVolumeModel.feature_maps``: the unit pixel features F(u, v) of the one view, (B, 1, F, P, P)."""
        return self.pixel_features(inputs.images)[0].unsqueeze(1)

    def explain_score(self, inputs: V4Inputs, out: V4Output, step: int, voxel: int) -> ScoreExplanation:
        """``VoxelVolumeModel.explain_score``: the key of the voxel's (step, height): t_emb[t], h_emb[z] and
        unit(t_emb + h_emb), which is dotted with F(u, v)."""
        cfg = self.config
        P = cfg.pred_size
        zbin = (voxel % (cfg.n_height_bins * P * P)) // (P * P)  # one view: the bin of the flat voxel index
        heights = out.grid.z_bin_centres[0, 0].float()  # (Z,) metres
        t_emb = step_embedding(cfg.n_window, cfg.feat_dim, heights.device)[step]  # (F,)
        h_emb = sincos_height_encoding(heights[zbin : zbin + 1], cfg.z_lo_m, cfg.z_hi_m, cfg.feat_dim)[0]  # (F,)
        key = self.keys(heights[None])[0, step, zbin]  # (F,)
        return ScoreExplanation(
            vectors=torch.stack([t_emb, h_emb, key]).float().cpu().numpy(),  # (3, F)
            labels=(f"t_emb[t={step}]", f"h_emb[z={zbin}]", "key = unit(t_emb + h_emb)"),
            formula="volume_logits[t,z,u,v] = exp(logit_scale) F(u,v) . key(t,z)",
            logit_scale=float(self.logit_log_scale.exp()),
        )

    def param_groups(self) -> list[dict]:
        return backbone_and_head_groups(self, self.config)
