"""para_core.eval.figures: drawing at the right pixels, response volume vs brute force."""

import cv2
import numpy as np
import pytest
import torch
from core_fixtures import make_inputs

from para_core.eval import figures
from para_core.model.config import V4Config
from para_core.model.registry import build_model


def test_points_behind_the_camera_are_not_projected_nor_drawn():
    T = np.eye(4)  # camera at the origin looking along world +z
    K = np.array([[50.0, 0, 20.0], [0, 50.0, 10.0], [0, 0, 1]])
    uv, depth = figures.project_points(np.array([[0, 0, -1.0], [0, 0, 1.0]]), K, T)
    assert depth.tolist() == [-1.0, 1.0] and np.isnan(uv[0]).all()
    img = np.zeros((20, 40, 3), np.uint8)
    out = figures.draw_path_overlay(
        img, K, T, [figures.Path3D(np.array([[0, 0, -1.0], [0.1, 0, -1.0]]), (255, 0, 0))], min_width=40
    )
    assert out.max() == 0


def test_overlay_draws_at_the_projected_pixel():
    """A point on the optical axis lands at (cx, cy) = (20.5, 10.5): the centre of pixel (col 20, row 10)."""
    T = np.eye(4)
    K = np.array([[50.0, 0, 20.5], [0, 50.0, 10.5], [0, 0, 1]])
    img = np.zeros((21, 41, 3), np.uint8)
    out = figures.draw_path_overlay(
        img, K, T, [figures.Path3D(np.array([[0, 0, 1.0]]), (255, 0, 0))], min_width=41
    )  # no upscaling: s = 1
    assert out.shape == img.shape
    assert tuple(out[10, 20]) == (255, 0, 0)
    # The disc is symmetric about that pixel centre: its red mass has its centroid there.
    rows, cols = np.nonzero(out[..., 0] > 0)
    w = out[rows, cols, 0].astype(float)
    assert np.average(cols, weights=w) == pytest.approx(20.0, abs=0.05)
    assert np.average(rows, weights=w) == pytest.approx(10.0, abs=0.05)
    # Upscaled x4 (min_width): K scales exactly, the point lands at (82, 42) -> pixel centre (81.5, 41.5).
    big = figures.draw_path_overlay(img, K, T, [figures.Path3D(np.array([[0, 0, 1.0]]), (255, 0, 0))], min_width=160)
    assert big.shape == (84, 164, 3)
    rows, cols = np.nonzero(big[..., 0] > 0)
    w = big[rows, cols, 0].astype(float)
    assert np.average(cols, weights=w) == pytest.approx(81.5, abs=0.1)
    assert np.average(rows, weights=w) == pytest.approx(41.5, abs=0.1)


def test_pca_rgb_recovers_a_planted_component():
    rng = np.random.default_rng(0)
    pattern = np.zeros((8, 8))
    pattern[:, 4:] = 1.0
    direction = rng.normal(size=16)
    feats = direction[:, None, None] * pattern[None] + 1e-3 * rng.normal(size=(16, 8, 8))
    rgb = figures.pca_rgb(feats)
    assert rgb.shape == (8, 8, 3) and rgb.min() >= 0 and rgb.max() <= 1
    first = rgb[..., 0]
    assert abs(first[:, 4:].mean() - first[:, :4].mean()) > 0.95  # the planted split is the first component


def test_plots_write_pngs(tmp_path):
    per_step = [{"mean": 0.01 * i, "median": 0.01 * i, "p90": 0.02 * i, "max": 0.03, "count": 5} for i in range(4)]
    p = figures.plot_error_per_step(per_step, [0.0, 0.13, 0.27, 0.4], tmp_path / "e.png")
    img = cv2.imread(str(p))
    assert img is not None and img.shape == (400, 640, 3)
    t = np.arange(10) * 100_000_000
    xyz = np.column_stack([np.linspace(0, 1, 10), np.zeros(10), np.linspace(0.1, 0.2, 10)])
    p = figures.plot_trajectory(t, xyz, xyz + 0.01, tmp_path / "t.png")
    img = cv2.imread(str(p))
    assert img is not None and img.shape == (450, 1100, 3)


def test_response_volume_data_matches_brute_force_and_geometry(tmp_path):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inputs = make_inputs(cfg)
    with torch.no_grad():
        out = model(inputs)
        feats, _ = model.image_features(inputs.images)
    step = 2
    data = figures.response_volume_data(out, step=step, feature_maps=feats)
    logits = out.volume_logits[0, step].double()
    best = int(logits.argmax())
    N, Z, P = cfg.n_views, cfg.n_height_bins, cfg.pred_size
    # Brute force: find the (view, bin, row, col) whose flat index is the argmax.
    found = [
        (n, z, r, c)
        for n in range(N)
        for z in range(Z)
        for r in range(P)
        for c in range(P)
        if ((n * Z + z) * P + r) * P + c == best
    ]
    assert data.argmax == found[0]
    probs = torch.softmax(logits, 0).numpy()
    assert data.argmax_prob == pytest.approx(float(probs.max()), rel=1e-5)
    n, z, r, c = data.argmax
    assert data.view == n
    assert data.probs[z, r, c] == pytest.approx(float(probs.max()), rel=1e-5)
    assert data.probs.sum() == pytest.approx(probs[n * Z * P * P : (n + 1) * Z * P * P].sum(), rel=1e-5)
    # Geometry: the argmax voxel lies on the ray of its grid pixel's centre at its bin height.
    uv, _ = figures.project_points(data.argmax_xyz[None], data.K_pred, inputs.T_world_cam[0, n].double().numpy())
    np.testing.assert_allclose(uv[0], [c + 0.5, r + 0.5], atol=1e-3)
    assert data.argmax_xyz[2] == pytest.approx(data.heights_m[z], abs=1e-5)
    rgb = (np.random.default_rng(0).random((cfg.img_size, cfg.img_size, 3)) * 255).astype(np.uint8)
    p = figures.plot_response_volume(rgb, data, tmp_path / "rv.png", view_name="scene")
    assert cv2.imread(str(p)) is not None
    with pytest.raises(ValueError, match="out of range"):
        figures.response_volume_data(out, step=0, view=5)
