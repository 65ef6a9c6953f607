"""Multi-process training with torchrun (gloo on CPU, loopback only): 2 processes give the same weights as one
process with the same global batch; gradient accumulation too; resume with another process count; batch checks."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.train.trainer import ResumableBatchSampler, TrainConfig, Trainer, read_metrics

TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp_episodes")
    cfg = V4Config.tiny()
    rng = np.random.default_rng(2)
    return [syn.synthetic_episode(cfg, rng, n_frames=16).save(root / f"ep{i}") for i in range(3)]


def _env():
    env = dict(os.environ)
    # gloo and the rendezvous store on the loopback interface only
    env.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1", PYTHONUNBUFFERED="1")
    return env


def _train(nproc: int, out: Path, episodes, *extra: str) -> subprocess.CompletedProcess:
    args = [
        "--data",
        *map(str, episodes),
        "--preset",
        "tiny",
        "--out",
        str(out),
        "--max-iters",
        "4",
        "--batch-size",
        "4",
        "--val-fraction",
        "0",
        "--num-workers",
        "0",
        "--no-progress",
        "--device",
        "cpu",
        "--no-tensorboard",
        *extra,
    ]
    if nproc == 1:
        cmd = [sys.executable, "-m", "para_core.train.cli", *args]
    else:
        cmd = [
            str(TORCHRUN),
            "--standalone",
            f"--nproc_per_node={nproc}",
            "--master_addr=127.0.0.1",
            "-m",
            "para_core.train.cli",
            *args,
        ]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)


def _weights(run: Path) -> dict:
    return load_file(str(run / "checkpoint" / "model.safetensors"))


def _assert_same(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst < atol, worst


@pytest.mark.slow
def test_two_processes_equal_one_with_the_same_global_batch_and_resume_with_one(tmp_path, episodes):
    single = _train(1, tmp_path / "single", episodes)
    assert single.returncode == 0, single.stdout + single.stderr
    double = _train(2, tmp_path / "ddp", episodes, "--ckpt-interval", "2")
    assert double.returncode == 0, double.stdout + double.stderr
    assert "with 2 processes (global batch 4)" in double.stdout
    _assert_same(_weights(tmp_path / "single"), _weights(tmp_path / "ddp"), atol=1e-5)
    # the same losses were logged, once (rank 0 only)
    a = [r["loss"] for r in read_metrics(tmp_path / "single" / "metrics.jsonl") if r["split"] == "train"]
    b = [r["loss"] for r in read_metrics(tmp_path / "ddp" / "metrics.jsonl") if r["split"] == "train"]
    np.testing.assert_allclose(a, b, rtol=1e-5)
    # resume the 2-process run with 1 process and compare with an uninterrupted 6-iteration single run
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "para_core.train.cli",
            "--out",
            str(tmp_path / "ddp"),
            "--resume",
            "--max-iters",
            "6",
            "--no-progress",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    longer = _train(1, tmp_path / "single6", episodes, "--max-iters", "6")
    assert longer.returncode == 0
    _assert_same(_weights(tmp_path / "single6"), _weights(tmp_path / "ddp"), atol=1e-5)


def test_gradient_accumulation_equals_the_whole_batch(tmp_path, episodes):
    torch.set_num_threads(1)
    out = {}
    for accum in (1, 2):
        cfg = V4Config.tiny(max_iters=3, batch_size=4)
        tc = TrainConfig(
            device="cpu",
            num_workers=0,
            log_interval=1,
            eval_interval=0,
            ckpt_interval=0,
            val_fraction=0.0,
            progress=False,
            tensorboard=False,
            grad_accum_steps=accum,
        )
        Trainer(cfg, tc, episodes, tmp_path / f"acc{accum}").run()
        out[accum] = _weights(tmp_path / f"acc{accum}")
    _assert_same(out[1], out[2], atol=1e-5)


def test_sampler_shares_cover_the_global_batch_in_order():
    whole = ResumableBatchSampler(10, 4, seed=3)
    ranks = [ResumableBatchSampler(10, 4, seed=3, rank=r, world_size=2, micro_batches=2) for r in range(2)]
    it_whole, it_ranks = iter(whole), [iter(s) for s in ranks]
    for _ in range(5):
        batch = next(it_whole)
        parts = [next(it_ranks[0]), next(it_ranks[0]), next(it_ranks[1]), next(it_ranks[1])]
        assert sum(parts, []) == batch  # rank 0 takes the first half as two micro-batches, rank 1 the second
    with pytest.raises(ValueError, match="multiple of 4"):
        ResumableBatchSampler(10, 6, seed=0, world_size=2, micro_batches=2)
