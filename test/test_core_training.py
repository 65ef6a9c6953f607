"""The trainer: validated config, schedule by hand, exact data-order replay, optimizer state through safetensors,
learning on synthetic episodes, deployable checkpoints, resume at the right iteration, and the para-train CLI."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from training_helpers import (
    one_torch_thread,  # noqa: F401  (autouse)
    quick,
)

from para_core.data import synthetic as syn
from para_core.data.dataset import Episode, EpisodeDataset, make_batch
from para_core.model.checkpoint import load_checkpoint
from para_core.model.config import V4Config
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.train.cli import main as cli_main
from para_core.train.trainer import (
    ResumableBatchSampler,
    TrainConfig,
    Trainer,
    load_optimizer,
    lr_factor,
    read_metrics,
    save_optimizer,
    train,
)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("episodes")
    cfg = V4Config.tiny()
    rng = np.random.default_rng(0)
    return [syn.synthetic_episode(cfg, rng, n_frames=24).save(root / f"ep{i}") for i in range(4)]


# ------------------------------------------------------------------------------------------------ config, parts
@pytest.mark.parametrize(
    "field, value",
    [
        ("amp_dtype", "fp8"),
        ("grad_clip_norm", -1.0),
        ("val_fraction", 1.0),
        ("num_workers", -1),
        ("log_interval", 0),
        ("adam_betas", (0.9, 1.0)),
        ("device", "tpu:0"),
        ("augment", "yes"),
        ("min_lr_ratio", 2.0),
        ("seed", 1.5),
    ],
)
def test_train_config_rejects_bad_values_by_name(field, value):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} = "):
        TrainConfig(**{field: value})


def test_train_config_has_no_duplicate_model_fields():
    from dataclasses import fields

    shared = {f.name for f in fields(TrainConfig)} & {f.name for f in fields(V4Config)}
    assert shared == set(), shared


def test_lr_schedule_by_hand():
    cfg = V4Config.tiny(lr_warmup=10, max_iters=110)
    assert lr_factor(0, cfg) == pytest.approx(0.1)
    assert lr_factor(4, cfg) == pytest.approx(0.5)
    assert lr_factor(9, cfg) == pytest.approx(1.0)
    assert lr_factor(60, cfg) == pytest.approx(0.5)  # halfway through the cosine: 0.5 * (1 + cos(pi / 2))
    assert lr_factor(35, cfg) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))
    assert lr_factor(110, cfg) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(110, cfg, min_lr_ratio=0.1) == pytest.approx(0.1)
    const = cfg.replace(lr_schedule="constant")
    assert [lr_factor(i, const) for i in (0, 9, 100)] == pytest.approx([0.1, 1.0, 1.0])


def test_resumable_sampler_replays_the_same_batches():
    full = ResumableBatchSampler(10, 3, seed=7)
    it = iter(full)
    batches = [next(it) for _ in range(12)]  # 36 samples: 3.6 epochs
    for e in range(3):  # every epoch is a permutation of all samples
        assert sorted(sum(batches, [])[10 * e : 10 * (e + 1)]) == list(range(10))
    resumed = iter(ResumableBatchSampler(10, 3, seed=7, start_iter=5))
    assert [next(resumed) for _ in range(7)] == batches[5:]
    other = iter(ResumableBatchSampler(10, 3, seed=8))
    assert [next(other) for _ in range(3)] != batches[:3]


def test_sampler_continues_the_stream_after_a_sample_count():
    """Resuming with another batch size: 4 batches of 3 consumed 12 samples; batches of 2 must continue at sample 12
    of the stream (hand-built from the documented permutations), not at 4 * 2 = 8."""
    stream = np.concatenate([np.random.default_rng([7, e]).permutation(10) for e in range(3)])  # 30 samples
    it = iter(ResumableBatchSampler(10, 3, seed=7))
    assert sum((next(it) for _ in range(4)), []) == stream[:12].tolist()
    resumed = iter(ResumableBatchSampler(10, 2, seed=7, start_sample=12))
    assert [next(resumed) for _ in range(5)] == stream[12:22].reshape(5, 2).tolist()
    with pytest.raises(ValueError, match="start_sample"):
        ResumableBatchSampler(10, 2, seed=7, start_sample=-1)


def test_optimizer_state_round_trips_through_safetensors(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    groups = [
        {"params": model[0].parameters(), "lr": 1e-3, "name": "a"},
        {"params": model[1].parameters(), "lr": 1e-4, "name": "b"},
    ]
    opt = torch.optim.AdamW(groups, betas=(0.8, 0.95), weight_decay=0.01)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).square().sum().backward()
        opt.step()
    save_optimizer(opt, tmp_path, {"iteration": 3})
    assert not list(tmp_path.glob("*.pt")) and not list(tmp_path.glob("*.pkl"))
    opt2 = torch.optim.AdamW(
        [
            {"params": model[0].parameters(), "lr": 5.0, "name": "a"},
            {"params": model[1].parameters(), "lr": 5.0, "name": "b"},
        ]
    )
    extra = load_optimizer(opt2, tmp_path)
    assert extra["iteration"] == 3
    a, b = opt.state_dict(), opt2.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for pid in a["state"]:
        for key, value in a["state"][pid].items():
            assert torch.equal(value, b["state"][pid][key]), (pid, key)


# ------------------------------------------------------------------------------------------------- training runs
def test_tiny_model_learns_on_synthetic_episodes_and_deploys(tmp_path, episodes):
    cfg = V4Config.tiny(max_iters=100, lr=3e-3, batch_size=4)
    tc = quick(log_interval=10, eval_interval=100, val_episodes=(str(episodes[-1]),))
    result = train(cfg, tc, episodes, tmp_path / "run")
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["split"] == "train"]
    assert [r["iter"] for r in rows] == list(range(10, 101, 10))
    first, last = rows[0], np.mean([r["loss"] for r in rows[-3:]])
    uniform = math.log(cfg.n_voxels)  # uniform voxel CE over all voxels (valid ones are fewer: an upper bound)
    assert first["voxel_ce"] > 0.85 * uniform - 1.0, first
    assert last < 0.6 * first["loss"], (first["loss"], last)
    assert np.mean([r["voxel_ce"] for r in rows[-3:]]) < first["voxel_ce"] - 2.0
    assert result.final_val and {"voxel_ce", "pos_err_m", "pos_err_last_m"} <= set(result.final_val)
    assert (tmp_path / "run" / "loss_curve.png").stat().st_size > 1000
    # the deployed Policy predicts the training frames better than the untrained one
    policy = Policy.from_checkpoint(result.checkpoint_dir, device="cpu")
    untrained = Policy.random_init(cfg, device="cpu", seed=0)
    ds = EpisodeDataset(episodes[:3], cfg)
    errs = {"trained": [], "untrained": []}
    for i in range(0, len(ds), 5):
        e, t = (int(x) for x in ds.index[i])
        s = ds[i]
        ep = Episode.load(episodes[e])
        cams = [CameraObservation(ep.images[v][t], ep.K[v][t], ep.T_world_cam[v][t]) for v in cfg.view_names]
        state = RobotState(ep.T_world_ee[t], float(ep.gripper[t]), s["past_positions_world"].double().numpy())
        for name, pol in (("trained", policy), ("untrained", untrained)):
            out = pol.predict(cams, state)
            errs[name].append(np.linalg.norm(out.positions_world - s["target_positions_world"].numpy(), axis=-1))
    trained, untrained_err = np.mean(errs["trained"]), np.mean(errs["untrained"])
    assert trained < 0.5 * untrained_err, (trained, untrained_err)


def test_short_run_writes_a_checkpoint_the_policy_loads(tmp_path, episodes):
    cfg = V4Config.tiny(max_iters=3, batch_size=2)
    result = train(cfg, quick(), episodes[:2], tmp_path / "run")
    assert result.iterations == 3
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint",
        "checkpoints",
        "loss_curve.png",
        "metrics.jsonl",
        "run.json",
        "tensorboard",
        "train_state",
    ]
    assert sorted(p.name for p in (run / "train_state").iterdir()) == [
        "optimizer.safetensors",
        "rng.safetensors",
        "state.json",
    ]
    model, loaded_cfg, meta = load_checkpoint(result.checkpoint_dir)
    assert loaded_cfg == cfg and meta["extra"]["iteration"] == 3
    policy = Policy.from_checkpoint(result.checkpoint_dir, device="cpu")
    assert policy.model_id.endswith(":iter3")
    # the deployed policy computes exactly what the trained model computes on the dataset's batch
    ds = EpisodeDataset(episodes[:1], cfg)
    inputs, _ = make_batch(torch.utils.data.default_collate([ds[5]]), cfg, "cpu")
    ep = Episode.load(episodes[0])
    cams = [CameraObservation(ep.images[v][5], ep.K[v][5], ep.T_world_cam[v][5]) for v in cfg.view_names]
    state = RobotState(ep.T_world_ee[5], float(ep.gripper[5]), inputs.past_positions_world[0].double().numpy())
    policy.predict(cams, state)
    with torch.no_grad():
        ref = model.eval()(inputs)
    assert torch.allclose(policy.last_output.volume_logits, ref.volume_logits, atol=1e-5)


def test_resume_continues_at_the_right_iteration_with_the_same_state(tmp_path, episodes):
    """A run stopped at iteration 4 and resumed to 7 ends with bit-identical weights to an uninterrupted run to 7 (CPU,
    constant schedule after warm-up, num_workers 0, no augmentation: the data order is replayed exactly)."""
    cfg = V4Config.tiny(max_iters=4, batch_size=2, lr_schedule="constant", lr_warmup=2, lr=1e-3)
    tc = quick(ckpt_interval=2)
    first = Trainer(cfg, tc, episodes[:2], tmp_path / "a")
    first.run()
    saved_opt = first.optimizer.state_dict()
    saved_params = {k: v.clone() for k, v in first.model.state_dict().items()}

    with pytest.raises(FileExistsError, match="--resume"):
        Trainer(cfg, tc, episodes[:2], tmp_path / "a")
    with pytest.raises(ValueError, match=r"differs from the saved run in \['feat_dim'\]"):
        Trainer(cfg.replace(feat_dim=8), tc, episodes[:2], tmp_path / "a", resume=True)

    resumed = Trainer(cfg.replace(max_iters=7), tc, [], tmp_path / "a", resume=True)
    assert resumed.iteration == 4
    assert resumed.train_dirs == first.train_dirs
    state = resumed.optimizer.state_dict()
    for pid, st in saved_opt["state"].items():
        for key, value in st.items():
            assert torch.equal(value, state["state"][pid][key]), (pid, key)
    for k, v in resumed.model.state_dict().items():
        assert torch.equal(v, saved_params[k]), k
    resumed.run()
    assert resumed.iteration == 7

    straight = Trainer(cfg.replace(max_iters=7), tc, episodes[:2], tmp_path / "b")
    straight.run()
    for k, v in straight.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k  # bit-exact continuation
    iters = [r["iter"] for r in read_metrics(tmp_path / "a" / "metrics.jsonl") if r["split"] == "train"]
    assert iters == list(range(1, 8))
    assert json.loads((tmp_path / "a" / "train_state" / "state.json").read_text())["iteration"] == 7


def test_resume_with_another_batch_size_continues_at_the_consumed_sample(tmp_path, episodes):
    """3 iterations of batch 2 consume samples 0..5 of the stream; resumed with batch 3, the first batch must be
    samples 6, 7, 8 (the epoch-0 permutation of the documented sampler, by hand), and the count must keep adding up."""
    cfg = V4Config.tiny(max_iters=3, batch_size=2)
    Trainer(cfg, quick(seed=5), episodes[:2], tmp_path / "run").run()
    state = json.loads((tmp_path / "run" / "train_state" / "state.json").read_text())
    assert state["iteration"] == 3 and state["samples_seen"] == 6
    resumed = Trainer(cfg.replace(max_iters=5, batch_size=3), quick(seed=5), [], tmp_path / "run", resume=True)
    assert resumed.samples_seen == 6
    perm = np.random.default_rng([5, 0]).permutation(len(resumed.train_set))  # 48 samples: one epoch is enough
    batch = next(iter(resumed._loader()))
    got = list(zip(batch["episode_index"].tolist(), batch["frame_index"].tolist()))
    assert got == [tuple(resumed.train_set.index[j]) for j in perm[6:9]]
    resumed.run()
    state = json.loads((tmp_path / "run" / "train_state" / "state.json").read_text())
    assert state["iteration"] == 5 and state["samples_seen"] == 6 + 2 * 3


def test_a_crash_inside_save_never_pairs_new_weights_with_old_optimizer_state(tmp_path, episodes, monkeypatch):
    """A crash while the iteration-4 save is being written leaves the iteration-2 pair intact, and resuming from it
    ends bit-identical to an uninterrupted run, with every iteration logged once. A crash after the save was fully
    written (while moving it into place) is completed on resume. A mismatched pair (older para_core) is refused."""
    from safetensors.torch import load_file

    import para_core.train.trainer as training

    cfg = V4Config.tiny(max_iters=4, batch_size=2, lr_schedule="constant", lr_warmup=2, lr=1e-3)
    tc = quick(ckpt_interval=2, keep_checkpoints=3)
    real_save_optimizer = training.save_optimizer

    def crash_at_4(optimizer, directory, extra):
        if extra["iteration"] == 4:
            raise RuntimeError("simulated crash (power cut) while saving")
        real_save_optimizer(optimizer, directory, extra)

    monkeypatch.setattr(training, "save_optimizer", crash_at_4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        Trainer(cfg, tc, episodes[:2], tmp_path / "a").run()
    monkeypatch.setattr(training, "save_optimizer", real_save_optimizer)
    run = tmp_path / "a"
    assert [r["iter"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]  # 3, 4 were not checkpointed
    weights_2 = load_file(str(run / "checkpoints" / "iter_000002" / "model.safetensors"))
    resumed = Trainer(cfg, tc, [], run, resume=True)
    assert resumed.iteration == 2
    for k, v in resumed.model.state_dict().items():
        assert torch.equal(v, weights_2[k]), k  # the weights of iteration 2, not those of the crashed save
    assert resumed.samples_seen == 4
    assert [r["iter"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2]  # lost work is not logged twice
    resumed.run()
    straight = Trainer(cfg, tc, episodes[:2], tmp_path / "b")
    straight.run()
    for k, v in straight.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k
    assert [r["iter"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]
    assert not (run / ".saving").exists()

    # A crash between moving train_state/ and checkpoint/ into place: finished on resume.
    real_swap = training._swap_in

    def crash_on_checkpoint(staged, target):
        if target.name == "checkpoint":
            raise RuntimeError("simulated crash while moving")
        real_swap(staged, target)

    longer = Trainer(cfg.replace(max_iters=6), tc, [], run, resume=True)
    monkeypatch.setattr(training, "_swap_in", crash_on_checkpoint)
    with pytest.raises(RuntimeError, match="simulated crash while moving"):
        longer.run()
    monkeypatch.setattr(training, "_swap_in", real_swap)
    weights_6 = {k: v.clone() for k, v in longer.model.state_dict().items()}
    assert json.loads((run / "train_state" / "state.json").read_text())["iteration"] == 6
    assert load_checkpoint(run / "checkpoint")[2]["extra"]["iteration"] == 4  # the two disagree right now
    again = Trainer(cfg.replace(max_iters=6), tc, [], run, resume=True)
    assert again.iteration == 6 and again.samples_seen == 12
    assert load_checkpoint(run / "checkpoint")[2]["extra"]["iteration"] == 6 and not (run / ".saving").exists()
    for k, v in again.model.state_dict().items():
        assert torch.equal(v, weights_6[k]), k

    # A pair that disagrees (what the old non-atomic save left behind) is refused, naming the snapshot to use.
    state_file = run / "train_state" / "state.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "iteration": 4}))
    with pytest.raises(ValueError, match=r"weights of iteration 6 but .* optimizer state of iteration 4.*iter_000004"):
        Trainer(cfg.replace(max_iters=6), tc, [], run, resume=True)


def test_validation_split_and_bad_setups(tmp_path, episodes):
    cfg = V4Config.tiny(max_iters=1, batch_size=2)
    t = Trainer(cfg, quick(val_fraction=0.25), episodes, tmp_path / "split")
    assert len(t.val_dirs) == 1 and len(t.train_dirs) == 3 and not set(t.val_dirs) & set(t.train_dirs)
    metrics = t.evaluate()
    assert {"loss", "voxel_ce", "gripper_ce", "rotation_ce", "pos_err_m", "pos_err_last_m"} <= set(metrics)
    assert 0.0 <= metrics["pos_err_m"] < 1.0
    with pytest.raises(ValueError, match="fp16"):
        Trainer(cfg, quick(amp_dtype="fp16"), episodes, tmp_path / "fp16")
    with pytest.raises(ValueError, match="every episode is a validation episode"):
        Trainer(cfg, quick(val_episodes=tuple(str(p) for p in episodes[:2])), episodes[:2], tmp_path / "allval")
    with pytest.raises(FileNotFoundError, match="nothing to resume|not a para-train run"):
        Trainer(cfg, quick(), [], tmp_path / "never", resume=True)


def test_validation_reports_gripper_and_rotation_ce_at_the_argmax_voxel(tmp_path, episodes):
    """Validation's gripper/rotation CEs come from the model run with targets (the head at a GT voxel); the
    ``*_at_argmax`` pair is the same CE at the voxel inference reads (the model run without targets), by hand on the
    same frames. The coordinate-regression model has no voxels and reports neither."""
    import torch.nn.functional as Fn
    from torch.utils.data import default_collate

    cfg = V4Config.tiny(max_iters=1, batch_size=4)
    tc = quick(val_episodes=(str(episodes[-1]),), val_max_samples=4)
    t = Trainer(cfg, tc, episodes, tmp_path / "v4")
    metrics = t.evaluate()
    assert {
        "loss",
        "voxel_ce",
        "gripper_ce",
        "rotation_ce",
        "pos_err_m",
        "pos_err_last_m",
        "gripper_ce_at_argmax",
        "rotation_ce_at_argmax",
    } <= set(metrics)
    n = len(t.val_set)
    idx = np.unique(np.linspace(0, n - 1, 4).round().astype(int))  # the frames evaluate() picks: one batch of 4
    inputs, targets = make_batch(default_collate([t.val_set[int(i)] for i in idx]), cfg, "cpu")
    model = t.model.eval()
    with torch.no_grad():
        forced, free = model(inputs, targets), model(inputs)
    assert torch.equal(free.chosen_voxel, free.volume_logits.argmax(-1))
    grip = Fn.cross_entropy(free.gripper_logits.reshape(-1, cfg.n_gripper_bins), targets.gripper_bin.reshape(-1))
    rot = Fn.cross_entropy(free.rotation_logits.reshape(-1, cfg.n_rotation_bins), targets.rotation_bins.reshape(-1))
    assert metrics["gripper_ce_at_argmax"] == pytest.approx(grip.item(), rel=1e-5)
    assert metrics["rotation_ce_at_argmax"] == pytest.approx(rot.item(), rel=1e-5)
    assert metrics["gripper_ce"] == pytest.approx(forced.losses["gripper_ce"].item(), rel=1e-5)
    assert metrics["rotation_ce"] == pytest.approx(forced.losses["rotation_ce"].item(), rel=1e-5)
    # untrained, the argmax is no GT voxel: the two pairs measure the head at different voxels
    assert (forced.chosen_voxel != free.chosen_voxel).any()
    assert abs(metrics["gripper_ce_at_argmax"] - metrics["gripper_ce"]) > 1e-6
    assert abs(metrics["rotation_ce_at_argmax"] - metrics["rotation_ce"]) > 1e-6
    reg = Trainer(cfg.replace(model_kind="coord_regression"), tc, episodes, tmp_path / "regression").evaluate()
    assert {"loss", "position_l1_cm", "gripper_ce", "rotation_ce", "pos_err_m", "pos_err_last_m"} <= set(reg)
    assert not {"gripper_ce_at_argmax", "rotation_ce_at_argmax"} & set(reg)


# ----------------------------------------------------------------------------------------------------------- CLI
def test_cli_help():
    out = subprocess.run(
        [sys.executable, "-m", "para_core.train.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    for flag in ("--data", "--preset", "--config", "--out", "--max-iters", "--batch-size", "--device", "--resume"):
        assert flag in out.stdout


def test_cli_trains_resumes_and_prints_how_to_deploy(tmp_path, episodes, capsys):
    (tmp_path / "model.yaml").write_text("feat_dim: 8\ntrain:\n  num_workers: 0\n  val_fraction: 0.0\n")
    out_dir = tmp_path / "runs" / "cli"
    args = [
        "--data",
        str(episodes[0].parent),
        "--preset",
        "tiny",
        "--config",
        str(tmp_path / "model.yaml"),
        "--out",
        str(out_dir),
        "--max-iters",
        "2",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--no-progress",
    ]
    assert cli_main(args + ["--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"]["head"]["feat_dim"] == 8 and printed["model"]["training"]["max_iters"] == 2
    assert printed["train"]["num_workers"] == 0 and len(printed["episodes"]) == 4
    assert cli_main(args) == 0
    text = capsys.readouterr().out
    ckpt = out_dir / "checkpoint"
    assert f"scripts/demo --checkpoint {ckpt}" in text
    assert f"ros2 launch para_ros deploy.launch.py checkpoint:={ckpt.resolve()}" in text
    assert Policy.from_checkpoint(ckpt, device="cpu").config.feat_dim == 8
    assert cli_main(["--out", str(out_dir), "--resume", "--max-iters", "3", "--batch-size", "3", "--no-progress"]) == 0
    assert "done at iteration 3" in capsys.readouterr().out
    state = json.loads((out_dir / "train_state" / "state.json").read_text())
    assert state["samples_seen"] == 2 * 2 + 3 and state["batch_size"] == 3  # 2 iterations of 2, then one of 3
    with pytest.raises(SystemExit):
        cli_main(["--out", str(out_dir), "--resume", "--seed", "3"])
    assert "cannot change ['seed']" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("feat_dimm: 8\n")
    with pytest.raises(SystemExit):
        cli_main(["--data", str(episodes[0]), "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "x")])
    assert "unknown V4Config field(s) ['feat_dimm']" in capsys.readouterr().err


def test_bf16_autocast_and_worker_processes(tmp_path, episodes):
    cfg = V4Config.tiny(max_iters=2, batch_size=2)
    result = train(cfg, quick(amp_dtype="bf16", num_workers=1, augment=True), episodes[:2], tmp_path / "bf16")
    rows = [r for r in read_metrics(tmp_path / "bf16" / "metrics.jsonl") if r["split"] == "train"]
    assert [r["iter"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    model, loaded_cfg, _ = load_checkpoint(result.checkpoint_dir)
    assert loaded_cfg == cfg and all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master weights


def test_keep_freed_memory_is_a_validated_bool_the_cli_can_turn_off(tmp_path, episodes, capsys):
    with pytest.raises(ValueError, match="keep_freed_memory"):
        TrainConfig(keep_freed_memory="yes")
    args = [
        "--data",
        str(episodes[0].parent),
        "--preset",
        "tiny",
        "--out",
        str(tmp_path / "run"),
        "--device",
        "cpu",
        "--print-config",
    ]
    assert cli_main(args) == 0
    assert json.loads(capsys.readouterr().out)["train"]["keep_freed_memory"] is True
    assert cli_main(args + ["--no-keep-freed-memory"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["keep_freed_memory"] is False


def test_a_cpu_trainer_keeps_freed_memory_unless_told_not_to(tmp_path, episodes):
    cfg = V4Config.tiny(batch_size=2)
    kept = Trainer(cfg, quick(), episodes, tmp_path / "kept")
    assert "keeps freed memory" in kept.allocator, kept.allocator
    plain = Trainer(cfg, quick(keep_freed_memory=False), episodes, tmp_path / "plain")
    assert plain.allocator == "unchanged"
