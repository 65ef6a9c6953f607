"""The PARA v4 volumetric model (``model_kind = "para_v4"``) and its losses (the registry: ``registry``).

Pipeline (seed 001; shapes with B batch, N views, S img_size, P pred_size, Z bins, V = N*Z*P^2, T steps, F feat_dim):

1. Backbone per view (shared weights): images (B*N, 3, S, S) -> patch grid (B*N, C, S/p, S/p) + global token (B*N, C)
   (p = patch_size: DINOv3 16, InternVL 2.5's InternViT 14; see ``para_core.model.backbones``). The multi-view
   backbone (Depth-Anything-3) takes the N views together with their intrinsics and poses and gives the same outputs.
2. 1x1 projection to F and bilinear upsample (align_corners=False, i.e. pixel-centre aligned) to (B*N, F, P, P).
3. Voxel grid (``para_core.model.voxels``): per-view adaptive z range, closed-form ray/plane intersection of every pixel
   centre at every bin height; voxels behind the camera or outside the workspace box are invalid.
4. Fusion: every voxel is projected into every view and that view's feature map is bilinearly sampled there
   (``grid_sample``, border padding; the projection and the sampling positions stay fp32 under autocast); samples
   outside the frustum (depth <= 0 or outside [0, P)^2) are zeroed and a visibility flag 0/1 is appended. Input per
   voxel: [feat_0 * vis_0, vis_0, ..., feat_{N-1} * vis_{N-1}, vis_{N-1}, height_enc] -> 3-layer MLP -> voxel
   feature (F). Height encoding: sin/cos of 2^k * pi * z_norm for k < height_enc_dim/2 with z_norm = (z - z_lo) /
   (z_hi - z_lo) over the GLOBAL span (same basis in every view), or a learned embedding per (view, bin) (v2
   ablation). The MLP runs over chunks of ``voxel_chunk_size`` voxels (gradient-checkpointed in training) so
   activation memory stays bounded for the paper's 1,048,576 voxels.
5. Query: global MLP over [EE state (position normalised to the workspace box, first two columns of R_ref^T R,
   gripper), CLS of every view, past EE positions relative to the current one / 0.1 m] -> q_head -> (B, T, F).
6. ``volume_logits = scale * q . voxel_feat`` (B, T, V); invalid voxels -inf. ``scale`` = exp(learned log scale)
   initialised at 1/sqrt(F), or the fixed 1/sqrt(F).
7. Gripper/rotation head: 4-layer MLP on [voxel_feat at the chosen voxel, q_t] -> gripper logits (G) and rotation
   logits (3 x R). The chosen voxel is the argmax voxel at inference. In training (``training_head_voxel``) it is, of
   the GT point's voxels (one per view that sees it: the soft target's voxels), the one with the highest current
   logit, and the argmax voxel for steps whose point no view sees. Why: the soft target spreads the voxel CE evenly
   over the views, so which view's copy of the point the inference argmax lands in is the model's own preference,
   not a fixed view; training the head at the first visible view's voxel (``V4Targets.teacher_voxel``, the rule
   before) taught it on voxels that inference, picking the other view's, never shows it. With this rule the head
   reads, for every step the model localises correctly, exactly the voxel inference will read. The choice is made on
   detached logits (no gradient through it); ties go to the earlier view. q_t is included so that two steps choosing
   the same voxel can still differ in gripper/rotation.

Loss (``compute_losses``), reported per step: voxel CE with a SOFT target -- the GT point's containing voxel in every
view where it is visible (``para_core.model.voxels.locate_points``), each with weight 1/(number of such views) --, averaged
over the steps whose point is visible in at least one view; plus ``gripper_loss_weight`` * CE over gripper bins plus
``rotation_loss_weight`` * mean CE over the 3 rotation components. Baseline: uniform logits give a voxel CE of
log(V) per step = 13.86 for the paper's V = 1,048,576 (``uniform_voxel_ce_baseline``); the paper's log(V*T) = 17.33 is
the same number for a single softmax over all T*V (step, voxel) pairs and is given by ``seed_joint_baseline``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as Fn
from torch import nn
from torch.utils.checkpoint import checkpoint

from para_core.model.actions import decode_volume, top_voxels
from para_core.model.backbones import build_backbone
from para_core.model.config import V4Config
from para_core.model.geometry import project, uv_to_grid_sample
from para_core.model.interface import ScoreExplanation
from para_core.model.layers import backbone_and_head_groups, ee_state_features, mlp, sincos_height_encoding
from para_core.model.model_io import V4Inputs, V4Output, V4Targets
from para_core.model.v4_fast import voxel_features_fast
from para_core.model.voxels import StaticViewCache, VoxelGrid, build_voxel_grid


class ParaV4Model(nn.Module):
    """PARA v4: DINOv3 features -> adaptive per-view voxel grids -> cross-view MLP fusion -> query dot product."""

    kind = "para_v4"  # implements para_core.model.interface.VoxelVolumeModel
    has_voxel_volume = True
    has_fast_path = True
    position_loss_term = "voxel_ce"

    def __init__(self, config: V4Config):
        super().__init__()
        self.config = config
        self.fast_inference = False  # Policy(fast=True): para_core.model.v4_fast at inference (eval, no targets)
        # A voxel's own view: its pixel's feature without grid_sample (fusion_inputs); False: sample every view, the
        # reference arithmetic (bench/bench_training.py compares the two).
        self.own_view_without_sampling = True
        self.grid_cache = StaticViewCache()  # the fast path on CPU reuses the voxels of a camera that did not move
        N, F, Z = config.n_views, config.feat_dim, config.n_height_bins
        self.backbone = build_backbone(config)
        C = self.backbone.hidden_size
        self.proj = nn.Conv2d(C, F, kernel_size=1)
        self.voxel_in_dim = N * (F + 1) + config.height_enc_dim
        H = config.voxel_mlp_hidden
        self.voxel_mlp = mlp([self.voxel_in_dim, H, H, F])  # 3 layers
        if config.height_encoding == "learned":
            self.height_emb = nn.Embedding(N * Z, config.height_enc_dim)
        self.state_dim = 10 + 3 * config.mv_past_n
        G = config.global_mlp_hidden
        self.global_mlp = mlp([self.state_dim + N * C, G, G])
        self.global_act = nn.GELU()
        self.q_head = nn.Linear(G, config.n_window * F)
        init_log_scale = torch.tensor(math.log(1.0 / math.sqrt(F)))
        if config.learned_logit_scale:
            self.logit_log_scale = nn.Parameter(init_log_scale)
        else:
            self.register_buffer("logit_log_scale", init_log_scale, persistent=False)
        Hh = config.head_hidden
        self.n_grip, self.n_rot = config.n_gripper_bins, config.n_rotation_bins
        self.grip_rot_head = mlp([2 * F, Hh, Hh, Hh, self.n_grip + 3 * self.n_rot])  # 4 layers

    # ------------------------------------------------------------------------------------------------- parts
    def image_features(
        self, images: torch.Tensor, K_img: torch.Tensor | None = None, T_world_cam: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, 3, S, S) -> per-view feature maps (B, N, F, P, P) and CLS tokens (B, N, C). A multi-view backbone
        (DA3) also reads the intrinsics (B, N, 3, 3) and poses (B, N, 4, 4) of the views; the others ignore them."""
        patches, cls = self.patch_features(images, K_img, T_world_cam)
        return self.interpolate_to_prediction_grid(patches), cls

    def interpolate_to_prediction_grid(self, patches: torch.Tensor) -> torch.Tensor:
        """(B, N, F, h, w) patch features -> (B, N, F, P, P) the feature maps the voxels are scored from."""
        B, N = patches.shape[:2]
        P = self.config.pred_size
        feat = Fn.interpolate(patches.flatten(0, 1), size=(P, P), mode="bilinear", align_corners=False)
        return feat.reshape(B, N, *feat.shape[1:])  # (B, N, F, P, P)

    def patch_features(
        self, images: torch.Tensor, K_img: torch.Tensor | None = None, T_world_cam: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, 3, S, S) -> the projected patch grid of every view (B, N, F, h, w), before its interpolation to
        the prediction grid (what ``para_core.model.familiarity`` compares with the training data), and the CLS
        tokens (B, N, C)."""
        B, N = images.shape[:2]
        if self.backbone.multi_view:
            if K_img is None or T_world_cam is None:
                raise ValueError(
                    f"backbone_kind {self.config.backbone_kind!r} reads the camera poses: pass K_img and T_world_cam "
                    f"to image_features"
                )
            out = self.backbone.forward_views(images, K_img, T_world_cam)  # (B*N, C, h, w), (B*N, C)
        else:
            out = self.backbone(images.flatten(0, 1))  # patch grid (B*N, C, h, w), cls (B*N, C)
        feat = self.proj(out.patch_grid)  # (B*N, F, h, w)
        return feat.reshape(B, N, *feat.shape[1:]), out.cls.reshape(B, N, -1)

    def height_encoding(self, voxel_xyz: torch.Tensor, voxel_ids: torch.Tensor) -> torch.Tensor:
        """(B, v, 3) voxel centres + (v,) flat voxel indices -> (B, v, height_enc_dim)."""
        cfg = self.config
        if cfg.height_encoding == "learned":
            table_idx = voxel_ids // (cfg.pred_size * cfg.pred_size)  # (v,) = view * Z + bin
            emb = self.height_emb(table_idx)  # (v, h)
            return emb.unsqueeze(0).expand(voxel_xyz.shape[0], -1, -1)
        return sincos_height_encoding(voxel_xyz[..., 2], cfg.z_lo_m, cfg.z_hi_m, cfg.height_enc_dim)

    def fusion_inputs(
        self,
        feat_maps: torch.Tensor,
        grid: VoxelGrid,
        voxel_xyz: torch.Tensor,
        voxel_ids: torch.Tensor,
        first_voxel: int | None = None,
    ) -> torch.Tensor:
        """Per-voxel MLP input for a chunk of voxels.

        :param feat_maps: (B, N, F, P, P); ``voxel_xyz``: (B, v, 3); ``voxel_ids``: (v,) flat indices.
        :param first_voxel: when the chunk is the contiguous range ``first_voxel .. first_voxel + v`` of the flat
            voxel order (as ``voxel_features`` makes them), each voxel's OWN view is read without ``grid_sample``
            (``own_view_without_sampling``): a voxel of view k lies on the ray of one of view k's pixels and projects
            back onto that pixel's centre, where bilinear sampling returns the pixel's feature (``v4_fast`` relies on
            the same fact). The same numbers within float rounding (``test/test_core_fusion_same_view.py``); the
            projection, visibility and every other view are computed as before.
        :return: (B, v, N * (F + 1) + height_enc_dim).
        """
        B, N, F, P, _ = feat_maps.shape
        own = first_voxel is not None and self.own_view_without_sampling
        parts = []
        for k in range(N):
            # Projection AND sampling stay in fp32: a bf16 grid would quantise the sampling positions (bf16 keeps 8
            # significant bits: steps of up to 1/8 pixel, errors of up to 1/16 pixel at P = 64). The (possibly bf16)
            # feature map is sampled as stored at the exact positions and only the sampled features are cast back to
            # its dtype, which is what the voxel MLP's autocast would cast them to anyway.
            with torch.autocast(device_type=voxel_xyz.device.type, enabled=False):
                uv, depth = project(
                    voxel_xyz.float(), grid.K_pred[:, k].float(), grid.T_world_cam[:, k].float()
                )  # (B, v, 2), (B, v)
                g = uv_to_grid_sample(uv, P, P).unsqueeze(2)  # (B, v, 1, 2) fp32
                if own:
                    sampled = self._sample_other_views_only(feat_maps, g, k, first_voxel)  # (B, F, v, 1)
                else:
                    sampled = Fn.grid_sample(
                        feat_maps[:, k].float(), g, mode="bilinear", padding_mode="border", align_corners=False
                    ).to(feat_maps.dtype)  # (B, F, v, 1)
            vis = (depth > 0) & (uv[..., 0] >= 0) & (uv[..., 0] < P) & (uv[..., 1] >= 0) & (uv[..., 1] < P)  # (B, v)
            vis_f = vis.to(feat_maps.dtype).unsqueeze(-1)  # (B, v, 1)
            parts.append(sampled.squeeze(-1).transpose(1, 2) * vis_f)  # (B, v, F)
            parts.append(vis_f)
        parts.append(self.height_encoding(voxel_xyz, voxel_ids).to(feat_maps.dtype))  # (B, v, h)
        return torch.cat(parts, dim=-1)

    def _sample_other_views_only(self, feat_maps: torch.Tensor, g: torch.Tensor, k: int, first_voxel: int):
        """View ``k``'s features at the chunk's voxels (``fusion_inputs``): ``grid_sample`` for the voxels of other
        views, the pixel's own feature for view ``k``'s voxels (flat order: view, bin, row, col).

        :param feat_maps: (B, N, F, P, P); ``g``: (B, v, 1, 2) fp32 grid_sample positions in view k.
        :return: (B, F, v, 1) in ``feat_maps.dtype``.
        """
        B, N, F, P, _ = feat_maps.shape
        v = g.shape[1]
        per_view = self.config.n_height_bins * P * P
        a = min(max(k * per_view - first_voxel, 0), v)  # view k's voxels are chunk positions a .. b
        b = min(max((k + 1) * per_view - first_voxel, 0), v)
        pieces = []
        if a > 0:
            pieces.append(self._grid_sample(feat_maps[:, k], g[:, :a]))  # (B, F, a)
        if b > a:
            flat = feat_maps[:, k].reshape(B, F, P * P)  # (B, F, P^2) pixel features of view k
            pixel0 = (first_voxel + a) % (P * P)
            if pixel0 == 0 and (b - a) % (P * P) == 0:  # whole bins: every pixel once per bin (backward: a sum)
                pieces.append(flat.unsqueeze(2).expand(B, F, (b - a) // (P * P), P * P).reshape(B, F, b - a))
            else:
                pixel = torch.arange(pixel0, pixel0 + b - a, device=flat.device) % (P * P)  # (b - a,)
                pieces.append(flat.index_select(2, pixel))  # (B, F, b - a)
        if b < v:
            pieces.append(self._grid_sample(feat_maps[:, k], g[:, b:]))  # (B, F, v - b)
        sampled = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=2)  # (B, F, v)
        return sampled.unsqueeze(-1)  # (B, F, v, 1)

    @staticmethod
    def _grid_sample(feat_map: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """(B, F, P, P) sampled at (B, u, 1, 2) fp32 positions -> (B, F, u) in ``feat_map.dtype``."""
        return (
            Fn.grid_sample(feat_map.float(), g, mode="bilinear", padding_mode="border", align_corners=False)
            .squeeze(-1)
            .to(feat_map.dtype)
        )

    def _voxel_chunk(self, feat_maps, grid, voxel_xyz, voxel_ids, first_voxel=None):
        return self.voxel_mlp(self.fusion_inputs(feat_maps, grid, voxel_xyz, voxel_ids, first_voxel))  # (B, v, F)

    def voxel_features(self, feat_maps: torch.Tensor, grid: VoxelGrid) -> torch.Tensor:
        """(B, N, F, P, P) -> (B, V, F), over chunks of ``voxel_chunk_size`` voxels."""
        V = grid.voxel_xyz.shape[1]
        chunk = self.config.voxel_chunk_size or V
        use_ckpt = self.training and torch.is_grad_enabled() and chunk < V
        outs = []
        for start in range(0, V, chunk):
            ids = torch.arange(start, min(start + chunk, V), device=feat_maps.device)  # (v,)
            xyz = grid.voxel_xyz[:, start : start + chunk]  # (B, v, 3)
            if use_ckpt:
                outs.append(checkpoint(self._voxel_chunk, feat_maps, grid, xyz, ids, start, use_reentrant=False))
            else:
                outs.append(self._voxel_chunk(feat_maps, grid, xyz, ids, start))
        return torch.cat(outs, dim=1)  # (B, V, F)

    def queries(self, cls: torch.Tensor, inputs: V4Inputs) -> torch.Tensor:
        """CLS (B, N, C) + EE state -> queries (B, T, F)."""
        state = ee_state_features(
            self.config, inputs.T_world_ee.float(), inputs.gripper.float(), inputs.past_positions_world.float()
        ).to(cls.dtype)  # (B, state_dim)
        h = self.global_act(self.global_mlp(torch.cat([state, cls.flatten(1)], dim=-1)))  # (B, G)
        return self.q_head(h).reshape(cls.shape[0], self.config.n_window, self.config.feat_dim)  # (B, T, F)

    # ------------------------------------------------------------------------------------------------ forward
    def forward(self, inputs: V4Inputs, targets: V4Targets | None = None) -> V4Output:
        cfg = self.config
        with torch.autocast(device_type=inputs.K_img.device.type, enabled=False):
            # the cache compares poses: a host sync on a GPU, where the grid is a few kernels anyway, so CPU only
            use_cache = self.fast_inference and not self.training and inputs.K_img.device.type == "cpu"
            grid = build_voxel_grid(
                cfg, inputs.K_img.float(), inputs.T_world_cam.float(), cache=self.grid_cache if use_cache else None
            )
        patches, cls = self.patch_features(inputs.images, inputs.K_img, inputs.T_world_cam)  # (B,N,F,h,w), (B,N,C)
        feat_maps = self.interpolate_to_prediction_grid(patches)  # (B, N, F, P, P)
        q = self.queries(cls, inputs)  # (B, T, F)
        if self.fast_inference and targets is None and not self.training:
            voxel_feat, at, logits, lse, argmax = voxel_features_fast(self, feat_maps, grid, q)  # the same, less work
        else:
            at = lse = argmax = None  # the normaliser is computed on first use (actions.step_log_normaliser)
            voxel_feat = self.voxel_features(feat_maps, grid)  # (B, V, F)
            logits = torch.einsum("btf,bvf->btv", q, voxel_feat) * self.logit_log_scale.exp()  # (B, T, V)
            logits = logits.float().masked_fill(~grid.valid.unsqueeze(1), float("-inf"))  # (B, T, V)
        if argmax is None:
            argmax = logits.detach().argmax(dim=-1)  # (B, T)
        chosen = argmax  # (B, T) inference: the argmax voxel
        if targets is not None:
            chosen = training_head_voxel(logits.detach(), targets, chosen)  # (B, T)
        if at is None:  # the features at the chosen voxels (the fast path kept only those)
            at = torch.gather(voxel_feat, 1, chosen.unsqueeze(-1).expand(-1, -1, voxel_feat.shape[-1]))  # (B, T, F)
        head = self.grip_rot_head(torch.cat([at, q.to(at.dtype)], dim=-1)).float()  # (B, T, G + 3R)
        out = V4Output(
            volume_logits=logits,
            voxel_xyz=grid.voxel_xyz,
            voxel_valid=grid.valid,
            voxel_feat=voxel_feat,
            query=q,
            chosen_voxel=chosen,
            gripper_logits=head[..., : self.n_grip],
            rotation_logits=head[..., self.n_grip :].reshape(*head.shape[:2], 3, self.n_rot),
            grid=grid,
            cls=cls,
            patch_features=patches.detach(),
            volume_lse=lse,
            argmax_voxel=argmax,
        )
        if targets is not None:
            out.losses = compute_losses(out, targets, cfg)
        return out

    def decode(self, out: V4Output, refine: bool = False) -> list:
        """``ParaModel.decode``: the argmax voxel of each step, refined by the local soft-argmax with ``refine``."""
        return decode_volume(self.config, out, refine=refine)

    def visualisation(self, out: V4Output, top_k: int):
        """``ParaModel.visualisation``: the most probable voxels (``para_core.model.actions.top_voxels``)."""
        return top_voxels(out, top_k, fast=self.fast_inference)

    def feature_maps(self, inputs: V4Inputs) -> torch.Tensor:
        """``VoxelVolumeModel.feature_maps``: (B, N, F, P, P) per-view features before the voxel fusion."""
        return self.image_features(inputs.images, inputs.K_img, inputs.T_world_cam)[0]

    def explain_score(self, inputs: V4Inputs, out: V4Output, step: int, voxel: int) -> ScoreExplanation:
        """``VoxelVolumeModel.explain_score``: the step's query and the fused feature of the voxel (reference path
        only: the fast path keeps no per-voxel features)."""
        if out.voxel_feat is None:
            raise ValueError("explain_score needs the reference path's voxel features: run with fast_inference off")
        q = out.query[0, step].float().cpu().numpy()  # (F,)
        vf = out.voxel_feat[0, voxel].float().cpu().numpy()  # (F,)
        return ScoreExplanation(
            vectors=np.stack([q, vf]),  # (2, F)
            labels=(f"query q[t={step}]", "fused voxel feature at the argmax"),
            formula="volume_logits[t,v] = scale q[t] . voxel_feat[v] (v4: fused per-voxel features)",
            logit_scale=float(self.logit_log_scale.exp()),
        )

    def param_groups(self) -> list[dict]:
        """Optimizer groups: backbone at lr * backbone_lr_mult, everything else at lr."""
        return backbone_and_head_groups(self, self.config)


def training_head_voxel(logits: torch.Tensor, targets: V4Targets, fallback: torch.Tensor) -> torch.Tensor:
    """The voxel the gripper/rotation head reads in training (module docstring, step 7): of each step's GT voxels
    (``targets.voxel_index`` where ``voxel_weight > 0``) the one with the highest logit, ``fallback`` (the argmax
    voxel) where no view sees the point. Ties go to the earlier view.

    :param logits: (B, T, V) (detached); ``fallback``: (B, T) long. :return: (B, T) long.
    """
    cand = torch.gather(logits, -1, targets.voxel_index)  # (B, T, N) logit of each view's GT voxel
    seen = targets.voxel_weight > 0  # (B, T, N)
    # a seen voxel always beats an unseen one, even at -inf (a GT voxel the model's own grid masks at its edge)
    cand = torch.where(seen, cand.clamp(min=torch.finfo(cand.dtype).min), torch.full_like(cand, float("-inf")))
    best = torch.gather(targets.voxel_index, -1, cand.argmax(-1, keepdim=True)).squeeze(-1)  # (B, T)
    return torch.where(seen.any(-1), best, fallback)


# ---------------------------------------------------------------------------------------------------------- losses
def volume_ce(
    logits: torch.Tensor, target_index: torch.Tensor, target_weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft-target cross-entropy over voxels, per step.

    :param logits: (B, T, V) (-inf allowed at invalid voxels, never at a target voxel with weight > 0).
    :param target_index: (B, T, K) voxel indices; ``target_weight``: (B, T, K), rows summing to 1 or 0.
    :return: mean CE over steps with a target (scalar) and the per-step CE (B, T) (0 where there is no target).
    """
    lse = torch.logsumexp(logits, dim=-1)  # (B, T)
    picked = torch.gather(logits, -1, target_index)  # (B, T, K)
    picked = torch.where(target_weight > 0, picked, torch.zeros_like(picked))  # avoid 0 * -inf
    has = target_weight.sum(-1) > 0  # (B, T)
    per_step = torch.where(has, lse - (target_weight * picked).sum(-1), torch.zeros_like(lse))  # (B, T)
    mean = per_step.sum() / has.sum().clamp(min=1)
    return mean, per_step


def uniform_voxel_ce_baseline(n_voxels: int) -> float:
    """The voxel CE per step of uniform logits over all V voxels: log(V) (paper: 13.86)."""
    return math.log(n_voxels)


def seed_joint_baseline(n_voxels: int, n_steps: int) -> float:
    """The paper's normalisation, one softmax over all (step, voxel) pairs: log(V * T) (paper: 17.33)."""
    return math.log(n_voxels * n_steps)


def compute_losses(out: V4Output, targets: V4Targets, config: V4Config) -> dict[str, torch.Tensor]:
    voxel, _ = volume_ce(out.volume_logits, targets.voxel_index, targets.voxel_weight)
    grip = Fn.cross_entropy(
        out.gripper_logits.reshape(-1, out.gripper_logits.shape[-1]), targets.gripper_bin.reshape(-1)
    )
    rot = Fn.cross_entropy(
        out.rotation_logits.reshape(-1, out.rotation_logits.shape[-1]), targets.rotation_bins.reshape(-1)
    )
    total = voxel + config.gripper_loss_weight * grip + config.rotation_loss_weight * rot
    return {"loss": total, "voxel_ce": voxel, "gripper_ce": grip, "rotation_ce": rot}
