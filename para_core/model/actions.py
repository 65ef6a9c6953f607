"""Action labels and decoding: ground-truth EE trajectory -> ``V4Targets``; model outputs -> action chunk.

Targets (``encode_targets``):

- Voxels: for each step's GT position, the voxel of each view that contains it (``para_core.model.voxels.locate_points``),
  weighted 1 / (number of views where it is visible): the soft target of the voxel CE. ``teacher_voxel`` is that voxel
  in the first view (in ``view_names`` order) where it is visible, -1 when it is visible in none: a fixed GT voxel
  for tools and tests. It is NOT where the gripper/rotation head trains: the soft target makes every view's copy of
  the point equally right, so the view the inference argmax lands in is the model's preference, which labels cannot
  know. The model therefore trains its head at the GT voxel it currently scores highest (all of the point's voxels
  are in ``voxel_index`` / ``voxel_weight``), the voxel inference reads whenever it localises the point correctly
  (``para_core.model.v4.training_head_voxel``). Rules decidable here (first visible view, finest voxel, ...) would pin
  the head to one view that inference need not pick.
- Gripper: bin ``round(g * (G - 1))`` of the opening g in [0, 1]; bin i decodes to ``i / (G - 1)``.
- Rotation: the rotation vector r of ``R_ref^T R`` (R_ref = ``rotation_ref_quat_xyzw``, a top-down tool pose, so the
  usual grasps sit near r = 0, far from the pi-ambiguity and with no gimbal lock); each component is binned into
  ``n_rotation_bins`` bins of width ``w = 2 * rotation_range_rad / n_rotation_bins`` whose centres are ``k * w`` for
  ``k = i - n_rotation_bins // 2``: r = 0 (the reference pose itself) is always a bin CENTRE, so the top-down pose
  round-trips exactly and noise of less than half a bin cannot flip its bin (with the plain split of
  [-range, range] and an even bin count, 0 would lie on a bin edge: the paper's 36 bins decoded the reference pose
  5 deg off per component and flipped under 1e-6 rad of noise). Odd counts span [-range, range] symmetrically;
  even counts span [-range - w/2, range - w/2]. Values beyond the end bins are clipped to them; a bin decodes to its
  centre, so the round trip is exact to half a bin width per component inside the span.

Decoding (``decode_outputs``): per step the argmax voxel's centre (or, with ``refine=True``, a soft-argmax over its
3 x 3 x 3 neighbourhood in the same view's (bin, row, col) grid: sub-voxel precision), the argmax gripper bin and
rotation bins, the confidence (predicted probability mass within ``confidence_radius_m`` of the decoded point, summed
over all views' voxels) and the time offset ``i * frame_stride / dataset_fps`` seconds after the observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from para_core.model.config import V4Config
from para_core.model.model_io import V4Output, V4Targets
from para_core.model.voxels import VoxelGrid, locate_points


def rotation_bin_width(config: V4Config) -> float:
    """Width of one rotation bin, radians."""
    return 2.0 * config.rotation_range_rad / config.n_rotation_bins


def rotation_bin_centres(config: V4Config) -> np.ndarray:
    """(R,) radians; bin ``R // 2`` is centred on 0 (the reference orientation)."""
    R = config.n_rotation_bins
    return (np.arange(R) - R // 2) * rotation_bin_width(config)


def reference_rotation(config: V4Config) -> np.ndarray:
    return Rotation.from_quat(np.asarray(config.rotation_ref_quat_xyzw)).as_matrix()


def encode_rotation(config: V4Config, rotations_world: np.ndarray) -> np.ndarray:
    """(..., 3, 3) tool orientations in world -> (..., 3) int64 bins of the rotation vector of R_ref^T R."""
    rots = np.asarray(rotations_world, dtype=np.float64)
    rel = reference_rotation(config).T @ rots.reshape(-1, 3, 3)  # (M, 3, 3)
    rotvec = Rotation.from_matrix(rel).as_rotvec()  # (M, 3) radians, norm <= pi
    R = config.n_rotation_bins
    bins = np.rint(rotvec / rotation_bin_width(config)).astype(np.int64) + R // 2
    return np.clip(bins, 0, R - 1).reshape(*rots.shape[:-2], 3)


def decode_rotation(config: V4Config, bins: np.ndarray) -> np.ndarray:
    """(..., 3) int bins -> (..., 3, 3) orientations in world: R_ref @ exp(bin centres)."""
    bins = np.asarray(bins)
    rotvec = rotation_bin_centres(config)[bins.reshape(-1, 3)]  # (M, 3)
    mats = reference_rotation(config) @ Rotation.from_rotvec(rotvec).as_matrix()  # (M, 3, 3)
    return mats.reshape(*bins.shape[:-1], 3, 3)


def encode_gripper(config: V4Config, gripper: np.ndarray) -> np.ndarray:
    g = np.clip(np.asarray(gripper, dtype=np.float64), 0.0, 1.0)
    return np.rint(g * (config.n_gripper_bins - 1)).astype(np.int64)


def decode_gripper(config: V4Config, bins: np.ndarray) -> np.ndarray:
    return np.asarray(bins, dtype=np.float64) / (config.n_gripper_bins - 1)


def encode_targets(
    config: V4Config, grid: VoxelGrid, positions_world: torch.Tensor, rotations_world, gripper
) -> V4Targets:
    """GT trajectory -> training targets.

    :param grid: the voxel grid of the same observations (``para_core.model.voxels.build_voxel_grid``).
    :param positions_world: (B, T, 3) metres; ``rotations_world``: (B, T, 3, 3); ``gripper``: (B, T) in [0, 1].
    """
    positions_world = torch.as_tensor(positions_world, device=grid.voxel_xyz.device)
    B, T = positions_world.shape[:2]
    if T != config.n_window:
        raise ValueError(
            f"encode_targets: got {T} steps, config.n_window is {config.n_window}; pass exactly "
            f"n_window future positions (pad by repeating the last one)"
        )
    idx, vis = locate_points(grid, positions_world)  # (B, T, N), (B, T, N)
    n_vis = vis.sum(-1, keepdim=True)  # (B, T, 1)
    weight = vis.to(grid.voxel_xyz.dtype) / n_vis.clamp(min=1)  # (B, T, N)
    first = vis.to(torch.int64).argmax(-1, keepdim=True)  # (B, T, 1) first visible view
    teacher = torch.gather(idx, -1, first).squeeze(-1)  # (B, T)
    teacher = torch.where(n_vis.squeeze(-1) > 0, teacher, torch.full_like(teacher, -1))
    rot_np = torch.as_tensor(rotations_world).detach().cpu().numpy()
    grip_np = torch.as_tensor(gripper).detach().cpu().numpy()
    device = grid.voxel_xyz.device
    return V4Targets(
        voxel_index=idx,
        voxel_weight=weight.float(),
        teacher_voxel=teacher,
        gripper_bin=torch.as_tensor(encode_gripper(config, grip_np), device=device),
        rotation_bins=torch.as_tensor(encode_rotation(config, rot_np), device=device),
        positions_world=positions_world.float(),
    )


@dataclass
class DecodedChunk:
    """One decoded action chunk (numpy, float64 unless noted)."""

    positions_world: np.ndarray  # (T, 3) metres
    rotations_world: np.ndarray  # (T, 3, 3)
    quaternions_xyzw: np.ndarray  # (T, 4)
    gripper: np.ndarray  # (T,) 0..1
    confidence: np.ndarray  # (T,) 0..1
    time_offsets_s: np.ndarray  # (T,) seconds after the observation stamp
    voxel_index: np.ndarray  # (T,) int64 the decoded voxel (the argmax, or the joint decoder's choice)


def time_offsets(config: V4Config) -> np.ndarray:
    """(T,) seconds: step i is ``i * frame_stride / dataset_fps`` after the observation."""
    return np.arange(config.n_window) * config.step_dt_s


def refine_positions(
    config: V4Config, logits: torch.Tensor, voxel_xyz: torch.Tensor, argmax: torch.Tensor
) -> torch.Tensor:
    """Local soft-argmax: softmax-weighted mean of the voxel centres in the 3x3x3 (bin, row, col) neighbourhood of
    each argmax voxel, within the same view's grid (invalid / out-of-grid neighbours get weight 0).

    :param logits: (B, T, V); ``voxel_xyz``: (B, V, 3); ``argmax``: (B, T). :return: (B, T, 3).
    """
    Z, P = config.n_height_bins, config.pred_size
    c = argmax % P
    r = (argmax // P) % P
    zb = (argmax // (P * P)) % Z
    base = argmax - (zb * P * P + r * P + c)  # (B, T) first voxel of the view
    d = torch.arange(-1, 2, device=logits.device)
    dz, dr, dc = torch.meshgrid(d, d, d, indexing="ij")
    dz, dr, dc = dz.reshape(-1), dr.reshape(-1), dc.reshape(-1)  # (27,)
    nz, nr, nc = zb.unsqueeze(-1) + dz, r.unsqueeze(-1) + dr, c.unsqueeze(-1) + dc  # (B, T, 27)
    inside = (nz >= 0) & (nz < Z) & (nr >= 0) & (nr < P) & (nc >= 0) & (nc < P)
    nidx = base.unsqueeze(-1) + (nz.clamp(0, Z - 1) * P * P + nr.clamp(0, P - 1) * P + nc.clamp(0, P - 1))
    nl = torch.gather(logits, -1, nidx)  # (B, T, 27)
    nl = torch.where(inside, nl, torch.full_like(nl, float("-inf")))
    w = torch.softmax(nl.float(), dim=-1)  # (B, T, 27)
    B, T = argmax.shape
    xyz = torch.gather(voxel_xyz, 1, nidx.reshape(B, -1, 1).expand(-1, -1, 3)).reshape(B, T, 27, 3)
    return (w.unsqueeze(-1) * xyz.float()).sum(-2)  # (B, T, 3)


def step_log_normaliser(out: V4Output) -> torch.Tensor:
    """(B, T) ``logsumexp`` of each step's logits over all voxels: log p(voxel) = logit - this. Computed once per
    output (decoding and the visualisation share it) instead of a (T, V) softmax for each."""
    if out.volume_lse is None:
        out.volume_lse = torch.logsumexp(out.volume_logits.float(), dim=-1)  # (B, T)
    return out.volume_lse


def max_step_log_prob(out: V4Output) -> torch.Tensor:
    """(B, V) each voxel's largest log-probability over the steps, ``max_t (logit[t] - lse[t])``: what rviz ranks the
    voxels by, one step at a time into one (V,) buffer instead of a (T, V) temporary."""
    logits, lse = out.volume_logits, step_log_normaliser(out)  # (B, T, V), (B, T)
    best = logits[:, 0].float() - lse[:, :1]  # (B, V)
    for t in range(1, logits.shape[1]):
        torch.maximum(best, logits[:, t].float() - lse[:, t : t + 1], out=best)
    return best


def ball_confidence(config: V4Config, out: V4Output, positions: torch.Tensor) -> torch.Tensor:
    """(B, T) probability mass of the voxels within ``confidence_radius_m`` of each step's ``positions`` (B, T, 3),
    summed over the views (:func:`ball_log_mass_per_view`)."""
    per_view = ball_log_mass_per_view(config, out, positions)  # (B, T, N) log-probabilities
    return torch.logsumexp(per_view, dim=-1).exp()  # (B, T)


def ball_log_mass_per_view(config: V4Config, out: V4Output, positions: torch.Tensor) -> torch.Tensor:
    """(B, T, N) log of the probability mass (of the whole distribution over all views) of view k's voxels within
    ``confidence_radius_m`` of each step's ``positions`` (B, T, 3); -inf where view k has no valid voxel in the ball.

    Exact, and it never forms the (T, V) probabilities: every voxel of bin i of view k lies on the plane at
    ``z_bin_centres[k, i]``, so only the few bins whose plane is within the radius of a point can hold voxels of its
    ball (for the paper grid, 2 cm covers 14 of 128 bins). Those bins are a contiguous block of the voxel index
    (view, bin, row, col), so each (step, view) reads one slice of the logits and voxel centres, and exponentiates
    only the logits inside the ball; the window and the slices' starts cost two small host transfers for the whole
    batch (after the forward, in decoding). The distance test is ``|xyz - p|^2 <= r^2`` in float64 on the same voxel
    centres as a brute-force sum over all voxels.
    """
    grid, r = out.grid, float(config.confidence_radius_m)
    logits = out.volume_logits  # (B, T, V)
    B, T, V = logits.shape
    N, Z = grid.n_views, grid.n_bins
    P2 = V // (N * Z)
    z_bins = grid.z_bin_centres.float()  # (B, N, Z), increasing along Z
    if Z > 1:  # bins whose centre lies in an interval of length 2r: at most floor(2r / dz) + 1; one more of slack
        dz_min_m = float((z_bins[..., 1:] - z_bins[..., :-1]).amin())
        width = Z if dz_min_m <= 0 else min(Z, int(2 * r / dz_min_m) + 2)
    else:
        width = 1
    z_query = (positions[..., 2].float() - r).reshape(B, T, 1, 1).expand(B, T, N, 1).contiguous()  # (B, T, N, 1)
    first = torch.searchsorted(z_bins.unsqueeze(1).expand(B, T, N, Z).contiguous(), z_query)  # (B, T, N, 1)
    first_bins = first.clamp(max=Z - width).reshape(B, T, N).tolist()  # host transfer: the slices' starts
    xyz, pos64, r2 = out.voxel_xyz, positions.double(), r * r  # (B, V, 3), (B, T, 3), m^2
    ones = torch.ones(3, dtype=torch.float64, device=logits.device)  # sums |d|^2 as a matrix-vector product: a sum
    # over a last dimension of 3 is not vectorised (3x slower)
    log_mass = torch.full((B, T, N), float("-inf"), device=logits.device)
    for b in range(B):
        for t in range(T):
            point = pos64[b, t]  # (3,)
            for k in range(N):
                lo = (k * Z + first_bins[b][t][k]) * P2
                hi = lo + width * P2
                diff = xyz[b, lo:hi].double() - point  # (W * P2, 3) float64: the brute force's test at the edge
                inside = logits[b, t, lo:hi][diff.mul_(diff) @ ones <= r2]  # only the ball's logits
                if inside.numel():
                    log_mass[b, t, k] = torch.logsumexp(inside.float(), dim=0)  # -inf when all are invalid
    return log_mass - step_log_normaliser(out).unsqueeze(-1)  # (B, T, N)


def decode_volume(config: V4Config, out: V4Output, refine: bool = False) -> list[DecodedChunk]:
    """``ParaModel.decode`` of a voxel-volume head: ``decode_outputs`` after checking that every observation has a
    valid voxel. Raises ValueError when one has none (no camera ray meets the workspace box)."""
    if not bool(out.voxel_valid.any(dim=-1).all()):
        raise ValueError(
            "no valid voxel for this observation: no camera ray meets the workspace box in front of "
            "its camera; check T_world_cam (OpenCV optical frame -> world) and the workspace box"
        )
    return decode_outputs(config, out, refine=refine)


def top_voxels(out: V4Output, top_k: int, fast: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ParaModel.visualisation`` of a voxel-volume head: (top-k most probable voxels (k, 3), their max-over-steps
    probability (k,), bounds of the valid voxels (2, 3)) of batch element 0, numpy float64. ``fast``: the same top-k
    from ``log p = logit - logsumexp`` (``max_step_log_prob``) without the (T, V) softmax."""
    k = min(top_k, int(out.voxel_valid[0].sum()))
    if fast:
        top_logp, top_i = torch.topk(max_step_log_prob(out)[0], k)  # (k,), (k,)
        top_p = top_logp.exp()
    else:
        probs = torch.softmax(out.volume_logits[0].float(), dim=-1).amax(0)  # (V,) max over steps
        top_p, top_i = torch.topk(probs, k)  # (k,), (k,)
    bounds = out.grid.bounds(0)  # (2, 3): min, max corner of the valid voxels
    return (
        out.voxel_xyz[0, top_i].double().cpu().numpy(),
        top_p.double().cpu().numpy(),
        bounds.double().cpu().numpy(),
    )


def decode_outputs(config: V4Config, out: V4Output, refine: bool = False) -> list[DecodedChunk]:
    """Model outputs -> one ``DecodedChunk`` per batch element (argmax voxel, optional sub-voxel refinement)."""
    argmax = out.argmax_voxel if out.argmax_voxel is not None else out.volume_logits.float().argmax(-1)  # (B, T)
    return decode_at_voxels(config, out, argmax, refine=refine)


def decode_at_voxels(config: V4Config, out: V4Output, chosen: torch.Tensor, refine: bool = False) -> list[DecodedChunk]:
    """Model outputs decoded at the ``chosen`` (B, T) voxels (the argmax, or a joint decoder's choice,
    ``para_core.model.decoding``): their centres or, with ``refine``, the local soft-argmax around them; the
    confidence there; the head's gripper and rotation bins. One ``DecodedChunk`` per batch element."""
    logits = out.volume_logits.float()  # (B, T, V)
    B = chosen.shape[0]
    pos = torch.gather(out.voxel_xyz.float(), 1, chosen.unsqueeze(-1).expand(-1, -1, 3))  # (B, T, 3)
    if refine:
        pos = refine_positions(config, logits, out.voxel_xyz, chosen)
    confidence = ball_confidence(config, out, pos)  # (B, T)
    grip_bins = out.gripper_logits.argmax(-1).cpu().numpy()  # (B, T)
    rot_bins = out.rotation_logits.argmax(-1).cpu().numpy()  # (B, T, 3)
    pos_np, conf_np, arg_np = (
        pos.cpu().double().numpy(),
        confidence.clamp(0, 1).cpu().double().numpy(),
        chosen.cpu().numpy(),
    )
    chunks = []
    for b in range(B):
        rots = decode_rotation(config, rot_bins[b])  # (T, 3, 3)
        chunks.append(
            DecodedChunk(
                positions_world=pos_np[b],
                rotations_world=rots,
                quaternions_xyzw=Rotation.from_matrix(rots).as_quat(),
                gripper=decode_gripper(config, grip_bins[b]),
                confidence=conf_np[b],
                time_offsets_s=time_offsets(config),
                voxel_index=arg_np[b],
            )
        )
    return chunks
