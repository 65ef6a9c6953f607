"""V4Config: paper/tiny presets, validation errors that name field + value + fix, JSON/YAML round trips."""

import math

import pytest

from para_core.model.config import V4Config


def test_paper_preset_matches_seed_table():
    cfg = V4Config.paper()
    assert (cfg.img_size, cfg.pred_size, cfg.feat_dim, cfg.n_height_bins) == (512, 64, 32, 128)
    assert (cfg.height_enc_dim, cfg.n_window, cfg.frame_stride, cfg.cam_margin_m) == (16, 32, 4, 0.01)
    assert (cfg.batch_size, cfg.mv_past_n, cfg.lr, cfg.backbone_lr_mult) == (4, 8, 3e-4, 0.1)
    assert (cfg.lr_warmup, cfg.lr_schedule, cfg.max_iters) == (500, "cosine", 20000)
    assert cfg.view_names == ("scene", "wrist")
    assert (cfg.height_encoding, cfg.z_range_mode) == ("sincos", "adaptive")
    assert cfg.n_voxels == 2 * 128 * 64**2 == 1_048_576
    assert cfg.img_size % 16 == 0 and cfg.patch_grid == 32


def test_tiny_preset_is_small():
    cfg = V4Config.tiny()
    assert cfg.n_voxels == 2 * 8 * 16 * 16
    assert cfg.backbone_config["hidden_size"] == 64 and cfg.backbone_config["num_hidden_layers"] == 2


def test_img_size_504_rejected_with_fix():
    with pytest.raises(ValueError) as exc:
        V4Config.paper(img_size=504)
    msg = str(exc.value)
    assert "img_size" in msg and "504" in msg and "496 or 512" in msg and "multiple of patch_size=16" in msg


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("pred_size", 0, "positive integer"),
        ("height_enc_dim", 15, "even"),
        ("height_encoding", "fourier", "sincos"),
        ("z_range_mode", "auto", "adaptive"),
        ("z_hi_m", -1.0, "greater than z_lo_m"),
        ("workspace_x_m", (0.5, 0.1), "min < max"),
        ("rotation_ref_quat_xyzw", (0.0, 2.0, 0.0, 0.0), "unit quaternion"),
        ("n_gripper_bins", 1, ">= 2"),
        ("dataset_fps", 0.0, "> 0"),
        ("backbone_kind", "resnet", "dinov3"),
        ("voxel_chunk_size", -5, "no chunking"),
        ("cam_margin_m", float("nan"), "finite"),
    ],
)
def test_invalid_values_name_field_value_and_fix(field, value, fragment):
    with pytest.raises(ValueError) as exc:
        V4Config.tiny(**{field: value})
    msg = str(exc.value)
    assert f"V4Config.{field}" in msg and fragment in msg
    if not (isinstance(value, float) and math.isnan(value)):
        assert repr(value) in msg or str(value) in msg


def test_backbone_patch_size_must_match():
    with pytest.raises(ValueError, match="backbone_config"):
        V4Config.tiny(backbone_config={**V4Config.tiny().backbone_config, "patch_size": 14})


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_round_trip(fmt, tmp_path):
    cfg = V4Config.tiny(height_encoding="learned", z_range_mode="fixed", workspace_x_m=(0.0, 0.5))
    text = cfg.to_json() if fmt == "json" else cfg.to_yaml()
    back = V4Config.from_json(text) if fmt == "json" else V4Config.from_yaml(text)
    assert back == cfg
    path = tmp_path / f"cfg.{fmt}"
    cfg.save(path)
    assert V4Config.load(path) == cfg
    assert isinstance(back.view_names, tuple) and isinstance(back.workspace_x_m, tuple)


def test_unknown_key_rejected():
    data = V4Config.tiny().to_dict()
    data["img_sise"] = 64
    with pytest.raises(ValueError, match="img_sise"):
        V4Config.from_dict(data)


def test_presets_by_name():
    from para_core.model.config import PRESET_NAMES

    for name in PRESET_NAMES:
        assert V4Config.preset(name) == getattr(V4Config, name)()
    assert V4Config.preset("tiny", n_window=6).n_window == 6
    with pytest.raises(ValueError, match="unknown V4Config preset 'huge'"):
        V4Config.preset("huge")
