"""V4Config: paper/tiny presets, validation errors that name field + value + fix, JSON/YAML round trips."""

import json
import math
from pathlib import Path

import pytest

from para_core.model.config import V4Config

REPO = Path(__file__).resolve().parents[1]


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


# ---------------------------------------------------------------------------------------------------- field groups
def test_every_field_sits_in_exactly_one_group_under_a_unique_name():
    import dataclasses

    from para_core.model.config import CONFIG_GROUPS, FLAT_FIELD_GROUP, TOP_LEVEL_FIELDS

    names = [f.name for cls in CONFIG_GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)) == len(FLAT_FIELD_GROUP)
    assert not set(names) & (set(TOP_LEVEL_FIELDS) | set(CONFIG_GROUPS))
    assert [f.name for f in dataclasses.fields(V4Config)] == [*TOP_LEVEL_FIELDS, *CONFIG_GROUPS]
    # the 44 fields of the flat layout (the shipped checkpoints' config.json), each in one group
    shipped = json.loads((REPO / "checkpoints" / "pick_place" / "config.json").read_text())["config"]
    assert set(shipped) == set(names) | set(TOP_LEVEL_FIELDS) and len(shipped) == 44


def test_flat_names_read_the_group_and_cannot_be_assigned():
    from para_core.model.config import FLAT_FIELD_GROUP

    cfg = V4Config.pick_place()
    for name, group in FLAT_FIELD_GROUP.items():
        assert getattr(cfg, name) is getattr(getattr(cfg, group), name), name
    assert cfg.backbone.img_size == 128 and cfg.voxels.n_height_bins == 12 and cfg.training.lr == 1e-3
    with pytest.raises(AttributeError):
        cfg.img_size = 64
    assert cfg.replace(img_size=64).backbone.img_size == 64 and cfg.img_size == 128  # a copy, not an edit


def test_to_dict_is_grouped_and_the_flat_layout_still_loads():
    cfg = V4Config.tiny(height_encoding="learned", n_window=5)
    grouped = cfg.to_dict()
    assert set(grouped) == {"model_kind", "name", "backbone", "voxels", "head", "data", "actions", "training"}
    assert grouped["voxels"]["height_encoding"] == "learned" and grouped["data"]["n_window"] == 5
    flat = cfg.to_flat_dict()
    assert flat["height_encoding"] == "learned" and "voxels" not in flat and len(flat) == 44
    assert V4Config.from_dict(flat) == cfg == V4Config.from_dict(grouped)
    mixed = {**{k: v for k, v in flat.items() if k != "n_window"}, "data": {"n_window": 5}}
    mixed = {k: v for k, v in mixed.items() if k not in ("view_names", "frame_stride", "dataset_fps", "mv_past_n")}
    mixed["data"].update(view_names=["scene", "wrist"], frame_stride=4, dataset_fps=30.0, mv_past_n=2)
    assert V4Config.from_dict(mixed) == cfg


def test_a_field_given_twice_or_unknown_in_a_group_is_refused_by_name():
    grouped = V4Config.tiny().to_dict()
    with pytest.raises(ValueError, match=r"field 'img_size' is given twice \(also as 'img_size'\)"):
        V4Config.from_dict({**grouped, "img_size": 64})
    grouped["backbone"]["img_sise"] = 64
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['backbone.img_sise'\]"):
        V4Config.from_dict(grouped)
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['head.img_size'\]"):  # a field in the wrong group
        V4Config.from_dict({**V4Config.tiny().to_dict(), "head": {"img_size": 64}})
    with pytest.raises(ValueError, match=r"V4Config.voxels: expected a mapping"):
        V4Config.from_dict({**V4Config.tiny().to_dict(), "voxels": 3})


def test_each_group_validates_its_own_fields():
    from para_core.model.config import ActionConfig, BackboneConfig, DataConfig, TrainingConfig, VoxelGridConfig

    with pytest.raises(ValueError, match=r"V4Config.img_size = 60 is invalid: must be a multiple of patch_size=16"):
        BackboneConfig(img_size=60)
    with pytest.raises(ValueError, match=r"V4Config.z_hi_m = 0.0 is invalid: must be greater than z_lo_m=0.1"):
        VoxelGridConfig(z_lo_m=0.1, z_hi_m=0.0)
    with pytest.raises(ValueError, match=r"V4Config.view_names = \('a', 'a'\) is invalid"):
        DataConfig(view_names=("a", "a"))
    with pytest.raises(ValueError, match=r"V4Config.n_gripper_bins = 1 is invalid"):
        ActionConfig(n_gripper_bins=1)
    with pytest.raises(ValueError, match=r"V4Config.lr_schedule = 'step' is invalid"):
        TrainingConfig(lr_schedule="step")
    with pytest.raises(ValueError, match=r"V4Config.img_size = 60 is invalid"):  # and through the whole config
        V4Config.tiny(img_size=60)


def test_replace_takes_flat_names_groups_or_both():
    from para_core.model.config import HeadConfig

    cfg = V4Config.tiny()
    assert cfg.replace(backbone={"img_size": 128}).img_size == 128  # a group mapping changes only what it names
    assert cfg.replace(backbone={"img_size": 128}).backbone_config == cfg.backbone_config
    head = HeadConfig(feat_dim=8)
    assert cfg.replace(head=head).head == head
    assert cfg.replace(name="x", n_window=7).data.n_window == 7
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['n_windows'\]"):
        cfg.replace(n_windows=7)
