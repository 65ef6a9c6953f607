"""``para-train --init-from``: a new run starts from a checkpoint's weights (tensors equal) with a new schedule
(iteration 0, an empty optimizer, the warm-up again); a checkpoint of another kind, preset, camera set or
architecture is refused, naming the mismatch, before anything is written."""

import json

import numpy as np
import pytest
import torch
from training_helpers import one_torch_thread  # noqa: F401  (autouse)
from training_helpers import quick as quick_train_config

from para_core.data import synthetic as syn
from para_core.model.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from para_core.model.config import V4Config
from para_core.model.registry import build_model
from para_core.train.cli import main as cli_main
from para_core.train.trainer import TrainConfig, Trainer, lr_factor, read_metrics


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("episodes")
    rng = np.random.default_rng(0)
    return [syn.synthetic_episode(V4Config.tiny(), rng, n_frames=16).save(root / f"ep{i}") for i in range(2)]


def quick(**kw) -> TrainConfig:
    return quick_train_config(tensorboard=False, **kw)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A checkpoint of the tiny preset with weights unlike a fresh initialisation (seed 123, then perturbed)."""
    cfg = V4Config.tiny()
    torch.manual_seed(123)
    model = build_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    return save_checkpoint(tmp_path_factory.mktemp("ck") / "source", model, cfg), cfg


def test_init_from_loads_the_weights_and_starts_a_new_schedule(tmp_path, episodes, source):
    path, cfg = source
    ref, _, _ = load_checkpoint(path)
    tune = cfg.replace(lr=5e-4, max_iters=3, lr_warmup=2)  # schedule fields may differ
    t = Trainer(tune, quick(init_from=str(path)), episodes, tmp_path / "ft")
    for k, v in ref.state_dict().items():
        assert torch.equal(t.model.state_dict()[k], v), k  # every tensor is the checkpoint's
    fresh = Trainer(tune, quick(), episodes, tmp_path / "fresh")
    assert not all(torch.equal(fresh.model.state_dict()[k], v) for k, v in ref.state_dict().items())
    assert t.iteration == 0 and t.samples_seen == 0
    assert t.optimizer.state_dict()["state"] == {}  # no Adam moments carried over
    assert all(g["lr"] == g["base_lr"] == 5e-4 for g in t.optimizer.param_groups if g.get("name") != "backbone")
    t.run()
    train_rows = [r for r in read_metrics(tmp_path / "ft" / "metrics.jsonl") if r["split"] == "train"]
    assert [r["iter"] for r in train_rows] == [1, 2, 3]
    # the warm-up starts again: the first step's learning rate is lr * 1 / lr_warmup
    assert train_rows[0]["lr"] == pytest.approx(5e-4 * lr_factor(0, tune))
    assert lr_factor(0, tune) == pytest.approx(0.5)
    run = json.loads((tmp_path / "ft" / "run.json").read_text())
    assert run["train_config"]["init_from"] == str(path)
    # resuming the fine-tune continues its own schedule and weights (the source is not loaded again)
    resumed = Trainer(
        tune.replace(max_iters=4), TrainConfig.from_dict(run["train_config"]), [], tmp_path / "ft", resume=True
    )
    assert resumed.iteration == 3
    for k, v in t.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k


@pytest.mark.parametrize(
    "change, message",
    [
        ({"name": "pick_place"}, r"trained with preset 'tiny', this run uses 'pick_place': pass --preset tiny"),
        (
            {"view_names": ("front", "wrist")},
            r"trained on cameras \['scene', 'wrist'\], this run's data has "
            r"\['front', 'wrist'\]",
        ),
        ({"view_names": ("scene",)}, r"cameras \['scene', 'wrist'\]"),
        ({"feat_dim": 8}, r"another architecture than this run \(feat_dim: checkpoint 16 vs run 8\)"),
        ({"model_kind": "coord_regression"}, r"holds a 'para_v4' model, this run trains 'coord_regression'"),
    ],
)
def test_init_from_refuses_another_model_naming_the_mismatch(tmp_path, episodes, source, change, message):
    path, cfg = source
    with pytest.raises(ValueError, match=message):
        Trainer(cfg.replace(**change), quick(init_from=str(path)), episodes, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written


def test_init_from_refuses_a_missing_or_damaged_checkpoint(tmp_path, episodes, source):
    path, cfg = source
    with pytest.raises(CheckpointError, match="is not a directory"):
        Trainer(cfg, quick(init_from=str(tmp_path / "nope")), episodes, tmp_path / "run")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((path / "config.json").read_text())
    (broken / "model.safetensors").write_bytes((path / "model.safetensors").read_bytes()[:100])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        Trainer(cfg, quick(init_from=str(broken)), episodes, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_cli_init_from(tmp_path, episodes, source, capsys):
    path, _ = source
    base = [
        "--data",
        str(episodes[0].parent),
        "--out",
        str(tmp_path / "run"),
        "--max-iters",
        "1",
        "--batch-size",
        "2",
        "--val-fraction",
        "0",
        "--num-workers",
        "0",
        "--no-progress",
        "--no-tensorboard",
        "--device",
        "cpu",
    ]
    assert cli_main(base + ["--preset", "pick_place", "--init-from", str(path)]) == 2
    assert "trained with preset 'tiny', this run uses 'pick_place'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    assert cli_main(base + ["--preset", "tiny", "--init-from", str(path)]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["train_config"]["init_from"] == str(path)
    with pytest.raises(SystemExit):  # a resumed run keeps its start
        cli_main(["--out", str(tmp_path / "run"), "--resume", "--init-from", str(path)])
    assert "--resume cannot change ['init_from']" in capsys.readouterr().err
