"""Figures for offline evaluation and for explaining the model (ROS-free; PNG files or RGB arrays).

* :func:`draw_path_overlay`: 3D paths (predicted chunk, recorded future) projected into a camera image.
* :func:`plot_error_per_step`: position error (mean / median / p90) per chunk step.
* :func:`plot_trajectory`: top view (x/y) and height over time of the recorded EE path and a predicted step.
* :func:`response_volume_data` + :func:`plot_response_volume`: one step's softmax over the voxels of one view, shown as
  a few height slices (argmax voxel highlighted), the RGB image with a crosshair at the argmax pixel, and a PCA of the
  per-pixel features of that view.

Conventions (docs/contracts.md): pixel (col, row) covers [col, col + 1) x [row, row + 1), so a continuous image point
(u, v) lies in pixel (floor(u), floor(v)); OpenCV drawing functions address pixel centres by integer coordinates, so a
point (u, v) is drawn at (u - 0.5, v - 0.5) (with sub-pixel ``shift``). Projection is OpenCV's pinhole model without
distortion, which is what ``cv2.projectPoints`` computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from para_core.eval.projection import MIN_DEPTH_M, project_points

_SHIFT = 4  # sub-pixel bits for cv2 drawing
PRED_COLOUR = (255, 64, 32)  # RGB: orange-red
ACTUAL_COLOUR = (32, 200, 64)  # RGB: green


def _cv_point(uv) -> tuple[int, int]:
    """Continuous (u, v) -> cv2 drawing coordinates with ``_SHIFT`` fractional bits (pixel centre at integer)."""
    return (int(round((uv[0] - 0.5) * (1 << _SHIFT))), int(round((uv[1] - 0.5) * (1 << _SHIFT))))


@dataclass
class Path3D:
    """A path to draw: (M, 3) world points, an RGB colour and a legend label."""

    points_world: np.ndarray
    colour_rgb: tuple[int, int, int]
    label: str = ""


def draw_path_overlay(
    image_rgb: np.ndarray,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    paths: Sequence[Path3D],
    min_width: int = 480,
    title: str = "",
) -> np.ndarray:
    """The image (upscaled to at least ``min_width`` pixels wide, K rescaled exactly) with each path drawn as a
    polyline with a dot per point (the first point larger), plus a legend. Points behind the camera are skipped.

    :return: (H', W', 3) uint8 RGB.
    """
    img = np.asarray(image_rgb)
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(f"image_rgb must be (H, W, 3) uint8; got {img.shape} {img.dtype}")
    H, W = img.shape[:2]
    s = max(1, int(np.ceil(min_width / W)))
    canvas = cv2.resize(img, (W * s, H * s), interpolation=cv2.INTER_NEAREST) if s > 1 else img.copy()
    K_s = np.diag([s, s, 1.0]) @ np.asarray(K, dtype=np.float64)  # u -> s u exactly (pixel-centre convention)
    radius = max(2, canvas.shape[1] // 160)
    for path in paths:
        uv, depth_m = project_points(path.points_world, K_s, T_world_cam)
        front = depth_m > MIN_DEPTH_M
        colour = tuple(int(c) for c in path.colour_rgb)
        prev = None
        for i, (p, ok) in enumerate(zip(uv, front)):
            if not ok or not np.all(np.isfinite(p)) or np.abs(p).max() > 1e6:
                prev = None
                continue
            q = _cv_point(p)
            if prev is not None:
                cv2.line(canvas, prev, q, colour, max(1, radius // 2), cv2.LINE_AA, shift=_SHIFT)
            cv2.circle(canvas, q, (radius * 2 if i == 0 else radius) << _SHIFT, colour, -1, cv2.LINE_AA, shift=_SHIFT)
            prev = q
    y = 16
    for text, colour in ([(title, (255, 255, 255))] if title else []) + [
        (p.label, p.colour_rgb) for p in paths if p.label
    ]:
        cv2.putText(canvas, text, (6, y), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(canvas, text, (6, y), cv2.FONT_HERSHEY_SIMPLEX, 0.45, tuple(int(c) for c in colour), 1, cv2.LINE_AA)
        y += 18
    return canvas


def save_rgb_png(path: str | Path, image_rgb: np.ndarray) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(np.asarray(image_rgb), cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")
    return path


def _pyplot():
    import matplotlib  # matplotlib: loaded on first use, not on import

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    return plt


def plot_error_per_step(
    per_step: Sequence[dict],
    time_offsets_s: Sequence[float],
    path: str | Path,
    title: str = "position error per chunk step",
    unit: str = "m",
    scale: float = 1.0,
) -> Path:
    """Line plot of mean / median / p90 per step index (``per_step``: dicts of
    :func:`para_core.eval.metrics.per_step_summary`); values multiplied by ``scale`` (e.g. 100 for cm)."""
    plt = _pyplot()
    steps = np.arange(len(per_step))
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for key, style in (("mean", "o-"), ("median", "s--"), ("p90", "^:")):
        vals = np.array([np.nan if d.get(key) is None else d[key] * scale for d in per_step])
        ax.plot(steps, vals, style, label=key)
    ax.set_xlabel("chunk step i  (time offset in s below)")
    ax.set_xticks(steps)
    ax.set_xticklabels([f"{i}\n{t:.2f}" for i, t in zip(steps, time_offsets_s)], fontsize=8)
    ax.set_ylabel(f"error [{unit}]")
    counts = [d.get("count", 0) for d in per_step]
    ax.set_title(
        f"{title}\n(chunks per step: {min(counts) if counts else 0}..{max(counts) if counts else 0})", fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_trajectory(
    stamps_ns: np.ndarray,
    actual_xyz: np.ndarray,
    predicted_xyz: np.ndarray,
    path: str | Path,
    predicted_label: str = "predicted (step 0)",
    extra: Sequence[tuple[np.ndarray, str, float]] = (),
) -> Path:
    """Top view (x/y) and height over time of the recorded EE path and the predicted points.

    :param stamps_ns: (M,) observation stamps; ``actual_xyz`` and ``predicted_xyz``: (M, 3) metres (world frame), the
        EE pose and the prediction for that same time (chunk step 0).
    :param extra: more (M, 3) predicted series ``(xyz, label, time_offset_s)``, e.g. the last chunk step, drawn at
        ``stamp + time_offset_s`` in the height plot (the time they are meant for).
    """
    plt = _pyplot()
    t = (np.asarray(stamps_ns, dtype=np.int64) - int(np.asarray(stamps_ns)[0])) / 1e9 if len(stamps_ns) else []
    a = np.asarray(actual_xyz, dtype=np.float64).reshape(-1, 3)
    series = [(np.asarray(predicted_xyz, dtype=np.float64).reshape(-1, 3), predicted_label, 0.0)] + list(extra)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
    ax0.plot(a[:, 0], a[:, 1], "-", color="tab:green", label="actual (TF)")
    ax1.plot(t, a[:, 2], "-", color="tab:green", label="actual (TF)")
    for (p, label, shift_s), c in zip(series, ("tab:red", "tab:purple", "tab:orange", "tab:blue")):
        p = np.asarray(p, dtype=np.float64).reshape(-1, 3)
        ax0.plot(p[:, 0], p[:, 1], ".", color=c, label=label, ms=4)
        ax1.plot(np.asarray(t) + float(shift_s), p[:, 2], ".", color=c, label=label, ms=4)
    if len(a):
        ax0.plot(a[0, 0], a[0, 1], "o", color="tab:green", ms=8, mfc="none", label="start")
    ax0.set_xlabel("x [m]")
    ax0.set_ylabel("y [m]")
    ax0.set_title("top view (world frame)")
    ax0.axis("equal")
    ax0.grid(alpha=0.3)
    ax0.legend(fontsize=8, loc="best", framealpha=0.6)
    ax1.legend(fontsize=8, loc="best", framealpha=0.6)
    ax1.set_xlabel("time since first observation [s]")
    ax1.set_ylabel("z [m]")
    ax1.set_title("height over time")
    ax1.grid(alpha=0.3)
    return _save(fig, path)


def _save(fig, path: str | Path, rect=None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=rect)
    fig.savefig(path)
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------- response volume
def pca_rgb(features: np.ndarray) -> np.ndarray:
    """(F, H, W) per-pixel features -> (H, W, 3) in [0, 1]: the first three principal components, each scaled to
    [0, 1] over the image (fewer than 3 components are padded with zeros)."""
    f = np.asarray(features, dtype=np.float64)
    F, H, W = f.shape
    X = f.reshape(F, -1).T  # (H*W, F)
    X = X - X.mean(0, keepdims=True)
    U, S, _ = np.linalg.svd(X, full_matrices=False)
    k = min(3, S.size)
    comps = U[:, :k] * S[:k]  # (H*W, k)
    lo, hi = comps.min(0), comps.max(0)
    comps = (comps - lo) / np.where(hi - lo > 1e-12, hi - lo, 1.0)
    out = np.zeros((H * W, 3))
    out[:, :k] = comps
    return out.reshape(H, W, 3)


@dataclass
class ResponseVolume:
    """One step's voxel distribution in one view (numpy), for :func:`plot_response_volume`."""

    step: int
    view: int
    probs: np.ndarray  # (Z, P, P) softmax over ALL voxels of all views, restricted to this view
    heights_m: np.ndarray  # (Z,) bin centre heights of this view
    argmax: tuple[int, int, int, int]  # (view, bin, row, col) of the global argmax voxel
    argmax_prob: float
    argmax_xyz: np.ndarray  # (3,) world point of the argmax voxel
    K_pred: np.ndarray  # (3, 3) intrinsics of the P x P prediction grid of this view
    features: np.ndarray | None = None  # (F, P, P) per-pixel features of this view


def response_volume_data(
    out, step: int = 0, view: int | None = None, batch: int = 0, feature_maps=None
) -> ResponseVolume:
    """Pick one step of a model output (``para_core.model.model_io.V4Output``) for the response-volume figure.

    Voxel index layout (``para_core.model.voxels``): ``v = view * Z * P^2 + bin * P^2 + row * P + col``.

    :param view: which view to show; None: the view that holds the step's argmax voxel.
    :param feature_maps: optional (B, N, F, P, P) per-pixel features (``model.feature_maps``) for the PCA panel.
    """
    import torch  # torch: loaded on first use, not on import

    grid = out.grid
    N, Z, P = grid.n_views, grid.n_bins, grid.pred_size
    logits = out.volume_logits[batch, step].float()  # (V,)
    probs = torch.softmax(logits, dim=-1)  # (V,)
    best = int(torch.argmax(logits))
    a_view, rem = divmod(best, Z * P * P)
    a_bin, rem = divmod(rem, P * P)
    a_row, a_col = divmod(rem, P)
    v = a_view if view is None else int(view)
    if not 0 <= v < N:
        raise ValueError(f"view={view} is out of range for {N} views")
    sl = probs[v * Z * P * P : (v + 1) * Z * P * P].reshape(Z, P, P)  # (Z, P, P)
    feats = None
    if feature_maps is not None:
        feats = feature_maps[batch, v].detach().float().cpu().numpy()  # (F, P, P)
    return ResponseVolume(
        step=step,
        view=v,
        probs=sl.detach().cpu().numpy().astype(np.float64),
        heights_m=grid.z_bin_centres[batch, v].detach().double().cpu().numpy(),
        argmax=(a_view, a_bin, a_row, a_col),
        argmax_prob=float(probs[best]),
        argmax_xyz=out.voxel_xyz[batch, best].detach().double().cpu().numpy(),
        K_pred=grid.K_pred[batch, v].detach().double().cpu().numpy(),
        features=feats,
    )


def plot_response_volume(
    image_rgb: np.ndarray, data: ResponseVolume, path: str | Path, n_slices: int = 4, view_name: str = ""
) -> Path:
    """RGB with a crosshair at the argmax pixel | PCA of the per-pixel features | ``n_slices`` height slices of the
    step's voxel probabilities in this view (the argmax bin always among them, its voxel circled).

    The crosshair is at the argmax voxel's pixel centre scaled to the image, ``((col + 0.5) W / P, (row + 0.5) H / P)``
    (a voxel of a view lies on the ray of its grid pixel's centre; ``image_rgb`` is that view's image, any size).
    """
    plt = _pyplot()
    Z, P = data.probs.shape[0], data.probs.shape[1]
    bins = np.unique(np.round(np.linspace(0, Z - 1, n_slices)).astype(int))
    a_view, a_bin, a_row, a_col = data.argmax
    in_view = a_view == data.view
    if in_view and a_bin not in bins:
        bins = np.sort(np.append(bins[np.argsort(np.abs(bins - a_bin))[1:]], a_bin))
    n_cols = 2 + len(bins)
    fig, axes = plt.subplots(1, n_cols, figsize=(2.8 * n_cols, 3.2), dpi=100)
    name = view_name or f"view {data.view}"
    ax = axes[0]
    ax.imshow(image_rgb)
    if in_view:
        H, W = np.asarray(image_rgb).shape[:2]
        u, v = (a_col + 0.5) * W / P, (a_row + 0.5) * H / P
        # imshow puts pixel (col, row)'s centre at integer coordinates: shift by 0.5
        ax.axhline(v - 0.5, color="#22c55e", lw=1.2)
        ax.axvline(u - 0.5, color="#22c55e", lw=1.2)
        ax.plot(u - 0.5, v - 0.5, "o", color="#22c55e", mec="white", ms=9)
    ax.set_title(f"{name} RGB + argmax pixel", fontsize=9)
    ax.axis("off")
    ax = axes[1]
    if data.features is not None:
        ax.imshow(pca_rgb(data.features), interpolation="nearest")
        if in_view:
            ax.plot(a_col, a_row, "o", color="#22c55e", mec="white", ms=8)
        ax.set_title(f"PCA of {data.features.shape[0]}-d pixel features", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no per-pixel features", ha="center", va="center")
    ax.axis("off")
    vmax = float(data.probs.max()) or 1.0
    for ax, b in zip(axes[2:], bins):
        ax.imshow(data.probs[b], cmap="inferno", vmin=0.0, vmax=vmax, interpolation="nearest")
        if in_view and b == a_bin:
            ax.plot(a_col, a_row, "o", mfc="none", mec="#22c55e", ms=12, mew=2)
        ax.set_title(f"bin {b}: z = {data.heights_m[b] * 100:.1f} cm\nmass {data.probs[b].sum():.3f}", fontsize=9)
        ax.axis("off")
    x, y, z = data.argmax_xyz
    fig.suptitle(
        f"step {data.step}: softmax over voxels, {name} slices; argmax (view {a_view}, bin {a_bin}, row "
        f"{a_row}, col {a_col}) p = {data.argmax_prob:.4f} at ({x:.3f}, {y:.3f}, {z:.3f}) m",
        fontsize=9,
    )
    return _save(fig, path, rect=(0, 0, 1, 0.88))
