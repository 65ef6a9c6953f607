"""Checkpoints: save -> load -> identical outputs; every bad checkpoint fails with a clear message; no pickle."""

import json
import re
from pathlib import Path

import pytest
import torch
from core_fixtures import make_inputs
from safetensors.torch import load_file, save_file

import para_core
from para_core.model.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from para_core.model.config import V4Config
from para_core.model.registry import build_model

torch.set_num_threads(1)


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(1)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    path = save_checkpoint(tmp_path / "ckpt", model, model_id="tiny-test")
    return model, cfg, path


def test_save_load_identical_outputs(saved):
    model, cfg, path = saved
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    meta = json.loads((path / "config.json").read_text())
    assert meta["model_kind"] == "para_v4" and meta["model_id"] == "tiny-test"
    assert set(meta["versions"]) >= {"para_core", "torch", "transformers", "safetensors"}
    loaded, cfg2, _ = load_checkpoint(path, expected_kind="para_v4")
    assert cfg2 == cfg
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        a, b = model(inp), loaded(inp)
    assert torch.equal(a.volume_logits, b.volume_logits)
    assert torch.equal(a.gripper_logits, b.gripper_logits) and torch.equal(a.rotation_logits, b.rotation_logits)


def _edit_config(path, fn):
    meta = json.loads((path / "config.json").read_text())
    fn(meta)
    (path / "config.json").write_text(json.dumps(meta))


def test_wrong_kind(saved):
    _, _, path = saved
    with pytest.raises(CheckpointError, match=r"holds model_kind 'para_v4', but 'para_v9' was requested"):
        load_checkpoint(path, expected_kind="para_v9")
    _edit_config(path, lambda m: m.update(model_kind="para_v9"))
    with pytest.raises(CheckpointError, match=r"model_kind 'para_v9', which this para_core does not know"):
        load_checkpoint(path)


def test_mismatched_shapes(saved):
    _, _, path = saved
    _edit_config(path, lambda m: m["config"]["head"].update(feat_dim=8))
    with pytest.raises(
        CheckpointError,
        match=r"shape mismatch.*proj\.weight: checkpoint \(16, 64, 1, 1\) vs model "
        r"\(8, 64, 1, 1\)",
    ):
        load_checkpoint(path)


def test_missing_and_unexpected_tensors(saved):
    _, _, path = saved
    state = load_file(str(path / "model.safetensors"))
    del state["q_head.weight"]
    state["extra.weight"] = torch.zeros(2)
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(path)
    msg = str(exc.value)
    assert "1 missing tensor(s): ['q_head.weight']" in msg and "1 unexpected tensor(s): ['extra.weight']" in msg


def test_truncated_weights(saved):
    _, _, path = saved
    f = path / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(path)


def test_missing_files_and_bad_json(saved, tmp_path):
    _, _, path = saved
    with pytest.raises(CheckpointError, match="is not a directory"):
        load_checkpoint(tmp_path / "nope")
    (path / "model.safetensors").rename(tmp_path / "w")
    with pytest.raises(CheckpointError, match="has no model.safetensors"):
        load_checkpoint(path)
    (path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
    (path / "config.json").unlink()
    with pytest.raises(CheckpointError, match="has no config.json"):
        load_checkpoint(path)


def test_invalid_config_in_checkpoint(saved):
    _, _, path = saved
    _edit_config(path, lambda m: m["config"]["backbone"].update(img_size=60))
    with pytest.raises(CheckpointError, match=r"config is invalid: V4Config.img_size = 60"):
        load_checkpoint(path)


def test_nothing_is_unpickled():
    src = Path(para_core.__file__).parent
    for f in src.glob("*.py"):
        text = f.read_text()
        assert not re.search(r"torch\.load\(|import pickle|pickle\.load", text), f


def test_pretrained_backbone_dir_and_self_contained_checkpoint(tmp_path):
    """Real weights come from a local transformers directory (from_pretrained); the checkpoint then records the
    architecture and no longer needs that directory."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    cfg = V4Config.tiny()
    torch.manual_seed(5)
    vit = DINOv3ViTModel(DINOv3ViTConfig(**{**cfg.backbone_config, "num_hidden_layers": 1}))
    vit.save_pretrained(tmp_path / "dino")
    cfg_pre = cfg.replace(backbone_pretrained_dir=str(tmp_path / "dino"))
    model = build_model(cfg_pre).eval()
    for (n, a), b in zip(vit.state_dict().items(), model.backbone.vit.state_dict().values()):
        assert torch.equal(a, b), n
    path = save_checkpoint(tmp_path / "ckpt", model)
    (tmp_path / "dino" / "config.json").unlink()  # the checkpoint must not need it
    loaded, cfg2, _ = load_checkpoint(path)
    assert cfg2.backbone_pretrained_dir == "" and cfg2.backbone_config["num_hidden_layers"] == 1
    inp = make_inputs(cfg)
    with torch.no_grad():
        assert torch.equal(model(inp).volume_logits, loaded(inp).volume_logits)
    with pytest.raises(ValueError, match="has no config.json"):
        build_model(cfg_pre)


def test_pretrained_backbone_dir_with_pickled_weights_only_is_refused(tmp_path):
    """A backbone directory holding only pytorch_model.bin (a pickle) is refused, never unpickled."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    cfg = V4Config.tiny()
    vit = DINOv3ViTModel(DINOv3ViTConfig(**{**cfg.backbone_config, "num_hidden_layers": 1}))
    vit.save_pretrained(tmp_path / "dino")
    for f in (tmp_path / "dino").glob("*.safetensors"):  # leave only a pickled pytorch_model.bin, as old repos ship
        f.unlink()
    torch.save(vit.state_dict(), tmp_path / "dino" / "pytorch_model.bin")
    with pytest.raises(ValueError, match="only safetensors are loaded"):
        build_model(cfg.replace(backbone_pretrained_dir=str(tmp_path / "dino")))


def test_a_saved_checkpoint_is_readable_like_any_file_the_user_writes(tmp_path):
    """safetensors writes its file 0600 through a temporary file; a checkpoint is copied and shared, so its weights
    get the mode open() would give (0666 less the umask), as config.json does."""
    import os
    import stat

    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.config import V4Config
    from para_core.model.registry import build_model

    cfg = V4Config.tiny(view_names=("scene", "wrist"))
    save_checkpoint(tmp_path / "ck", build_model(cfg), cfg)
    probe = tmp_path / "probe.txt"
    probe.write_text("x")
    want = stat.S_IMODE(os.stat(probe).st_mode)
    assert stat.S_IMODE(os.stat(tmp_path / "ck" / "model.safetensors").st_mode) == want
    assert stat.S_IMODE(os.stat(tmp_path / "ck" / "config.json").st_mode) == want
