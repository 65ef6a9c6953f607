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
    view_bounds: torch.Tensor | None = None  # (B, N, 2, 3) each view's valid-voxel bounds, when the cache had them

    def bounds(self, b: int = 0) -> torch.Tensor:
        """(2, 3) min and max corner of batch element b's valid voxel centres (+inf / -inf when none is valid)."""
        if self.view_bounds is not None:
            return torch.stack([self.view_bounds[b, :, 0].amin(0), self.view_bounds[b, :, 1].amax(0)])
        return valid_bounds(self.voxel_xyz[b], self.valid[b])

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


def _view_voxels(
    config: V4Config, K_pred: torch.Tensor, T_world_cam: torch.Tensor, centres: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Voxel centres (..., Z, P*P, 3) and validity (..., Z, P*P) of views with prediction-grid intrinsics ``K_pred``
    (..., 3, 3), poses (..., 4, 4) and bin-centre heights ``centres`` (..., Z)."""
    P = config.pred_size
    uv = pixel_centres(P, P, dtype=K_pred.dtype, device=K_pred.device)  # (P*P, 2)
    points, front = unproject_to_height(
        uv, centres.unsqueeze(-1), K_pred.unsqueeze(-3), T_world_cam.unsqueeze(-3)
    )  # (..., Z, P*P, 3), (..., Z, P*P)
    x0, x1 = config.workspace_x_m
    y0, y1 = config.workspace_y_m
    inside = (points[..., 0] >= x0) & (points[..., 0] <= x1) & (points[..., 1] >= y0) & (points[..., 1] <= y1)
    return points, front & inside


class StaticViewCache:
    """The voxel centres and validity of each view of the last observation, reused for a view whose intrinsics and
    pose are exactly those of the previous call (a static scene camera: its half of the grid is the same every
    frame; a wrist camera's never is). Batch size 1 only (the inference path); ``hits`` / ``misses`` count views.
    The fast path uses it on CPU only: comparing the poses is a host synchronisation on a GPU, where building the
    grid costs a few kernel launches."""

    def __init__(self):
        self._views: dict[int, tuple[torch.Tensor, ...]] = {}  # view -> (key, centres, validity, bounds)
        self.hits = 0
        self.misses = 0

    def view(
        self, config: V4Config, k: int, K_pred: torch.Tensor, T_world_cam: torch.Tensor, centres: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """View k's (Z, P*P, 3) centres, (Z, P*P) validity and (2, 3) valid-voxel bounds for (3, 3) ``K_pred``,
        (4, 4) pose and (Z,) bin heights."""
        key = torch.cat([K_pred.reshape(-1), T_world_cam.reshape(-1), centres.reshape(-1)])  # what the voxels depend on
        hit = self._views.get(k)
        same = hit is not None and hit[0].device == key.device and hit[0].shape == key.shape
        if same and torch.equal(hit[0], key):
            self.hits += 1
            return hit[1:]
        self.misses += 1
        points, valid = _view_voxels(config, K_pred, T_world_cam, centres)
        self._views[k] = (key, points, valid, valid_bounds(points, valid))
        return self._views[k][1:]


def build_voxel_grid(
    config: V4Config, K_img: torch.Tensor, T_world_cam: torch.Tensor, cache: StaticViewCache | None = None
) -> VoxelGrid:
    """Closed-form voxel grid for a batch.

    :param K_img: (B, N, 3, 3) intrinsics of the img_size x img_size images the model sees.
    :param T_world_cam: (B, N, 4, 4) camera -> world poses.
    :param cache: reuse the voxels of views that did not move since the last call (B = 1; see ``StaticViewCache``).
    """
    B, N = K_img.shape[:2]
    P, Z = config.pred_size, config.n_height_bins
    K_pred = pred_intrinsics(config, K_img)  # (B, N, 3, 3)
    cam_z = T_world_cam[..., 2, 3]  # (B, N)
    z_hi_k, centres = adaptive_z_range(
        cam_z,
        config.z_lo_m,
        config.z_hi_m,
        config.cam_margin_m,
        Z,
        mode=config.z_range_mode,
        min_span_m=config.min_z_span_m,
    )  # (B,N), (B,N,Z)
    if cache is not None and B == 1:
        views = [cache.view(config, k, K_pred[0, k], T_world_cam[0, k], centres[0, k]) for k in range(N)]
        points = torch.stack([v[0] for v in views]).unsqueeze(0)  # (1, N, Z, P*P, 3): a copy, never the cache's
        valid = torch.stack([v[1] for v in views]).unsqueeze(0)  # (1, N, Z, P*P)
        view_bounds = torch.stack([v[2] for v in views]).unsqueeze(0)  # (1, N, 2, 3)
    else:
        points, valid = _view_voxels(config, K_pred, T_world_cam, centres)  # (B, N, Z, P*P, 3), (B, N, Z, P*P)
        view_bounds = None
    return VoxelGrid(
        voxel_xyz=points.reshape(B, N * Z * P * P, 3),  # (B, V, 3)
        valid=valid.reshape(B, N * Z * P * P),  # (B, V)
        K_pred=K_pred,
        T_world_cam=T_world_cam,
        z_hi_per_view=z_hi_k,
        z_bin_centres=centres,
        z_lo_m=config.z_lo_m,
        pred_size=P,
        view_bounds=view_bounds,
    )


def valid_bounds(points: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(2, 3) min and max corner of the voxel centres ``points`` (..., 3) where ``valid`` (...); +inf / -inf when
    none is valid."""
    inside = points[valid]  # (n, 3)
    if inside.shape[0] == 0:
        inf = torch.full((3,), float("inf"), dtype=points.dtype, device=points.device)
        return torch.stack([inf, -inf])
    return torch.stack(torch.aminmax(inside, dim=0))


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
    idx = ((view * Z + zbin.clamp(0, Z - 1).long()) * P + row.clamp(0, P - 1).long()) * P + col.clamp(
        0, P - 1
    ).long()  # (B, N, T)
    idx = torch.where(ok, idx, torch.zeros_like(idx))
    ok = ok & torch.gather(grid.valid, 1, idx.reshape(B, -1)).reshape(B, N, T)
    return idx.transpose(1, 2).contiguous(), ok.transpose(1, 2).contiguous()  # (B, T, N) each
