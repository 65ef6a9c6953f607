"""The PARA v4 design's method figure (figure script 000) from a REAL inference step, for any voxel-volume model kind.

Six panels, each a PNG, composed into one SVG with the panels embedded (base64) and the numbers written as text:

(a) the RGB input of the view that holds the step's argmax voxel, with the predicted pixel (and the ground-truth one
    when the frame has ground truth), (b) PCA of the raw backbone patch tokens, (c) PCA of the per-pixel features
    F (P x P), (d) the feature vector at the chosen pixel, (e) what scored the chosen voxel at the chosen step (the
    model's ``explain_score``; dino_kv: t_emb[t], h_emb[z] and the key; v4: the step's query and the fused voxel
    feature it is dotted with), (f) the
    response volume of the step as height slices with the argmax voxel and its 3-D point.

Numbers (also in ``figure.npz`` with every array the panels are drawn from; no pickled objects): chosen step, bin
height, bin spacing, top-1 probability, logit scale, argmax voxel (view, bin, row, col) and its world point. A test
checks that the numbers in the SVG equal the ``.npz``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import torch

from para_core.eval.figures import _pyplot, pca_rgb


@torch.no_grad()
def method_figure_data(model, inputs, image_rgb_per_view, step: int = -1, gt_xyz=None) -> dict:
    """Everything the figure shows, as numpy arrays and numbers (``np.savez``-able).

    :param model: a ``para_core.model.interface.VoxelVolumeModel`` (any kind with ``has_voxel_volume``: its
        ``feature_maps`` give panel (c), its ``explain_score`` panel (e) and the headline); ``inputs``: its
        ``V4Inputs`` (batch 1).
    :param image_rgb_per_view: the raw RGB images (H, W, 3) uint8, one per view, for panel (a).
    :param step: chunk step to show (-1: the last); ``gt_xyz``: optional (3,) ground-truth point of that step.
    """
    model.eval()
    if not model.has_voxel_volume:
        raise ValueError(
            f"model kind {model.kind!r} has no voxel volume to draw; the method figure needs a model with "
            "has_voxel_volume (para_core.model.interface.VoxelVolumeModel)"
        )
    fast = model.fast_inference
    if fast:  # the figure reads the fused features of a voxel, which the fast path does not keep: the reference path
        model.fast_inference = False
    try:
        out = model(inputs)
    finally:
        if fast:
            model.fast_inference = True
    cfg = model.config
    T, Z, P = cfg.n_window, cfg.n_height_bins, cfg.pred_size
    t = step % T
    logits = out.volume_logits[0, t].float()  # (V,)
    probs = torch.softmax(logits, -1)  # (V,)
    best = int(logits.argmax())
    view, rem = divmod(best, Z * P * P)
    zbin, rem = divmod(rem, P * P)
    row, col = divmod(rem, P)
    images = inputs.images[0]  # (N, 3, S, S)
    if model.backbone.multi_view:  # DA3: all views and their poses together, then this view's grid
        views = model.backbone.forward_views(inputs.images[:1], inputs.K_img[:1], inputs.T_world_cam[:1])
        tokens = views.patch_grid[view].float().cpu().numpy()  # (C, h, w)
    else:
        tokens = model.backbone(images[view : view + 1]).patch_grid[0].float().cpu().numpy()  # (C, h, w)
    feat = model.feature_maps(inputs)[0, view].float().cpu().numpy()  # (F, P, P)
    explained = model.explain_score(inputs, out, t, best)  # what scored the argmax voxel: panel (e), the headline
    heights_m = out.grid.z_bin_centres[0, view].double().cpu().numpy()  # (Z,)
    sl = probs[view * Z * P * P : (view + 1) * Z * P * P].reshape(Z, P, P).cpu().numpy()
    K_img = inputs.K_img[0, view].double().cpu().numpy()
    rgb = np.asarray(image_rgb_per_view[view])
    H, W = rgb.shape[:2]
    S = cfg.img_size
    pred_px = np.array([(col + 0.5) / P * W, (row + 0.5) / P * H])  # para_core convention (centres at +0.5)
    gt_px = np.array([np.nan, np.nan])
    if gt_xyz is not None and np.all(np.isfinite(gt_xyz)):
        T_cw = np.linalg.inv(inputs.T_world_cam[0, view].double().cpu().numpy())
        p = T_cw[:3, :3] @ np.asarray(gt_xyz, dtype=np.float64) + T_cw[:3, 3]
        if p[2] > 0:
            uv = (K_img @ (p / p[2]))[:2]  # pixels of the S x S model input
            gt_px = uv * np.array([W / S, H / S])
    spacing = float(np.median(np.diff(heights_m))) if Z > 1 else float("nan")
    return {
        "rgb": rgb,
        "tokens_pca": pca_rgb(tokens),
        "features_pca": pca_rgb(feat),
        "feature_vec": feat[:, row, col],
        "vec_e": explained.vectors,
        "volume": sl,
        "heights_m": heights_m,
        "argmax": np.array([view, zbin, row, col]),
        "argmax_xyz": out.voxel_xyz[0, best].double().cpu().numpy(),
        "pred_px": pred_px,
        "gt_px": gt_px,
        "gt_xyz": np.asarray(gt_xyz if gt_xyz is not None else [np.nan] * 3, dtype=np.float64),
        "step": np.int64(t),
        "bin_height_m": np.float64(heights_m[zbin]),
        "bin_spacing_m": np.float64(spacing),
        "top1_prob": np.float64(probs[best]),
        "logit_scale": np.float64(explained.logit_scale),
        "meta": json.dumps(
            {
                "model_kind": cfg.model_kind,
                "view": cfg.view_names[view],
                "pred_size": P,
                "n_height_bins": Z,
                "feat_dim": cfg.feat_dim,
                "vec_e_labels": "|".join(explained.labels),
                "score_formula": explained.formula,
            }
        ),
    }


def _png(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    plt.close(fig)
    return path


def _bars(ax, vec, label, cmap):
    v = np.asarray(vec, dtype=np.float64)
    ax.imshow(v[None, :], aspect="auto", cmap=cmap)
    ax.set_yticks([])
    ax.set_xticks([])
    ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)


def write_method_figure(data: dict, out_dir, n_slices: int = 4) -> dict[str, Path]:
    """Write panels a-f (PNG), ``figure.svg`` (panels embedded + the numbers) and ``figure.npz``."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = json.loads(str(data["meta"]))
    paths: dict[str, Path] = {}
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.imshow(data["rgb"])
    ax.plot(*(data["pred_px"] - 0.5), "o", mfc="none", mec="#ef4444", ms=12, mew=2, label="predicted")
    if np.all(np.isfinite(data["gt_px"])):
        ax.plot(*(data["gt_px"] - 0.5), "+", color="#22c55e", ms=14, mew=2, label="ground truth")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_axis_off()
    paths["a"] = _png(fig, out / "panel_a_rgb.png")
    for key, name, arr in (
        ("b", "panel_b_tokens_pca.png", data["tokens_pca"]),
        ("c", "panel_c_features_pca.png", data["features_pca"]),
    ):
        fig, ax = plt.subplots(figsize=(3, 3))
        ax.imshow(arr, interpolation="nearest")
        if key == "c":
            _, _, r, c = (int(x) for x in data["argmax"])
            ax.plot(c, r, "o", mfc="none", mec="#22c55e", ms=10, mew=2)
        ax.set_axis_off()
        paths[key] = _png(fig, out / name)
    fig, ax = plt.subplots(figsize=(7, 0.8))
    _bars(ax, data["feature_vec"], "F(u,v)", "PuBu")
    paths["d"] = _png(fig, out / "panel_d_feature_vec.png")
    labels = meta["vec_e_labels"].split("|")
    fig, axes = plt.subplots(len(labels), 1, figsize=(7, 0.7 * len(labels)))
    for ax, vec, label in zip(np.atleast_1d(axes), data["vec_e"], labels):
        _bars(ax, vec, label, "YlOrRd")
    paths["e"] = _png(fig, out / "panel_e_key_query.png")
    Z = data["volume"].shape[0]
    zb = int(data["argmax"][1])
    slices = sorted(set(np.linspace(0, Z - 1, n_slices).round().astype(int).tolist()) | {zb})
    fig, axes = plt.subplots(1, len(slices), figsize=(2.3 * len(slices), 2.6))
    from matplotlib.colors import PowerNorm  # matplotlib: loaded on first use, not on import

    norm = PowerNorm(0.3, vmin=0.0, vmax=float(data["volume"].max()))  # a peaked volume still shows its tails
    for ax, z in zip(np.atleast_1d(axes), slices):
        ax.imshow(data["volume"][z], cmap="inferno", norm=norm, interpolation="nearest")
        ax.set_title(f"z={z} ({data['heights_m'][z] * 100:.1f} cm)", fontsize=8)
        if z == zb:
            _, _, r, c = (int(x) for x in data["argmax"])
            ax.plot(c, r, "o", mfc="none", mec="#22c55e", ms=9, mew=2)
        ax.set_axis_off()
    paths["f"] = _png(fig, out / "panel_f_response_volume.png")
    np.savez(out / "figure.npz", **{k: np.asarray(v) for k, v in data.items()})
    paths["npz"] = out / "figure.npz"
    paths["svg"] = _compose_svg(data, meta, paths, out / "figure.svg")
    return paths


def figure_numbers(data: dict) -> dict[str, str]:
    """The numbers the SVG prints, formatted (the test compares them with the .npz)."""
    x, y, z = (float(v) for v in data["argmax_xyz"])
    return {
        "step": f"{int(data['step'])}",
        "bin_height_cm": f"{float(data['bin_height_m']) * 100:.2f}",
        "bin_spacing_mm": f"{float(data['bin_spacing_m']) * 1000:.2f}",
        "top1_prob_pct": f"{float(data['top1_prob']) * 100:.2f}",
        "logit_scale": f"{float(data['logit_scale']):.3f}",
        "point_m": f"({x:.4f}, {y:.4f}, {z:.4f})",
    }


def _compose_svg(data: dict, meta: dict, paths: dict, path: Path) -> Path:
    def img(key, x, y, w, h):
        b = base64.b64encode(Path(paths[key]).read_bytes()).decode()
        return f'<image x="{x}" y="{y}" width="{w}" height="{h}" href="data:image/png;base64,{b}"/>'

    n = figure_numbers(data)
    v, zb, r, c = (int(x) for x in data["argmax"])
    head = meta["score_formula"]

    def text(x, y, s, size=13, weight="normal"):
        s = s.replace("&", "&amp;").replace("<", "&lt;")
        return f'<text x="{x}" y="{y}" font-family="sans-serif" font-size="{size}" font-weight="{weight}">{s}</text>'

    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="1400" height="800" viewBox="0 0 1400 800">',
        '<rect width="1400" height="800" fill="white"/>',
        text(20, 30, f"PARA {meta['model_kind']}: one inference step ({meta['view']} view)", 18, "bold"),
        text(20, 52, head),
        text(20, 85, "(a) RGB input: predicted (red) / ground-truth (green) pixel", 12, "bold"),
        img("a", 20, 95, 360, 360),
        text(400, 85, "(b) PCA of raw backbone tokens", 12, "bold"),
        img("b", 400, 95, 220, 220),
        text(640, 85, f"(c) PCA of per-pixel features F ({meta['feat_dim']} x {meta['pred_size']}^2)", 12, "bold"),
        img("c", 640, 95, 220, 220),
        text(400, 345, f"(d) F(u,v) at the chosen pixel (row {r}, col {c})", 12, "bold"),
        img("d", 400, 355, 460, 60),
        text(400, 440, "(e) key / query at the chosen step and height", 12, "bold"),
        img("e", 400, 450, 460, 130),
        text(900, 85, "(f) response volume: height slices of softmax(logits[t])", 12, "bold"),
        img("f", 880, 95, 500, 180),
        text(900, 320, f"chosen step t = {n['step']}", 14),
        text(900, 345, f"argmax voxel: view {v}, bin {zb}, row {r}, col {c}", 14),
        text(900, 370, f"bin height = {n['bin_height_cm']} cm", 14),
        text(900, 395, f"bin spacing = {n['bin_spacing_mm']} mm", 14),
        text(900, 420, f"top-1 probability = {n['top1_prob_pct']} %", 14),
        text(900, 445, f"logit scale = {n['logit_scale']}", 14),
        text(900, 470, f"3-D point (world, m) = {n['point_m']}", 14),
        "</svg>",
    ]
    path.write_text("\n".join(parts))
    return path
