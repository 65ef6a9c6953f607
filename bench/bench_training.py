#!/usr/bin/env python3
"""Benchmark training steps of the v4 model: a phase profile, FLOPs against a plain matmul, and thread / wait-policy /
precision comparisons, all in one run.

What it prints (machine, load and settings first):

1. **Phase profile** of the step as ``Trainer.train_step`` runs it, median over ``--steps`` steps: data loading
   (next batch + ``make_batch``; in-process here, a DataLoader worker's job in training), forward, loss
   (``para_core.model.v4.compute_losses``, timed inside the forward and subtracted from it), backward and optimiser
   (unscale, clipping, AdamW). Beside it the median of the same number of ``Trainer.train_step`` calls.
2. **FLOPs per step** (``torch.utils.flop_counter.FlopCounterMode``: matrix products, convolutions and attention;
   element-wise work and ``grid_sample`` are not counted) and the achieved GFLOP/s, against a plain fp32 matmul
   measured in this run with the same threads (a square one and one shaped like the voxel MLP's first layer): the
   fraction of the matmul rate, and the FLOP-bound step time (FLOPs / matmul rate).
3. **Comparisons** (``--compare``, the default), each a fresh subprocess so that ``OMP_WAIT_POLICY`` reaches OpenMP
   before torch loads: the wait policy unset (OpenMP's default, what the trainer ran with before it chose one),
   passive and active at the automatic thread count, one thread passive, and bf16 autocast (on a CPU only where it
   has bf16 instructions; otherwise said and skipped), and the v4 fusion as it was (``grid_sample`` of every view,
   ``--fusion reference``). Median ``Trainer.train_step`` time each, on the same synthetic data, and the speed-up
   against the unset policy.

    python bench/bench_training.py                                   # the shipped pick_place preset, CPU, batch 8
    python bench/bench_training.py --preset tiny --batch-size 2 --no-compare
    python bench/bench_training.py --preset paper --device cuda --batch-size 4 --amp bf16 --no-compare
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from para_core.model.config import PRESET_NAMES
from para_core.model.hardware import WAIT_POLICIES, configure_cpu_threads, cpu_flags, cpu_has_fast_bf16


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--preset", choices=PRESET_NAMES, default="pick_place", help="model preset (default pick_place)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    p.add_argument("--batch-size", type=int, default=8, help="samples per step (default 8, the preset's)")
    p.add_argument("--amp", choices=("auto", "fp32", "bf16", "fp16"), default="fp32", help="autocast dtype")
    p.add_argument("--steps", type=int, default=4, help="timed steps of the profile (default 4)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    p.add_argument("--threads", default="auto", help="torch CPU threads: auto | N (default auto)")
    p.add_argument("--omp-wait-policy", choices=WAIT_POLICIES, default=None, help="default: passive")
    p.add_argument(
        "--compare",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the wait-policy / thread / precision comparisons as subprocesses (default on)",
    )
    p.add_argument("--compare-steps", type=int, default=3, help="timed steps of each comparison (default 3)")
    p.add_argument(
        "--compare-timeout-s",
        type=float,
        default=45.0,
        help="wall-clock limit of each comparison process (default 45 s: spinning threads on loaded cores can be "
        "tens of times slower; a comparison over the limit is reported as such)",
    )
    p.add_argument(
        "--allocator",
        choices=("keep", "default"),
        default="keep",
        help="CPU: keep = glibc keeps freed memory (the trainer's default), default = glibc as is",
    )
    p.add_argument(
        "--fusion",
        choices=("own-view", "reference"),
        default="own-view",
        help="v4 fusion: own-view = each voxel's own view read without grid_sample (the model's default), "
        "reference = grid_sample of every view (ParaV4Model.own_view_without_sampling = False)",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one comparison: a JSON line
    return p


def make_trainer(args, tmp: Path):
    """A Trainer on two synthetic episodes (the dataset's real preprocessing and target encoding)."""
    import numpy as np

    from para_core.data.synthetic import synthetic_episode
    from para_core.model.config import V4Config
    from para_core.train.trainer import TrainConfig, Trainer

    cfg = V4Config.preset(args.preset, batch_size=args.batch_size)
    rng = np.random.default_rng(0)
    episodes = [synthetic_episode(cfg, rng, n_frames=24).save(tmp / f"ep{i}") for i in range(2)]
    tc = TrainConfig(
        device=args.device,
        amp_dtype=args.amp,
        val_fraction=0.0,
        num_workers=0,
        keep_freed_memory=args.allocator == "keep",
        seed=0,
    )
    trainer = Trainer(cfg, tc, episodes, tmp / "run")
    if hasattr(trainer.model, "own_view_without_sampling"):
        trainer.model.own_view_without_sampling = args.fusion == "own-view"
    return trainer


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step_ms(trainer, loader, steps: int, warmup: int) -> list[float]:
    """``Trainer.train_step`` times (ms) over ``steps`` after ``warmup``; data loading not timed."""
    for _ in range(warmup):
        trainer.train_step(next(loader))
    times = []
    for _ in range(steps):
        batch = next(loader)
        sync(trainer.device)
        t0 = time.perf_counter()
        trainer.train_step(batch)
        sync(trainer.device)
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def phase_profile(trainer, loader, steps: int) -> dict[str, list[float]]:
    """The step of ``Trainer.train_step`` (one micro-batch) cut into phases, each timed (ms per step)."""
    import torch

    from para_core.data.dataset import make_batch
    from para_core.model import v4

    device, cfg = trainer.device, trainer.config
    loss_s = [0.0]
    original = v4.compute_losses

    def timed_losses(*a, **k):
        sync(device)
        t = time.perf_counter()
        out = original(*a, **k)
        sync(device)
        loss_s[0] += time.perf_counter() - t
        return out

    phases: dict[str, list[float]] = {k: [] for k in ("data", "forward", "loss", "backward", "optimiser")}
    v4.compute_losses = timed_losses
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            inputs, targets = make_batch(next(loader), cfg, device)
            sync(device)
            t1 = time.perf_counter()
            trainer.train_model.train()
            trainer._set_lr()
            trainer.optimizer.zero_grad(set_to_none=True)
            loss_s[0] = 0.0
            with trainer._autocast():
                out = trainer.train_model(inputs, targets)
            loss = out.losses["loss"]
            sync(device)
            t2 = time.perf_counter()
            trainer.scaler.scale(loss).backward()
            sync(device)
            t3 = time.perf_counter()
            trainer.scaler.unscale_(trainer.optimizer)
            params = [p for g in trainer.optimizer.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, trainer.tc.grad_clip_norm or float("inf"))
            trainer.scaler.step(trainer.optimizer)
            trainer.scaler.update()
            sync(device)
            t4 = time.perf_counter()
            phases["data"].append(1e3 * (t1 - t0))
            phases["forward"].append(1e3 * (t2 - t1 - loss_s[0]))
            phases["loss"].append(1e3 * loss_s[0])
            phases["backward"].append(1e3 * (t3 - t2))
            phases["optimiser"].append(1e3 * (t4 - t3))
    finally:
        v4.compute_losses = original
    return phases


def step_flops(trainer, loader) -> tuple[int, int]:
    """(forward FLOPs incl. loss, backward FLOPs) of one training step (FlopCounterMode; no optimiser step)."""
    from torch.utils.flop_counter import FlopCounterMode

    from para_core.data.dataset import make_batch

    inputs, targets = make_batch(next(loader), trainer.config, trainer.device)
    trainer.train_model.train()
    trainer.optimizer.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False) as fwd:
        with trainer._autocast():
            out = trainer.train_model(inputs, targets)
    with FlopCounterMode(display=False) as bwd:
        out.losses["loss"].backward()
    trainer.optimizer.zero_grad(set_to_none=True)
    return fwd.get_total_flops(), bwd.get_total_flops()


def matmul_gflops(m: int, k: int, n: int, device, dtype_name: str = "fp32", repeats: int = 7) -> float:
    """Median GFLOP/s of a plain (m, k) @ (k, n) matmul (2 m k n FLOPs) on ``device`` in ``dtype_name``."""
    import torch

    from para_core.model.config import torch_dtype

    dtype = torch_dtype(dtype_name)
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    a @ b  # warm-up
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - t0)
    return 2.0 * m * k * n / statistics.median(times) / 1e9


def comparisons(args, cores: int) -> list[tuple[str, dict, list[str]]]:
    """(label, environment changes, extra arguments) of each comparison subprocess."""
    auto = str(cores)
    runs = [
        ("wait policy unset (OpenMP default; before)", {"OMP_WAIT_POLICY": None}, ["--threads", auto]),
        ("passive (the default now)", {"OMP_WAIT_POLICY": "PASSIVE"}, ["--threads", auto]),
        ("active", {"OMP_WAIT_POLICY": "ACTIVE"}, ["--threads", auto]),
    ]
    if cores > 1:
        runs.append(("1 thread, passive", {"OMP_WAIT_POLICY": "PASSIVE"}, ["--threads", "1"]))
    if args.fusion == "own-view":
        runs.append(
            (
                "passive, fusion sampling every view (before)",
                {"OMP_WAIT_POLICY": "PASSIVE"},
                ["--threads", auto, "--fusion", "reference"],
            )
        )
    if args.device == "cpu" and args.amp == "fp32" and cpu_has_fast_bf16():
        runs.append(("bf16 autocast, passive", {"OMP_WAIT_POLICY": "PASSIVE"}, ["--threads", auto, "--amp", "bf16"]))
    return runs


def run_comparison(args, env_changes: dict, extra: list[str]) -> dict:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    base = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--preset",
        args.preset,
        "--device",
        args.device,
        "--batch-size",
        str(args.batch_size),
        "--amp",
        args.amp,
        "--steps",
        str(args.compare_steps),
        "--warmup",
        str(args.warmup),
        "--allocator",
        args.allocator,
        "--fusion",
        args.fusion,
    ]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(base + extra, env=env, capture_output=True, text=True, timeout=args.compare_timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"not done within {args.compare_timeout_s:.0f} s (--compare-timeout-s)"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t0
    return result


def worker(args) -> int:
    """One comparison in this fresh process: OMP_WAIT_POLICY comes from the environment (set by the parent)."""
    choice = configure_cpu_threads(args.threads, os.environ.get("OMP_WAIT_POLICY", "").lower() or None)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(args, Path(tmp))
        times = train_step_ms(trainer, iter(trainer._loader()), args.steps, args.warmup)
    unset = "OMP_WAIT_POLICY" not in os.environ
    print(
        json.dumps(
            {
                "median_ms": statistics.median(times),
                "min_ms": min(times),
                "threads": choice.threads,
                "wait_policy": "unset" if unset else choice.wait_policy,
                "amp": trainer.amp_dtype,
            }
        )
    )
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1 or args.compare_steps < 1:
        build_parser().error("--steps, --compare-steps and --batch-size must be >= 1, --warmup >= 0")
    if args.worker:
        # the parent decides OMP_WAIT_POLICY (unset included): keep what it gave
        return worker(args)
    choice = configure_cpu_threads(args.threads, args.omp_wait_policy)  # before torch loads
    load_before = os.getloadavg()
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(args, Path(tmp))
        loader = iter(trainer._loader())
        device = trainer.device
        train_step_ms(trainer, loader, 0, args.warmup)
        phases = phase_profile(trainer, loader, args.steps)
        trainer_ms = train_step_ms(trainer, loader, args.steps, 0)
        fwd_flops, bwd_flops = step_flops(trainer, loader)
        cfg = trainer.config
        n_params = sum(p.numel() for p in trainer.model.parameters())
        mlp_rows = args.batch_size * (cfg.voxel_chunk_size or cfg.n_voxels)
        mm_dtype = trainer.amp_dtype  # the precision the step's matrix products run in
        mm_n = 4096 if device.type == "cuda" else 1024
        mm_square = matmul_gflops(mm_n, mm_n, mm_n, device, mm_dtype)
        mm_voxel = matmul_gflops(min(mlp_rows, 1 << 18), trainer_voxel_in(cfg), cfg.voxel_mlp_hidden, device, mm_dtype)
        if device.type == "cuda":
            peak_mem = f"peak_mem={torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB (max_memory_allocated)"
        else:
            peak_mem = f"peak_rss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (whole process)"
        precision = trainer.precision
        allocator = trainer.allocator
        del trainer, loader
    compared = []
    if args.compare:
        for label, env_changes, extra in comparisons(args, choice.threads):
            compared.append((label, run_comparison(args, env_changes, extra)))
    load_after = os.getloadavg()

    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    flags = cpu_flags()
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16") if f in flags]
    print(f"training step  preset={args.preset} batch={args.batch_size} amp={args.amp} device={device}")
    print(
        f"  machine: {cpu}, {os.cpu_count()} logical cores ({len(os.sched_getaffinity(0))} usable), "
        f"ISA {' '.join(isa) or '?'}; torch {torch.__version__}, python {platform.python_version()}"
    )
    print(
        f"  load average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}"
        + ("  (the cores were shared with other work)" if max(load_before[0], load_after[0]) > 0.5 else "")
    )
    print(f"  this process: {choice.describe()}; {precision}; allocator {allocator}; fusion {args.fusion}")
    print(
        f"  model: V={cfg.n_voxels:,} voxels, T={cfg.n_window}, params {n_params / 1e6:.2f} M, "
        f"voxel_chunk {cfg.voxel_chunk_size or 'all'}; {peak_mem}"
    )
    med = {k: statistics.median(v) for k, v in phases.items()}
    total = sum(med.values())
    print(f"  phase profile, median of {args.steps} steps (+{args.warmup} warm-up):")
    for name, ms in med.items():
        print(f"    {name:<10} {ms:9.1f} ms  {100 * ms / total:5.1f} %")
    print(f"    {'sum':<10} {total:9.1f} ms")
    step_ms = statistics.median(trainer_ms)
    print(
        f"  Trainer.train_step (no data loading): median {step_ms:.1f} ms, min {min(trainer_ms):.1f}, "
        f"max {max(trainer_ms):.1f} over {args.steps} steps"
    )
    flops = fwd_flops + bwd_flops
    achieved = flops / (step_ms / 1e3) / 1e9
    best_mm = max(mm_square, mm_voxel)
    print(
        f"  FLOPs per step (FlopCounterMode): {flops / 1e9:.2f} GFLOP (forward + loss {fwd_flops / 1e9:.2f}, "
        f"backward {bwd_flops / 1e9:.2f})"
    )
    print(
        f"  plain {mm_dtype} matmul here, {choice.threads} thread(s): {mm_n}^3 {mm_square:.1f} GFLOP/s; voxel-MLP shape "
        f"({min(mlp_rows, 1 << 18)} x {cfg.voxel_mlp_hidden + 0} from {trainer_voxel_in(cfg)}) {mm_voxel:.1f} GFLOP/s"
    )
    print(
        f"  achieved {achieved:.1f} GFLOP/s = {100 * achieved / best_mm:.0f} % of the better matmul rate; "
        f"FLOP-bound step {1e3 * flops / (best_mm * 1e9):.1f} ms, measured {step_ms / (1e3 * flops / (best_mm * 1e9)):.2f}x"
        " of it"
    )
    if compared:
        base = next((r for label, r in compared if "unset" in label and "median_ms" in r), None)
        print(f"  comparisons (fresh processes, Trainer.train_step median of {args.compare_steps} steps):")
        for label, r in compared:
            if "median_ms" not in r:
                print(f"    {label:<44} failed: {r['error']}")
                continue
            speed = f"  {base['median_ms'] / r['median_ms']:.2f}x vs unset" if base else ""
            print(
                f"    {label:<44} {r['median_ms']:9.1f} ms (min {r['min_ms']:.1f}; threads {r['threads']}, "
                f"{r['amp']}; process {r['wall_s']:.0f} s){speed}"
            )
        if args.device == "cpu" and args.amp == "fp32" and not cpu_has_fast_bf16():
            print("    bf16 autocast not compared: this CPU has no bf16 instructions (AVX512_BF16 / AMX-BF16)")
    return 0


def trainer_voxel_in(cfg) -> int:
    """The voxel MLP's input width: N (F + 1) + height encoding."""
    return cfg.n_views * (cfg.feat_dim + 1) + cfg.height_enc_dim


if __name__ == "__main__":
    raise SystemExit(main())
