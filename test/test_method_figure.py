"""``para-bag figure``: the paper's six-panel method figure from a real inference step of either head; the SVG's
numbers equal the .npz, the predicted pixel is the projection of the argmax voxel's 3-D point."""

import re

import numpy as np
import pytest
from bag_fixtures import SyntheticBagSpec, write_synthetic_bag

from para_ros.commands import bag as bag_tools

PANELS = (
    "panel_a_rgb.png",
    "panel_b_tokens_pca.png",
    "panel_c_features_pca.png",
    "panel_d_feature_vec.png",
    "panel_e_key_query.png",
    "panel_f_response_volume.png",
)


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return write_synthetic_bag(
        tmp_path_factory.mktemp("fig") / "bag", SyntheticBagSpec(duration_s=1.5, wrist_compressed=False)
    )


@pytest.mark.parametrize("preset", ["tiny", "tiny_dino_kv"])
def test_figure_panels_svg_and_npz_agree(bag, tmp_path, preset):
    out = tmp_path / "fig"
    assert (
        bag_tools.main(
            ["figure", str(bag), "--random-preset", preset, "--frame", "3", "--step", "1", "--out", str(out)]
        )
        == 0
    )
    for name in PANELS + ("figure.svg", "figure.npz"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    d = np.load(out / "figure.npz", allow_pickle=False)
    svg = (out / "figure.svg").read_text()
    assert svg.count("data:image/png;base64,") == 6
    num = lambda label: re.search(label + r" = ([-0-9.]+)", svg).group(1)  # noqa: E731
    assert int(num("chosen step t")) == int(d["step"]) == 1
    assert float(num("top-1 probability")) == pytest.approx(float(d["top1_prob"]) * 100, abs=0.006)
    assert float(num("bin height")) == pytest.approx(float(d["bin_height_m"]) * 100, abs=0.006)
    assert float(num("bin spacing")) == pytest.approx(float(d["bin_spacing_m"]) * 1000, abs=0.006)
    assert float(num("logit scale")) == pytest.approx(float(d["logit_scale"]), abs=6e-4)
    assert d["bin_height_m"] == pytest.approx(d["heights_m"][int(d["argmax"][1])])
    assert d["volume"].shape[0] == d["heights_m"].shape[0] and d["feature_vec"].ndim == 1
    assert np.isfinite(d["gt_px"]).all()  # the synthetic bag has TF at stamp + step offset: ground truth shown


def test_predicted_pixel_is_the_projection_of_the_argmax_point(bag, tmp_path):
    """Independent of the panel code: project the argmax voxel's world point with the bag's scene camera."""
    import cv2
    from bag_fixtures import K_IMAGE, T_SCENE

    out = tmp_path / "fig"
    assert bag_tools.main(["figure", str(bag), "--random-preset", "tiny_dino_kv", "--out", str(out)]) == 0
    d = np.load(out / "figure.npz", allow_pickle=False)
    T_cw = np.linalg.inv(T_SCENE())
    rvec, _ = cv2.Rodrigues(T_cw[:3, :3])
    K = K_IMAGE(SyntheticBagSpec()) - np.array([[0, 0, 0.5], [0, 0, 0.5], [0, 0, 0]])  # OpenCV pixel centres
    uv, _ = cv2.projectPoints(d["argmax_xyz"].reshape(1, 3), rvec, T_cw[:3, 3], K, None)
    # the argmax voxel lies on the ray of its grid pixel's centre, so both land on the same image point
    np.testing.assert_allclose(d["pred_px"], uv.reshape(2) + 0.5, atol=1e-3)


def test_figure_refuses_a_frame_out_of_range(bag, tmp_path, capsys):
    assert (
        bag_tools.main(["figure", str(bag), "--random-preset", "tiny", "--frame", "999", "--out", str(tmp_path / "f")])
        == 2
    )
    assert "--frame 999" in capsys.readouterr().err


def test_figure_data_of_a_fast_path_model_is_the_reference_paths():
    """A policy built with the fast path (which keeps no per-voxel features) still gives the figure's fused voxel
    feature: the data equal a reference-path model's, and the model is left on its fast path."""
    import torch
    from test_core_fast_path import observation

    from para_core.eval.method_figure import method_figure_data
    from para_core.model.config import V4Config
    from para_core.model.policy import Policy

    cfg = V4Config.tiny()
    ref = Policy.random_init(cfg, device="cpu", seed=3)
    fast = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    cams, state = observation(cfg, 0)
    inputs = ref.preprocess(cams, state)
    rgb = [c.image_rgb for c in cams]
    with torch.no_grad():
        a = method_figure_data(ref.model, inputs, rgb, step=1)
        b = method_figure_data(fast.model, inputs, rgb, step=1)
    assert fast.model.fast_inference
    for key, value in a.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_allclose(b[key], value, atol=1e-6, err_msg=key)
