"""The per-view adaptive voxel grid of PARA v4 and the point -> voxel lookup (shared by the model and the labels).

Layout. View k (in ``config.view_names`` order) owns Z = ``n_height_bins`` horizontal planes at its bin-centre heights
and the P x P pixel centres of its prediction grid (``pred_size``). Voxel (k, i, r, c) is the intersection of the ray
through pixel centre (c + 0.5, r + 0.5) with the plane at bin centre i; its flat index is
``v = ((k * Z + i) * P + r) * P + c`` and V = N * Z * P^2 (paper: 2 * 128 * 64^2 = 1,048,576).

Validity. A voxel is valid iff its ray meets the plane in front of the camera AND its world (x, y) lies inside the
workspace box (``workspace_x_m``, ``workspace_y_m``); its z lies in [z_lo, z_hi_k] by construction.

Point lookup (the "nearest voxel" of a view). A world point is visible in view k iff it projects in front of the
camera inside the P x P grid (0 <= u, v < P), its height lies in [z_lo, z_hi_k), and the voxel of the cell that
contains it, (k, floor((z - z_lo) / dz_k), floor(v), floor(u)), is valid. That voxel's centre is within half a cell of
the point in every grid coordinate (u, v in pixels, z in bins).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from para_core.model.config import V4Config
from para_core.model.geometry import adaptive_z_range, pixel_centres, project, scale_intrinsics, unproject_to_height


@dataclass
class VoxelGrid:
    """The voxel grid of one batch of observations (all tensors on the same device, float32 or float64)."""

    voxel_xyz: torch.Tensor  # (B, V, 3) world coordinates of voxel centres, metres
    valid: torch.Tensor  # (B, V) bool
    K_pred: torch.Tensor  # (B, N, 3, 3) intrinsics of each view's P x P prediction grid
    T_world_cam: torch.Tensor  # (B, N, 4, 4)
    z_hi_per_view: torch.Tensor  # (B, N) metres
    z_bin_centres: torch.Tensor  # (B, N, Z) metres
    z_lo_m: float
    pred_size: int

    @property
    def n_views(self) -> int:
        return self.K_pred.shape[1]

    @property
    def n_bins(self) -> int:
        return self.z_bin_centres.shape[-1]


def pred_intrinsics(config: V4Config, K_img: torch.Tensor) -> torch.Tensor:
    """Intrinsics of the P x P prediction grid from those of the img_size x img_size model input (exact rescale)."""
    s = config.pred_size / config.img_size
    return scale_intrinsics(K_img, s, s)


def build_voxel_grid(config: V4Config, K_img: torch.Tensor, T_world_cam: torch.Tensor) -> VoxelGrid:
    """Closed-form voxel grid for a batch.

    :param K_img: (B, N, 3, 3) intrinsics of the img_size x img_size images the model sees.
    :param T_world_cam: (B, N, 4, 4) camera -> world poses.
    """
    B, N = K_img.shape[:2]
    P, Z = config.pred_size, config.n_height_bins
    K_pred = pred_intrinsics(config, K_img)  # (B, N, 3, 3)
    cam_z = T_world_cam[..., 2, 3]  # (B, N)
    z_hi_k, centres = adaptive_z_range(cam_z, config.z_lo_m, config.z_hi_m, config.cam_margin_m, Z,
                                       mode=config.z_range_mode, min_span_m=config.min_z_span_m)  # (B,N), (B,N,Z)
    uv = pixel_centres(P, P, dtype=K_img.dtype, device=K_img.device)  # (P*P, 2)
    points, front = unproject_to_height(uv, centres.unsqueeze(-1), K_pred.unsqueeze(2),
                                        T_world_cam.unsqueeze(2))  # (B, N, Z, P*P, 3), (B, N, Z, P*P)
    x0, x1 = config.workspace_x_m
    y0, y1 = config.workspace_y_m
    inside = (points[..., 0] >= x0) & (points[..., 0] <= x1) & (points[..., 1] >= y0) & (points[..., 1] <= y1)
    valid = front & inside  # (B, N, Z, P*P)
    return VoxelGrid(
        voxel_xyz=points.reshape(B, N * Z * P * P, 3),  # (B, V, 3)
        valid=valid.reshape(B, N * Z * P * P),  # (B, V)
        K_pred=K_pred, T_world_cam=T_world_cam, z_hi_per_view=z_hi_k, z_bin_centres=centres,
        z_lo_m=config.z_lo_m, pred_size=P,
    )


def locate_points(grid: VoxelGrid, points_world: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The voxel of each view that contains each point (see the module docstring).

    :param points_world: (B, T, 3) metres.
    :return: ``voxel_index`` (B, T, N) long (0 where not visible) and ``visible`` (B, T, N) bool.
    """
    B, T = points_world.shape[:2]
    N, Z, P = grid.n_views, grid.n_bins, grid.pred_size
    pts = points_world.to(grid.voxel_xyz.dtype)
    uv, depth = project(pts.unsqueeze(1), grid.K_pred, grid.T_world_cam)  # (B, N, T, 2), (B, N, T)
    col = torch.floor(uv[..., 0])  # (B, N, T)
    row = torch.floor(uv[..., 1])
    dz = (grid.z_hi_per_view - grid.z_lo_m) / Z  # (B, N)
    zbin = torch.floor((pts[..., 2].unsqueeze(1) - grid.z_lo_m) / dz.unsqueeze(-1))  # (B, N, T)
    ok = (depth > 0) & (col >= 0) & (col < P) & (row >= 0) & (row < P) & (zbin >= 0) & (zbin < Z)  # (B, N, T)
    view = torch.arange(N, device=pts.device).view(1, N, 1)
    idx = ((view * Z + zbin.clamp(0, Z - 1).long()) * P + row.clamp(0, P - 1).long()) * P \
        + col.clamp(0, P - 1).long()  # (B, N, T)
    idx = torch.where(ok, idx, torch.zeros_like(idx))
    ok = ok & torch.gather(grid.valid, 1, idx.reshape(B, -1)).reshape(B, N, T)
    return idx.transpose(1, 2).contiguous(), ok.transpose(1, 2).contiguous()  # (B, T, N) each
