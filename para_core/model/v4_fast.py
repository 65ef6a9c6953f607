"""The fast inference path of the v4 voxel features: the same numbers as ``ParaV4Model.voxel_features``, far less work.

Profiled first (docs/benchmarks.md, "Fast path"): after the backbone, the fusion inputs (projection + ``grid_sample``
of every voxel into every view + the concatenated (V, N (F + 1) + h) input), the voxel MLP and decoding take most of a
forward. The fusion input and the voxel MLP's first layer are where the redundancy is; the
reference path computes, for each of the V voxels, ``W1 @ [f_0 v_0, v_0, ..., f_{N-1} v_{N-1}, v_{N-1}, h(z)] + b1``.
Split ``W1`` by the input's blocks and three of them turn out not to depend on the voxel:

* a voxel of view k lies on the ray of one of view k's own pixels, so it projects back onto that pixel's centre:
  its own-view feature is the pixel's feature (bilinear sampling at a pixel centre returns the pixel) and it is
  visible there. ``W1_fk @ f_k`` is computed once per PIXEL (P^2 of them) instead of once per voxel (Z P^2);
* the height encoding of a voxel depends on its bin only (every voxel of bin i of view k lies on the plane at
  ``z_bin_centres[k, i]``): ``W1_h @ h(z)`` is computed once per (view, bin);
* only the other views' features need the projection and ``grid_sample`` (N - 1 of N, half for the paper's two views).

The sums are then added per voxel, and the rest of the MLP runs as in the reference. Voxels are processed in boxes
(``plan_blocks``: a few bins x a band of rows x a band of columns of one view), so every per-pixel and per-bin term
is a slice and a broadcast, never a gather. On CPU the boxes bound each bin's valid voxels (outside the workspace box
or behind the camera: -inf logits in the reference) and hold ``FAST_CHUNK_VOXELS``, so they stay in cache; for the
benchmark's paper cameras they cover 788 k voxels where 727 k are valid, of 1,048 k. On a GPU every voxel is computed,
in boxes of the config's ``voxel_chunk_size``, so the forward needs no host synchronisation (bounding the valid ones
would). Each box's logits, their maximum, argmax and logsumexp, and the features at a new argmax, are taken while its
features are in cache; the (V, F) features themselves are not kept. Geometry stays fp32. Equivalence with the
reference (argmax, logits within float tolerance) is tested in ``test/test_core_fast_path.py``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as Fn

from para_core.model.geometry import project, uv_to_grid_sample
from para_core.model.layers import sincos_height_encoding
from para_core.model.voxels import VoxelGrid


def first_layer_blocks(model, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns of the voxel MLP's first weight (H, in) for view ``k``'s feature block (H, F) and its visibility (H,)."""
    F = model.config.feat_dim
    W1 = model.voxel_mlp[0].weight
    start = k * (F + 1)
    return W1[:, start : start + F], W1[:, start + F]


def height_term(model, grid: VoxelGrid, k: int) -> torch.Tensor:
    """``W1_h @ h(z)`` of every bin of view ``k``: (B, Z, H)."""
    cfg = model.config
    W1 = model.voxel_mlp[0].weight
    W_h = W1[:, cfg.n_views * (cfg.feat_dim + 1) :]  # (H, h)
    z = grid.z_bin_centres[:, k]  # (B, Z)
    if cfg.height_encoding == "learned":
        Z = cfg.n_height_bins
        enc = model.height_emb.weight[k * Z : (k + 1) * Z].unsqueeze(0).expand(z.shape[0], -1, -1)  # (B, Z, h)
    else:
        enc = sincos_height_encoding(z, cfg.z_lo_m, cfg.z_hi_m, cfg.height_enc_dim)  # (B, Z, h)
    return enc.to(W_h.dtype) @ W_h.T  # (B, Z, H)


FAST_CHUNK_VOXELS = 16384
"""Voxels per block of the fast path on CPU: small enough that a block's (v, H) activations stay in the CPU's cache
between the MLP's layers (larger blocks were up to 2.6x slower, smaller ones pay a per-block overhead; measured:
docs/benchmarks.md, "Fast path")."""


class Block(NamedTuple):
    """A box of one view's voxels: bins [bin0, bin1) x rows [row0, row1) x columns [col0, col1). In the flat voxel
    order (view, bin, row, col) a box's voxels come in ascending order, and so do the boxes of ``plan_blocks``."""

    bin0: int
    bin1: int
    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def shape(self) -> tuple[int, int, int]:
        """(bins, rows, columns) of the box."""
        return self.bin1 - self.bin0, self.row1 - self.row0, self.col1 - self.col0

    @property
    def n_voxels(self) -> int:
        nb, nr, nc = self.shape
        return nb * nr * nc

    @property
    def slices(self) -> tuple[slice, slice, slice]:
        return slice(self.bin0, self.bin1), slice(self.row0, self.row1), slice(self.col0, self.col1)

    def flat_index(self, local: torch.Tensor, view: int, n_bins: int, P: int) -> torch.Tensor:
        """Indices into this box of ``view`` (its voxels in (bin, row, col) order) -> flat voxel indices
        ``((view Z + bin) P + row) P + col``."""
        _, nr, nc = self.shape
        bin_i, row, col = self.bin0 + local // (nr * nc), self.row0 + (local // nc) % nr, self.col0 + local % nc
        return ((view * n_bins + bin_i) * P + row) * P + col


def _band(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z, P) bool -> per bin: any (Z,), the first True index (Z,) and one past the last (Z,)."""
    P = mask.shape[1]
    return mask.any(axis=1), mask.argmax(axis=1), P - mask[:, ::-1].argmax(axis=1)


def plan_blocks(valid: np.ndarray | None, n_bins: int, P: int, chunk_voxels: int) -> list[Block]:
    """Cover every valid voxel of one view with boxes of at most ``max(chunk_voxels, box width)`` voxels, in voxel
    order.

    :param valid: (Z, P, P) bool validity of the view's voxels on the host, or None: every voxel (a GPU's dense plan,
        decided from the shapes alone, so no host synchronisation).
    Each bin's valid voxels are bounded by the box of its first and last valid row and column (a plane's valid region,
    the workspace box seen through a pinhole, is convex, so the box wastes little); consecutive non-empty bins share a
    box, the union of theirs, while it fits ``chunk_voxels``; a bin too large for one box is split by rows.
    """
    Z = n_bins
    if valid is None:
        any_bin, r0s, r1s, c0s, c1s = np.ones(Z, bool), np.zeros(Z, int), np.full(Z, P), np.zeros(Z, int), np.full(Z, P)
    else:
        any_bin, r0s, r1s = _band(valid.any(axis=2))  # (Z,) each: rows that hold a valid voxel
        _, c0s, c1s = _band(valid.any(axis=1))  # columns that do
    blocks: list[Block] = []
    i = 0
    while i < Z:
        if not any_bin[i]:
            i += 1
            continue
        box, j = [int(r0s[i]), int(r1s[i]), int(c0s[i]), int(c1s[i])], i + 1
        while j < Z and any_bin[j]:
            grown = [
                min(box[0], int(r0s[j])),
                max(box[1], int(r1s[j])),
                min(box[2], int(c0s[j])),
                max(box[3], int(c1s[j])),
            ]
            if (j + 1 - i) * (grown[1] - grown[0]) * (grown[3] - grown[2]) > chunk_voxels:
                break
            box, j = grown, j + 1
        r0, r1, c0, c1 = box
        rows_per_box = max(1, chunk_voxels // (c1 - c0)) if j == i + 1 else r1 - r0  # one bin: split by rows
        for a in range(r0, r1, rows_per_box):
            blk = Block(i, j, a, min(a + rows_per_box, r1), c0, c1)
            if valid is None or valid[i:j, blk.row0 : blk.row1, c0:c1].any():  # rows of a split bin may hold none
                blocks.append(blk)
        i = j
    return blocks


class FastVolume(NamedTuple):
    voxel_feat: torch.Tensor | None  # (B, V, F) with ``keep_voxel_feat`` (unspecified at invalid voxels), else None
    argmax_feat: torch.Tensor | None  # (B, T, F) the features at each step's argmax voxel (None without a query)
    logits: torch.Tensor | None  # (B, T, V) fp32, -inf at invalid voxels (None without a query)
    log_normaliser: torch.Tensor | None  # (B, T) logsumexp of each step's logits, accumulated block by block
    argmax: torch.Tensor | None  # (B, T) long: each step's argmax voxel (the first of equal maxima, as torch.argmax)


def voxel_features_fast(
    model,
    feat_maps: torch.Tensor,
    grid: VoxelGrid,
    query: torch.Tensor | None = None,
    chunk_voxels: int | None = None,
    skip_invalid: bool | None = None,
    keep_voxel_feat: bool = False,
) -> FastVolume:
    """(B, N, F, P, P) feature maps -> the volume logits of queries ``query`` (B, T, F), equal to the reference's at
    every valid voxel (module docstring), with their per-step logsumexp and argmax and the features at that argmax.

    Each block's dot products, maximum and exponentials are taken while its features are still in cache (the
    reference reads the whole (V, F) tensor again in one einsum, copies the (T, V) logits once more to mask them, and
    decoding then reads them twice more for a softmax). The (B, V, F) features themselves are kept only with
    ``keep_voxel_feat`` (always without a query): the head reads one voxel per step. ``chunk_voxels``: voxels per
    block, default ``FAST_CHUNK_VOXELS`` on CPU, the config's ``voxel_chunk_size`` on a GPU. ``skip_invalid``
    (default: on CPU) computes only the boxes that bound each bin's valid voxels; that needs the validity mask on the
    host, so a GPU computes every voxel. ``model`` is a ``ParaV4Model``; inference only."""
    cfg = model.config
    B, N, F, P, _ = feat_maps.shape
    Z, PP = cfg.n_height_bins, P * P
    V, device = N * Z * PP, feat_maps.device
    on_cpu = device.type == "cpu"
    skip_invalid = on_cpu if skip_invalid is None else skip_invalid
    if chunk_voxels is None:  # CPU: cache-sized; a GPU wants few large launches (the config's chunk, else everything)
        chunk_voxels = FAST_CHUNK_VOXELS if on_cpu else (cfg.voxel_chunk_size or V)
    chunk_voxels = max(1, int(chunk_voxels))
    keep_voxel_feat = keep_voxel_feat or query is None
    first, rest = model.voxel_mlp[0], model.voxel_mlp[1:]  # Linear, then GELU, Linear, GELU, Linear
    H = first.out_features
    valid6 = grid.valid.view(B, N, Z, P, P)
    xyz6 = grid.voxel_xyz.view(B, N, Z, P, P, 3)
    voxel_feat = feat_maps.new_zeros(B, V, cfg.feat_dim) if keep_voxel_feat else None  # (B, V, F)
    feat6 = voxel_feat.view(B, N, Z, P, P, -1) if keep_voxel_feat else None
    logits = steps = None
    if query is not None:
        q_scaled = query * model.logit_log_scale.exp()  # (B, T, F): the scale on T x F numbers, not T x V
        logits = torch.full((B, query.shape[1], V), float("-inf"), dtype=torch.float32, device=device)  # (B, T, V)
        logits6 = logits.view(B, -1, N, Z, P, P)
        steps = _StepReduction.empty(q_scaled)
    valid_host = valid6.cpu().numpy() if skip_invalid else None  # (B, N, Z, P, P): one host copy per forward
    heights_of_view = [height_term(model, grid, k) for k in range(N)]  # N x (B, Z, H), for the whole batch at once
    seen_weights = [_seen_weight(model, j) for j in range(N)]  # N x (F + 1, H): once a forward, not once a box
    # one channel more for the sampler to write the visibility into (_add_other_view); fp32: sampling stays fp32
    padded_maps = Fn.pad(feat_maps.float(), (0, 0, 0, 0, 0, 1)) if N > 1 else None  # (B, N, F + 1, P, P)
    for b in range(B):
        for k in range(N):
            W_fk, w_vk = first_layer_blocks(model, k)
            own = feat_maps[b, k].flatten(1).T.to(W_fk.dtype) @ W_fk.T  # (P*P, H) once per pixel
            base = (own + (first.bias + w_vk)).view(P, P, H)  # own features, own visibility (1), bias
            heights = heights_of_view[k][b]  # (Z, H)
            for blk in plan_blocks(None if valid_host is None else valid_host[b, k], Z, P, chunk_voxels):
                box = blk.slices  # (bins, rows, cols) of the view's (Z, P, P) voxels
                nb, nr, nc = blk.shape
                pre = (base[box[1:]].unsqueeze(0) + heights[box[0]].view(nb, 1, 1, H)).view(-1, H)  # (v, H)
                xyz = xyz6[b, k][box].reshape(-1, 3)  # (v, 3), v = nb * nr * nc
                for j in range(N):
                    if j != k:
                        _add_other_view(
                            pre, xyz, padded_maps[b, j], grid.K_pred[b, j], grid.T_world_cam[b, j], seen_weights[j]
                        )
                feat = rest(pre)  # (v, F)
                if feat6 is not None:
                    feat6[b, k][box] = feat.view(nb, nr, nc, -1)
                if logits is None:
                    continue
                chunk = (q_scaled[b] @ feat.T).float()  # (T, v)
                chunk.masked_fill_(~valid6[b, k][box].reshape(1, -1), float("-inf"))
                logits6[b, :, k][(slice(None),) + box] = chunk.view(-1, nb, nr, nc)
                steps.add_box(b, chunk, feat, lambda local, blk=blk, k=k: blk.flat_index(local, k, Z, P))
    if steps is None:
        return FastVolume(voxel_feat, None, None, None, None)
    return FastVolume(voxel_feat, steps.argmax_feat, logits, steps.lse, steps.argmax)


class _StepReduction(NamedTuple):
    """What each step keeps of the boxes seen so far: the logsumexp, the largest logit, its voxel and its features.
    Boxes must come in flat voxel order, so that the first of equal maxima wins, as in ``torch.argmax``."""

    lse: torch.Tensor  # (B, T) logsumexp of the logits so far
    best: torch.Tensor  # (B, T) the largest logit so far
    argmax: torch.Tensor  # (B, T) long, its flat voxel index
    argmax_feat: torch.Tensor  # (B, T, F) that voxel's features

    @classmethod
    def empty(cls, q_scaled: torch.Tensor) -> _StepReduction:
        B, T, F = q_scaled.shape
        lse = torch.full((B, T), float("-inf"), dtype=torch.float32, device=q_scaled.device)
        return cls(
            lse,
            lse.clone(),
            torch.zeros(B, T, dtype=torch.long, device=q_scaled.device),
            torch.zeros(B, T, F, dtype=q_scaled.dtype, device=q_scaled.device),
        )

    def add_box(self, b: int, chunk: torch.Tensor, feat: torch.Tensor, flat_index) -> None:
        """Fold in one box of batch element b: its masked logits ``chunk`` (T, v), features ``feat`` (v, F) and
        ``flat_index`` (box-local indices -> flat voxel indices). In place."""
        chunk_best, chunk_arg = chunk.max(dim=-1)  # (T,): the first maximum within the box
        self.lse[b] = torch.logaddexp(self.lse[b], _logsumexp_given_max(chunk, chunk_best))  # (T,)
        # strict: an equal maximum in a later box is not the first one; a NaN wins, as in torch.argmax
        better = (chunk_best > self.best[b]) | (chunk_best.isnan() & ~self.best[b].isnan())  # (T,)
        self.best[b] = torch.where(better, chunk_best, self.best[b])
        self.argmax[b] = torch.where(better, flat_index(chunk_arg), self.argmax[b])
        self.argmax_feat[b] = torch.where(
            better.unsqueeze(-1), feat[chunk_arg].to(self.argmax_feat.dtype), self.argmax_feat[b]
        )


def _logsumexp_given_max(x: torch.Tensor, row_max: torch.Tensor) -> torch.Tensor:
    """``torch.logsumexp(x, -1)`` of (T, v) ``x`` whose row maxima (T,) are already known (the argmax needed them):
    one pass over ``x`` fewer. Rows of -inf give -inf, a NaN gives NaN, as logsumexp does."""
    shift = torch.where(row_max.isinf(), torch.zeros_like(row_max), row_max)  # (T,) +-inf rows: shift by 0
    return (x - shift.unsqueeze(-1)).exp_().sum(-1).log_() + shift


def _seen_weight(model, j: int) -> torch.Tensor:
    """The first layer's columns for view ``j``'s input block [features, visibility], transposed: (F + 1, H)."""
    W_fj, w_vj = first_layer_blocks(model, j)
    return torch.cat([W_fj, w_vj.unsqueeze(1)], dim=1).T  # (F + 1, H)


def _add_other_view(
    pre: torch.Tensor,
    xyz: torch.Tensor,
    padded_map: torch.Tensor,
    K: torch.Tensor,
    T_world_cam: torch.Tensor,
    seen_weight: torch.Tensor,
) -> None:
    """``pre += W_fj (vis f_j(uv)) + vis w_vj`` for voxels ``xyz`` (v, 3), vis = 1 where view j sees them, else 0:
    (v, H) in place, as one matrix product accumulated into ``pre`` (no (v, H) temporary); ``seen_weight``:
    ``_seen_weight(model, j)``. ``padded_map`` (F + 1, P, P) fp32 is view j's feature map with one channel more,
    whose samples are replaced by vis: the (v, F + 1) input block is the sampler's own output, filled in place (no
    concatenation)."""
    F, P = padded_map.shape[0] - 1, padded_map.shape[1]
    with torch.autocast(device_type=xyz.device.type, enabled=False):  # geometry and sampling in fp32
        uv, depth = project(xyz.float(), K.float(), T_world_cam.float())  # (v, 2), (v,)
        g = uv_to_grid_sample(uv, P, P).view(1, -1, 1, 2)  # (1, v, 1, 2)
        seen_cf = Fn.grid_sample(
            padded_map.unsqueeze(0), g, mode="bilinear", padding_mode="border", align_corners=False
        ).view(F + 1, -1)  # (F + 1, v)
    vis = (depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < P) & (uv[:, 1] >= 0) & (uv[:, 1] < P)  # (v,)
    seen_cf[:F] *= vis  # features where view j sees the voxel, 0 elsewhere
    seen_cf[F] = vis  # the visibility itself: the reference's input block of view j is [vis f_j(uv), vis]
    pre.addmm_(seen_cf.T.to(seen_weight.dtype), seen_weight)  # (v, H) += (v, F + 1) @ (F + 1, H), in place
