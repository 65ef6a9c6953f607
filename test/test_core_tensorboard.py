"""TensorBoard event files of para-train, read back with tensorboard's own event reader: the scalars of
metrics.jsonl (losses by part, learning rates, validation errors per horizon step) and the validation overlays."""

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.train.trainer import TrainConfig, lr_factor, read_metrics, train

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("tb_episodes")
    cfg = V4Config.tiny()
    rng = np.random.default_rng(1)
    return [syn.synthetic_episode(cfg, rng, n_frames=20).save(root / f"ep{i}") for i in range(3)]


def _run(tmp_path, episodes, **kw):
    torch.set_num_threads(1)
    cfg = V4Config.tiny(max_iters=6, batch_size=2)
    tc = TrainConfig(
        device="cpu",
        num_workers=0,
        log_interval=2,
        eval_interval=3,
        ckpt_interval=0,
        val_episodes=(str(episodes[-1]),),
        val_max_samples=4,
        progress=False,
        **kw,
    )
    train(cfg, tc, episodes[:-1], tmp_path / "run")
    return cfg, tmp_path / "run"


def test_event_files_hold_the_metrics_scalars_and_overlays(tmp_path, episodes):
    cfg, run = _run(tmp_path, episodes)
    acc = event_accumulator.EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in (
        "train/loss",
        "train/voxel_ce",
        "train/gripper_ce",
        "train/rotation_ce",
        "train/lr",
        "train/grad_norm",
        "lr/head",
        "lr/backbone",
        "val/pos_err_m",
        "val/voxel_ce",
        *[f"val/pos_err_step{t}_m" for t in range(cfg.n_window)],
    ):
        assert tag in tags["scalars"], (tag, sorted(tags["scalars"]))
    rows = read_metrics(run / "metrics.jsonl")
    train_rows = [r for r in rows if r["split"] == "train"]
    events = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert sorted(events) == [r["iter"] for r in train_rows]
    for r in train_rows:  # the same numbers as metrics.jsonl (float32 in the event file)
        assert events[r["iter"]] == pytest.approx(r["loss"], rel=1e-6)
    val = [r for r in rows if r["split"] == "val"]
    steps = [acc.Scalars(f"val/pos_err_step{t}_m")[-1].value for t in range(cfg.n_window)]
    assert np.mean(steps) == pytest.approx(val[-1]["pos_err_m"], rel=1e-5)  # per-step errors average to the total
    head_lr = {e.step: e.value for e in acc.Scalars("lr/head")}
    backbone_lr = {e.step: e.value for e in acc.Scalars("lr/backbone")}
    for it in head_lr:  # the rate of the last step before the log line: lr * factor(it - 1), by the schedule
        assert head_lr[it] == pytest.approx(cfg.lr * lr_factor(it - 1, cfg), rel=1e-6)
        assert backbone_lr[it] == pytest.approx(head_lr[it] * cfg.backbone_lr_mult, rel=1e-6)
    assert "val/overlay_0" in tags["images"]
    img = acc.Images("val/overlay_0")[-1]
    assert (img.width, img.height) == (2 * cfg.img_size, 2 * cfg.img_size)


def test_no_tensorboard_writes_no_event_files(tmp_path, episodes):
    _, run = _run(tmp_path, episodes, tensorboard=False)
    assert not (run / "tensorboard").exists()
    assert read_metrics(run / "metrics.jsonl")  # metrics.jsonl is still written
