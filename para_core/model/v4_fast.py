"""The fast inference path of the v4 voxel features: the same numbers as ``ParaV4Model.voxel_features``, far less work.

Measured first (paper config, 2 CPU cores, one forward of about 10 s on a loaded machine): backbone 34 %, fusion
inputs (projection + ``grid_sample`` of every voxel into every view + the concatenated (V, N (F + 1) + h) input) 23 %,
voxel MLP 17 %, decoding 12 %. The fusion input and the voxel MLP's first layer are where the redundancy is; the
reference path computes, for each of the V voxels, ``W1 @ [f_0 v_0, v_0, ..., f_{N-1} v_{N-1}, v_{N-1}, h(z)] + b1``.
Split ``W1`` by the input's blocks and three of them turn out not to depend on the voxel:

* a voxel of view k lies on the ray of one of view k's own pixels, so it projects back onto that pixel's centre:
  its own-view feature is the pixel's feature (bilinear sampling at a pixel centre returns the pixel) and it is
  visible there. ``W1_fk @ f_k`` is computed once per PIXEL (P^2 of them) instead of once per voxel (Z P^2);
* the height encoding of a voxel depends on its bin only (every voxel of bin i of view k lies on the plane at
  ``z_bin_centres[k, i]``): ``W1_h @ h(z)`` is computed once per (view, bin);
* only the other views' features need the projection and ``grid_sample`` (N - 1 of N, half for the paper's two views).

The sums are then added per voxel, and the rest of the MLP runs as in the reference. Invalid voxels (behind their
view's camera or outside the workspace box; -inf logits in the reference) are skipped on CPU: only the valid ones are
gathered and computed (69 % of the paper grid, 43 % of pick_place's for the benchmark's cameras); their features are
left 0 and their logits -inf. On a GPU every voxel is computed, in fixed-size slices of the config's
``voxel_chunk_size``, so the forward needs no host synchronisation (finding the valid ones would). On CPU voxels are
processed in chunks of ``FAST_CHUNK_VOXELS`` that stay in cache. Each chunk's logits, their logsumexp and a running
argmax are taken while its features are there. Geometry stays fp32. Equivalence with the reference (argmax, logits within float tolerance) is tested in
``test/test_core_fast_path.py``.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as Fn

from para_core.model.geometry import project, uv_to_grid_sample
from para_core.model.voxels import VoxelGrid


def first_layer_blocks(model, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns of the voxel MLP's first weight (H, in) for view ``k``'s feature block (H, F) and its visibility (H,)."""
    F = model.config.feat_dim
    W1 = model.voxel_mlp[0].weight
    start = k * (F + 1)
    return W1[:, start:start + F], W1[:, start + F]


def height_term(model, grid: VoxelGrid, k: int) -> torch.Tensor:
    """``W1_h @ h(z)`` of every bin of view ``k``: (B, Z, H)."""
    cfg = model.config
    W1 = model.voxel_mlp[0].weight
    W_h = W1[:, cfg.n_views * (cfg.feat_dim + 1):]  # (H, h)
    z = grid.z_bin_centres[:, k]  # (B, Z)
    if cfg.height_encoding == "learned":
        Z = cfg.n_height_bins
        enc = model.height_emb.weight[k * Z:(k + 1) * Z].unsqueeze(0).expand(z.shape[0], -1, -1)  # (B, Z, h)
    else:
        from para_core.model.v4 import sincos_height_encoding

        enc = sincos_height_encoding(z, cfg.z_lo_m, cfg.z_hi_m, cfg.height_enc_dim)  # (B, Z, h)
    return enc.to(W_h.dtype) @ W_h.T  # (B, Z, H)


FAST_CHUNK_VOXELS = 16384
"""Voxels per chunk of the fast path: small enough that a chunk's (v, H) activations stay in the CPU's cache between
the MLP's layers. Measured on the paper config (2 Xeon cores, fp32, dense bins): 1.53 s at the config's 262,144-voxel
chunks, 0.80 s at 65,536, 0.58 s at 16,384, 0.60 s at 4,096 (per-chunk overhead starts to show)."""


class FastVolume(NamedTuple):
    voxel_feat: torch.Tensor  # (B, V, F); 0 at skipped (invalid) voxels
    logits: torch.Tensor | None  # (B, T, V) fp32, -inf at invalid voxels (None without a query)
    log_normaliser: torch.Tensor | None  # (B, T) logsumexp of each step's logits, accumulated chunk by chunk
    argmax: torch.Tensor | None  # (B, T) long: each step's argmax voxel (the first of equal maxima, as torch.argmax)


def voxel_features_fast(model, feat_maps: torch.Tensor, grid: VoxelGrid, query: torch.Tensor | None = None,
                        chunk_voxels: int | None = None, skip_invalid: bool | None = None) -> FastVolume:
    """(B, N, F, P, P) feature maps -> (B, V, F) voxel features, equal to ``model.voxel_features`` at every valid
    voxel (module docstring).

    With ``query`` (B, T, F) it also returns the masked volume logits (B, T, V) fp32, their per-step logsumexp and
    argmax, each chunk's dot products and exponentials taken while its features are still in cache (the reference
    reads the whole (V, F) tensor again in one einsum, copies the (T, V) logits once more to mask them, and decoding
    then reads them twice more for a softmax). ``chunk_voxels``: default ``FAST_CHUNK_VOXELS`` on CPU, the config's
    ``voxel_chunk_size`` on a GPU. ``skip_invalid`` (default: on CPU) computes only the valid voxels.
    ``model`` is a ``ParaV4Model``; inference only (no gradient path is kept cheap here)."""
    cfg = model.config
    B, N, F, P, _ = feat_maps.shape
    Z, PP = cfg.n_height_bins, P * P
    V, device = N * Z * PP, feat_maps.device
    on_cpu = device.type == "cpu"
    skip_invalid = on_cpu if skip_invalid is None else skip_invalid
    if chunk_voxels is None:  # CPU: cache-sized; a GPU wants few large launches (the config's chunk, else everything)
        chunk_voxels = FAST_CHUNK_VOXELS if on_cpu else (cfg.voxel_chunk_size or V)
    first, rest = model.voxel_mlp[0], model.voxel_mlp[1:]  # Linear, then GELU, Linear, GELU, Linear
    chunk_voxels = max(1, int(chunk_voxels))
    voxel_feat = feat_maps.new_zeros(B, V, cfg.feat_dim)  # (B, V, F)
    logits = lse = best = argmax = None
    if query is not None:
        T = query.shape[1]
        q_scaled = query * model.logit_log_scale.exp()  # (B, T, F): the scale on T x F numbers, not T x V
        logits = torch.full((B, T, V), float("-inf"), dtype=torch.float32, device=device)  # (B, T, V)
        lse = torch.full((B, T), float("-inf"), dtype=torch.float32, device=device)
        best = lse.clone()  # (B, T) the largest logit so far
        argmax = torch.zeros(B, T, dtype=torch.long, device=device)
    heights_of_view = [height_term(model, grid, k) for k in range(N)]  # N x (B, Z, H), for the whole batch at once
    for b in range(B):
        for k in range(N):
            W_fk, w_vk = first_layer_blocks(model, k)
            own = feat_maps[b, k].flatten(1).T.to(W_fk.dtype) @ W_fk.T  # (P*P, H) once per pixel
            base = own + (first.bias + w_vk)  # (P*P, H): own features, own visibility (1), bias
            heights = heights_of_view[k][b]  # (Z, H)
            view_start = k * Z * PP
            view_valid = grid.valid[b, view_start:view_start + Z * PP]  # (Z*P*P,)
            local = (view_valid.nonzero().squeeze(1) if skip_invalid
                     else torch.arange(Z * PP, device=device))  # (n,) voxel indices within the view, ascending
            for c0 in range(0, local.shape[0], chunk_voxels):
                ids = local[c0:c0 + chunk_voxels]  # (v,)
                pre = base[ids % PP] + heights[ids // PP]  # (v, H)
                voxel_ids = ids + view_start  # (v,) into V
                xyz = grid.voxel_xyz[b, voxel_ids]  # (v, 3)
                for j in range(N):
                    if j != k:
                        _add_other_view(model, pre, xyz, feat_maps[b, j], grid.K_pred[b, j], grid.T_world_cam[b, j], j)
                feat = rest(pre)  # (v, F)
                voxel_feat[b, voxel_ids] = feat
                if logits is None:
                    continue
                chunk = (q_scaled[b] @ feat.T).float()  # (T, v)
                if not skip_invalid:
                    chunk.masked_fill_(~grid.valid[b, voxel_ids].unsqueeze(0), float("-inf"))
                logits[b].index_copy_(1, voxel_ids, chunk)
                lse[b] = torch.logaddexp(lse[b], torch.logsumexp(chunk, dim=-1))  # (T,)
                chunk_best, chunk_arg = chunk.max(dim=-1)  # (T,): the first maximum within the chunk
                # strict: an equal maximum in a later chunk is not the first one; a NaN wins, as in torch.argmax
                better = (chunk_best > best[b]) | (chunk_best.isnan() & ~best[b].isnan())
                best[b] = torch.where(better, chunk_best, best[b])
                argmax[b] = torch.where(better, voxel_ids[chunk_arg], argmax[b])
    return FastVolume(voxel_feat, logits, lse, argmax)


def _add_other_view(model, pre: torch.Tensor, xyz: torch.Tensor, feat_map: torch.Tensor, K: torch.Tensor,
                    T_world_cam: torch.Tensor, j: int) -> None:
    """``pre += vis * (W_fj f_j(uv) + w_vj)`` for voxels ``xyz`` (v, 3) seen in view j: (v, H) in place. vis is 0 or 1,
    so this equals the reference's ``W_fj (vis f) + vis w_vj``: one matmul and one fused multiply-add."""
    F, P, _ = feat_map.shape
    W_fj, w_vj = first_layer_blocks(model, j)
    with torch.autocast(device_type=xyz.device.type, enabled=False):  # geometry and sampling in fp32
        uv, depth = project(xyz.float(), K.float(), T_world_cam.float())  # (v, 2), (v,)
        g = uv_to_grid_sample(uv, P, P).view(1, -1, 1, 2)  # (1, v, 1, 2)
        sampled = Fn.grid_sample(feat_map.float().unsqueeze(0), g, mode="bilinear", padding_mode="border",
                                 align_corners=False).view(F, -1).T  # (v, F)
    vis = ((depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < P) & (uv[:, 1] >= 0)
           & (uv[:, 1] < P)).to(W_fj.dtype).unsqueeze(-1)  # (v, 1)
    pre.addcmul_(torch.matmul(sampled.to(W_fj.dtype), W_fj.T) + w_vj, vis)
