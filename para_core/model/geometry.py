"""Camera geometry on torch tensors: batched, differentiable, any float dtype (use float64 for reference checks).

Conventions (docs/contracts.md, used everywhere in para_core):

- Camera frame: OpenCV optical frame (x right, y down, z forward). ``T_world_cam`` (4x4) maps camera coordinates to
  world coordinates: ``p_world = T_world_cam @ p_cam``.
- Pixel-centre convention: pixel (col, row) covers [col, col+1) x [row, row+1) and its centre is (col + 0.5, row + 0.5).
  ``u`` is the continuous column coordinate, ``v`` the row, in pixels. A point on the optical axis projects to
  (cx, cy). With this convention resizing an image by s maps u -> s * u exactly, so ``K' = diag(s_x, s_y, 1) @ K``,
  and cropping at (x0, y0) shifts (cx, cy) by (-x0, -y0). The same holds for feature grids: a ViT patch grid with
  patch p is the image resized by 1/p, and ``F.interpolate(..., align_corners=False)`` / ``F.grid_sample(...,
  align_corners=False)`` use this convention too (normalised x = 2 u / W - 1).

Shapes: leading dimensions broadcast. ``points`` are (..., N, 3), ``K`` (..., 3, 3), ``T_world_cam`` (..., 4, 4).
"""

from __future__ import annotations

import torch

_EPS = 1e-12


def invert_rigid(T_a_b: torch.Tensor) -> torch.Tensor:
    """Inverse of a rigid 4x4 transform (closed form R^T, -R^T t).  (..., 4, 4) -> (..., 4, 4)."""
    R = T_a_b[..., :3, :3]  # (..., 3, 3)
    t = T_a_b[..., :3, 3:]  # (..., 3, 1)
    R_inv = R.transpose(-1, -2)
    out = torch.zeros_like(T_a_b)
    out[..., :3, :3] = R_inv
    out[..., :3, 3:] = -R_inv @ t
    out[..., 3, 3] = 1.0
    return out


def world_to_camera(points_world: torch.Tensor, T_world_cam: torch.Tensor) -> torch.Tensor:
    """Points in world -> camera optical frame. (..., N, 3), (..., 4, 4) -> (..., N, 3)."""
    R = T_world_cam[..., :3, :3]  # (..., 3, 3)
    t = T_world_cam[..., :3, 3]  # (..., 3)
    # p_cam = R^T (p - t); for row vectors that is (p - t) @ R.
    return (points_world - t.unsqueeze(-2)) @ R  # (..., N, 3)


def project(
    points_world: torch.Tensor, K: torch.Tensor, T_world_cam: torch.Tensor, min_depth: float = 1e-9
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pinhole projection of world points into a camera.

    :param points_world: (..., N, 3) metres, world frame.
    :param K: (..., 3, 3) intrinsics in pixels (pixel-centre convention above).
    :param T_world_cam: (..., 4, 4) camera (OpenCV optical) -> world.
    :param min_depth: denominators smaller than this (in absolute value) are clamped, so points at or behind the
        camera give finite (meaningless) uv; use ``depth > 0`` to tell which are in front.
    :return: ``uv`` (..., N, 2) pixels and ``depth`` (..., N) metres along the optical axis (negative = behind).
    """
    p_cam = world_to_camera(points_world, T_world_cam)  # (..., N, 3)
    depth = p_cam[..., 2]  # (..., N)
    safe = torch.where(depth.abs() < min_depth, torch.full_like(depth, min_depth), depth)  # (..., N)
    xy = p_cam[..., :2] / safe.unsqueeze(-1)  # (..., N, 2) normalised image coordinates
    hom = torch.cat([xy, torch.ones_like(xy[..., :1])], dim=-1)  # (..., N, 3)
    uv = (hom @ K.transpose(-1, -2))[..., :2]  # (..., N, 2)
    return uv, depth


def pixel_rays_world(uv: torch.Tensor, K: torch.Tensor, T_world_cam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rays through pixels: origin (..., 1, 3) = camera centre, direction (..., N, 3) with unit optical-axis depth
    (d_cam = K^-1 [u, v, 1], so a distance s along it is depth s)."""
    hom = torch.cat([uv, torch.ones_like(uv[..., :1])], dim=-1)  # (..., N, 3)
    d_cam = hom @ torch.linalg.inv(K).transpose(-1, -2)  # (..., N, 3)
    R = T_world_cam[..., :3, :3]  # (..., 3, 3)
    d_world = d_cam @ R.transpose(-1, -2)  # (..., N, 3)
    origin = T_world_cam[..., :3, 3].unsqueeze(-2)  # (..., 1, 3)
    return origin, d_world


def unproject_to_height(
    uv: torch.Tensor, z_world: torch.Tensor | float, K: torch.Tensor, T_world_cam: torch.Tensor, eps: float = 1e-9
) -> tuple[torch.Tensor, torch.Tensor]:
    """Intersect the ray through each pixel with the horizontal plane ``z = z_world`` (closed form).

    :param uv: (..., N, 2) pixels.
    :param z_world: plane height(s) in metres, broadcastable to (..., N).
    :param K: (..., 3, 3) intrinsics; ``T_world_cam``: (..., 4, 4).
    :return: ``points_world`` (..., N, 3) and ``valid`` (..., N) bool: True where the ray meets the plane in front of
        the camera (depth > 0). Rays parallel to the plane or meeting it behind the camera are invalid; their points
        are finite but meaningless.
    """
    origin, d_world = pixel_rays_world(uv, K, T_world_cam)  # (..., 1, 3), (..., N, 3)
    z = torch.as_tensor(z_world, dtype=uv.dtype, device=uv.device)
    dz = d_world[..., 2]  # (..., N)
    parallel = dz.abs() < eps
    safe_dz = torch.where(parallel, torch.full_like(dz, eps), dz)
    s = (z - origin[..., 2]) / safe_dz  # (..., N) depth along the optical axis
    points = origin + s.unsqueeze(-1) * d_world  # (..., N, 3)
    # Put the exact plane height back (removes rounding in z).
    points = torch.cat([points[..., :2], z.expand_as(s).unsqueeze(-1).to(points.dtype)], dim=-1)  # (..., N, 3)
    valid = (~parallel) & (s > 0)  # (..., N)
    return points, valid


def adaptive_z_range(
    cam_z_m: torch.Tensor,
    z_lo_m: float,
    z_hi_m: float,
    cam_margin_m: float,
    n_bins: int,
    mode: str = "adaptive",
    min_span_m: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-view height range and bin centres.

    Adaptive (v4): ``z_hi_k = min(z_hi, cam_z_k - cam_margin_m)``, ``z_lo`` shared; a camera so low that the span
    would be below ``min_span_m`` gets ``z_hi_k = z_lo + min_span_m`` (its voxels then mostly sit behind it and are
    masked). Fixed (v2): every view uses [z_lo, z_hi]. Bins are cell-centred: centre_i = z_lo + (i + 0.5) * dz_k.

    :param cam_z_m: (..., N) world height of each view's camera centre.
    :return: ``z_hi_per_view`` (..., N) and ``bin_centres`` (..., N, n_bins), metres.
    """
    if mode == "fixed":
        z_hi_k = torch.full_like(cam_z_m, z_hi_m)  # (..., N)
    elif mode == "adaptive":
        z_hi_k = torch.clamp(cam_z_m - cam_margin_m, max=z_hi_m)  # (..., N)
        z_hi_k = torch.clamp(z_hi_k, min=z_lo_m + min_span_m)
    else:
        raise ValueError(f"adaptive_z_range: mode={mode!r}; use 'adaptive' or 'fixed'")
    frac = (torch.arange(n_bins, dtype=cam_z_m.dtype, device=cam_z_m.device) + 0.5) / n_bins  # (Z,)
    centres = z_lo_m + (z_hi_k - z_lo_m).unsqueeze(-1) * frac  # (..., N, Z)
    return z_hi_k, centres


def scale_intrinsics(K: torch.Tensor, scale_x: float | torch.Tensor, scale_y: float | torch.Tensor) -> torch.Tensor:
    """Intrinsics of an image resized by (scale_x, scale_y): K' = diag(sx, sy, 1) @ K (exact, pixel-centre rule)."""
    K = K.clone()
    K[..., 0, :] = K[..., 0, :] * scale_x
    K[..., 1, :] = K[..., 1, :] * scale_y
    return K


def crop_intrinsics(K: torch.Tensor, x0: float, y0: float) -> torch.Tensor:
    """Intrinsics of the crop whose top-left corner is pixel (x0, y0) of the original: cx -= x0, cy -= y0."""
    K = K.clone()
    K[..., 0, 2] = K[..., 0, 2] - x0
    K[..., 1, 2] = K[..., 1, 2] - y0
    return K


def resize_intrinsics(K: torch.Tensor, from_hw: tuple[int, int], to_hw: tuple[int, int]) -> torch.Tensor:
    """Intrinsics after resizing an image of (H, W) = ``from_hw`` to ``to_hw`` (aspect may change)."""
    return scale_intrinsics(K, to_hw[1] / from_hw[1], to_hw[0] / from_hw[0])


def pixel_centres(size_h: int, size_w: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """(H*W, 2) pixel centres (u, v) = (col + 0.5, row + 0.5), row-major (index = row * W + col)."""
    v, u = torch.meshgrid(
        torch.arange(size_h, dtype=dtype, device=device) + 0.5,
        torch.arange(size_w, dtype=dtype, device=device) + 0.5,
        indexing="ij",
    )
    return torch.stack([u.reshape(-1), v.reshape(-1)], dim=-1)  # (H*W, 2)


def uv_to_grid_sample(uv: torch.Tensor, size_h: int, size_w: int) -> torch.Tensor:
    """Pixel coordinates -> ``F.grid_sample`` coordinates for ``align_corners=False``: x = 2u/W - 1, y = 2v/H - 1."""
    return torch.stack([2.0 * uv[..., 0] / size_w - 1.0, 2.0 * uv[..., 1] / size_h - 1.0], dim=-1)


def look_at(eye: torch.Tensor, target: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """T_world_cam (4, 4) of an OpenCV-optical camera at ``eye`` looking at ``target`` (z forward), with image 'up'
    (-y_cam) as close as possible to ``up`` (default world +z; pass another hint when looking straight down)."""
    eye = torch.as_tensor(eye, dtype=torch.float64)
    target = torch.as_tensor(target, dtype=eye.dtype)
    up = torch.as_tensor((0.0, 0.0, 1.0) if up is None else up, dtype=eye.dtype)
    z = target - eye
    z = z / z.norm()
    x = torch.linalg.cross(z, up)
    if x.norm() < 1e-9:
        raise ValueError(f"look_at: up={up.tolist()} is parallel to the viewing direction; pass another up hint")
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    T = torch.eye(4, dtype=eye.dtype)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, y, z, eye
    return T
