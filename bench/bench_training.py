#!/usr/bin/env python3
"""Benchmark one training step (forward + backward + AdamW) of the v4 model: time and peak memory.

Runs ``para_core.train.trainer.Trainer.train_step`` on synthetic episodes (``para_core.data.synthetic.synthetic_episode``, the
dataset's real preprocessing and target encoding) and prints median / min / max step time over repeated steps with the
machine and settings, plus peak memory: CUDA ``max_memory_allocated`` on a GPU, the process's peak RSS on CPU.
The PARA v4 design trains the paper config at batch 4 on a 24 GB RTX 3090: check with ``--preset paper --device cuda``.

    python bench/bench_training.py                                   # tiny, CPU, batch 2
    python bench/bench_training.py --preset paper --device cuda --batch-size 4 --amp bf16
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

from para_core.model.config import PRESET_NAMES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--preset", choices=PRESET_NAMES, default="tiny", help="model preset (default tiny)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    parser.add_argument("--batch-size", type=int, default=2, help="samples per step (default 2)")
    parser.add_argument("--amp", choices=["fp32", "bf16", "fp16"], default="fp32", help="autocast dtype")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    parser.add_argument(
        "--allocator",
        choices=("keep", "default"),
        default="keep",
        help="CPU: keep = glibc keeps freed memory (the trainer's default), default = glibc as is",
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be >= 1, --warmup >= 0")

    import numpy as np
    import torch

    from para_core.data.synthetic import synthetic_episode
    from para_core.model.config import V4Config
    from para_core.train.trainer import TrainConfig, Trainer

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = V4Config.preset(args.preset, batch_size=args.batch_size)
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        episodes = [synthetic_episode(cfg, rng, n_frames=24).save(Path(tmp) / f"ep{i}") for i in range(2)]
        tc = TrainConfig(
            device=args.device,
            amp_dtype=args.amp,
            val_fraction=0.0,
            num_workers=0,
            keep_freed_memory=args.allocator == "keep",
        )
        trainer = Trainer(cfg, tc, episodes, Path(tmp) / "run")
        loader = iter(trainer._loader())
        device = trainer.device
        for _ in range(args.warmup):
            trainer.train_step(next(loader))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        times_ms = []
        for _ in range(args.steps):
            batch = next(loader)
            t0 = time.perf_counter()
            trainer.train_step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times_ms.append(1e3 * (time.perf_counter() - t0))
        n_params = sum(p.numel() for p in trainer.model.parameters())
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    print(
        f"training step  preset={args.preset} batch={args.batch_size} amp={args.amp} device={device} "
        f"allocator={trainer.allocator}"
    )
    print(
        f"  median {statistics.median(times_ms):.1f} ms  min {min(times_ms):.1f} ms  max {max(times_ms):.1f} ms  "
        f"over {args.steps} steps (+{args.warmup} warm-up); data loading not timed"
    )
    if device.type == "cuda":
        print(
            f"  gpu={torch.cuda.get_device_name(device)}  peak_mem={torch.cuda.max_memory_allocated(device) / 2**30:.2f}"
            f" GiB (max_memory_allocated)"
        )
    else:
        peak_rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
        print(f"  peak_rss={peak_rss_gib:.2f} GiB (whole process)")
    print(f"  cpu={cpu} ({os.cpu_count()} logical cores) torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"  V={cfg.n_voxels:,} T={cfg.n_window} params={n_params / 1e6:.1f} M voxel_chunk={cfg.voxel_chunk_size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
