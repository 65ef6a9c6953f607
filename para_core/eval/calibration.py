"""Camera-calibration check: project the tool frame into every camera and draw it, so a user sees a wrong extrinsic
before it moves every predicted voxel. ROS-free (``para-bag calib`` feeds it from a recording).

For each frame and view: the tool origin (``grasp_site``) and the ends of its x / y / z axes (``axis_length_m``)
are projected with that view's K (``para_core`` pixel convention: centres at +0.5) and camera pose, and drawn (origin
as a ring, axes red / green / blue) on the image; the contact sheet tiles a few frames over time, one row a view.
If the calibration is right the ring sits on the gripper between the finger tips in every image; an extrinsic that
is off by d metres moves it by about ``f * d / depth`` pixels (:func:`expected_pixel_offset`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_core.eval.projection import project_points


@dataclass
class ToolProjection:
    """Where the tool frame lands in one image: pixels (para_core convention) and depth (metres, + = in front)."""

    origin_uv: np.ndarray  # (2,)
    axes_uv: np.ndarray  # (3, 2) ends of the x, y, z axes
    depth_m: float
    in_image: bool


def project_tool(
    T_world_ee: np.ndarray,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    image_size: tuple[int, int],
    axis_length_m: float = 0.03,
) -> ToolProjection:
    """Project the tool frame ``T_world_ee`` (4, 4) into a camera; ``image_size`` = (H, W)."""
    T = np.asarray(T_world_ee, dtype=np.float64)
    pts = np.vstack([T[:3, 3], T[:3, 3] + axis_length_m * T[:3, :3].T])  # (4, 3): origin, x, y, z ends
    uv, depth = project_points(pts, K, T_world_cam)
    H, W = image_size
    inside = bool(depth[0] > 0 and 0 <= uv[0, 0] < W and 0 <= uv[0, 1] < H)
    return ToolProjection(uv[0], uv[1:], float(depth[0]), inside)


def expected_pixel_offset(K: np.ndarray, depth_m: float, offset_m: float) -> float:
    """Pixels that a camera-frame offset of ``offset_m`` perpendicular to the optical axis moves a point at
    ``depth_m`` by (square pixels: f_x = f_y)."""
    return float(K[0, 0]) * offset_m / depth_m


def draw_tool(image_rgb: np.ndarray, proj: ToolProjection, label: str = "") -> np.ndarray:
    """A copy of ``image_rgb`` with the projected tool frame drawn (ring at the origin, RGB axes)."""
    import cv2  # cv2: loaded on first use, not on import

    out = np.ascontiguousarray(image_rgb.copy())
    if proj.depth_m <= 0:
        return out

    def px(uv):  # para_core convention (centres at +0.5) -> OpenCV integer pixel
        return int(round(float(uv[0]) - 0.5)), int(round(float(uv[1]) - 0.5))

    o = px(proj.origin_uv)
    for end, colour in zip(proj.axes_uv, ((255, 0, 0), (0, 200, 0), (0, 80, 255))):
        cv2.line(out, o, px(end), colour, 1, cv2.LINE_AA)
    r = max(3, out.shape[0] // 64)
    cv2.circle(out, o, r, (255, 0, 255), 1, cv2.LINE_AA)
    if label:
        cv2.putText(out, label, (3, out.shape[0] - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.3, (255, 255, 255), 1, cv2.LINE_AA)
    return out


def contact_sheet(frames: list[dict], view_names: tuple[str, ...], path, tile_px: int = 192) -> dict:
    """Write a contact sheet PNG of ``frames`` (each: ``stamp_ns``, ``T_world_ee``, and per view
    ``images[view]``, ``K[view]``, ``T_world_cam[view]``): one column a frame, one row a view.

    :returns: per-frame projections {"frames": [{"stamp_ns", "views": {view: {"uv", "depth_m", "in_image"}}}]}.
    """
    import cv2  # cv2: loaded on first use, not on import

    rows = []
    report = {"frames": []}
    for f in frames:
        entry = {"stamp_ns": int(f["stamp_ns"]), "views": {}}
        report["frames"].append(entry)
    for view in view_names:
        tiles = []
        for f, entry in zip(frames, report["frames"]):
            img = f["images"][view]
            proj = project_tool(f["T_world_ee"], f["K"][view], f["T_world_cam"][view], img.shape[:2])
            entry["views"][view] = {"uv": proj.origin_uv.tolist(), "depth_m": proj.depth_m, "in_image": proj.in_image}
            scale = tile_px / max(img.shape[:2])
            drawn = draw_tool(img, proj, f"{view} t={(f['stamp_ns'] - frames[0]['stamp_ns']) * 1e-9:.1f}s")
            tiles.append(
                cv2.resize(
                    drawn, (int(img.shape[1] * scale), int(img.shape[0] * scale)), interpolation=cv2.INTER_NEAREST
                )
            )
        h = max(t.shape[0] for t in tiles)
        rows.append(np.concatenate([np.pad(t, ((0, h - t.shape[0]), (0, 0), (0, 0))) for t in tiles], axis=1))
    w = max(r.shape[1] for r in rows)
    sheet = np.concatenate([np.pad(r, ((0, 0), (0, w - r.shape[1]), (0, 0))) for r in rows], axis=0)
    cv2.imwrite(str(path), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
    return report


def overlay_image(
    image_rgb: np.ndarray,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    T_world_ee: np.ndarray,
    path_world: np.ndarray | None = None,
) -> np.ndarray:
    """The live overlay of the inference node: the camera image with the tool frame (:func:`draw_tool`) and the
    predicted path (yellow polyline from the tool, a dot per step), same size as the image."""
    import cv2  # cv2: loaded on first use, not on import

    img = np.asarray(image_rgb)
    out = draw_tool(img, project_tool(T_world_ee, K, T_world_cam, img.shape[:2]))
    if path_world is None or len(path_world) == 0:
        return out
    pts = np.vstack([np.asarray(T_world_ee, dtype=np.float64)[:3, 3], np.asarray(path_world, dtype=np.float64)])
    uv, depth = project_points(pts, K, T_world_cam)
    px = [
        (int(round(float(u) - 0.5)), int(round(float(v) - 0.5)))
        if d > 0 and np.all(np.isfinite([u, v])) and max(abs(u), abs(v)) < 1e5
        else None
        for (u, v), d in zip(uv, depth)
    ]
    for a, b in zip(px[:-1], px[1:]):
        if a is not None and b is not None:
            cv2.line(out, a, b, (255, 220, 0), 1, cv2.LINE_AA)
    for p in px[1:]:
        if p is not None:
            cv2.circle(out, p, 2, (255, 220, 0), -1, cv2.LINE_AA)
    return out
