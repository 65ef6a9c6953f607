#!/usr/bin/env python3
"""Benchmark ``para_core.model.policy.Policy.predict`` latency (preprocessing + model + decoding) on synthetic inputs.

Prints median / min / max / p99 over repeated runs with the settings and the machine (device, dtype, config name,
torch version, CPU model, GPU name). Examples::

    python bench/bench_policy.py                       # tiny config on CPU
    python bench/bench_policy.py --config paper        # paper config on cuda if present, else CPU
    python bench/bench_policy.py --config paper --dtype bf16 --runs 20
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

from para_core.model.config import PRESET_NAMES


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--config", choices=PRESET_NAMES, default="tiny", help="V4Config preset (default tiny)")
    parser.add_argument("--checkpoint", default="", help="load this checkpoint directory instead of random weights")
    parser.add_argument("--device", default=None, help="cpu / cuda / cuda:1 (default: cuda if available else cpu; "
                                                       "tiny defaults to cpu)")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--runs", type=int, default=20, help="timed runs (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed warm-up runs (default 3)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    parser.add_argument("--image-hw", type=int, nargs=2, default=(480, 640), metavar=("H", "W"),
                        help="raw camera image size before the policy's resize (default 480 640)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")

    import numpy as np
    import torch

    from para_core.data import synthetic as syn
    from para_core.model.config import V4Config
    from para_core.model.policy import CameraObservation, Policy, RobotState

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = args.device or ("cpu" if args.config == "tiny" else None)
    if args.checkpoint:
        policy = Policy.from_checkpoint(args.checkpoint, device=device, dtype=args.dtype)
    else:
        cfg = V4Config.preset(args.config)
        policy = Policy.random_init(cfg, device=device, dtype=args.dtype)
    cfg = policy.config

    rng = np.random.default_rng(0)
    H, W = args.image_hw
    ee = np.array([0.3, 0.0, 0.2])
    cams = [CameraObservation(syn.random_image(rng, H, W), syn.intrinsics_from_fovy(W, H, 60.0),
                              syn.scene_camera_pose()),
            CameraObservation(syn.random_image(rng, H, W), syn.intrinsics_from_fovy(W, H, 80.0),
                              syn.wrist_camera_pose(ee))][: cfg.n_views]
    T_ee = np.eye(4)
    T_ee[:3, :3] = syn.top_down_rotation()
    T_ee[:3, 3] = ee
    state = RobotState(T_ee, 1.0, np.tile(ee, (cfg.mv_past_n, 1)))

    for _ in range(args.warmup):
        policy.predict(cams, state)
    if policy.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(policy.device)
    times_ms = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        policy.predict(cams, state)  # synchronises the GPU before returning
        times_ms.append(1e3 * (time.perf_counter() - t0))
    times_ms.sort()
    p99 = times_ms[min(len(times_ms) - 1, int(round(0.99 * (len(times_ms) - 1))))]

    n_params = sum(p.numel() for p in policy.model.parameters())
    print(f"policy latency  config={cfg.name} model_id={policy.model_id}")
    print(f"  median {statistics.median(times_ms):.2f} ms  min {times_ms[0]:.2f} ms  max {times_ms[-1]:.2f} ms  "
          f"p99 {p99:.2f} ms  over {args.runs} runs (+{args.warmup} warm-up)")
    print(f"  device={policy.device} dtype={args.dtype} torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"  cpu={cpu_model()} ({platform.machine()}, {__import__('os').cpu_count()} logical cores)")
    if policy.device.type == "cuda":
        print(f"  gpu={torch.cuda.get_device_name(policy.device)}  "
              f"peak_mem={torch.cuda.max_memory_allocated(policy.device) / 2**30:.2f} GiB")
    else:
        import resource

        print(f"  peak_rss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (whole process)")
    print(f"  img_size={cfg.img_size} pred_size={cfg.pred_size} bins={cfg.n_height_bins} views={cfg.n_views} "
          f"V={cfg.n_voxels:,} T={cfg.n_window} params={n_params / 1e6:.1f} M raw_image={H}x{W} "
          f"voxel_chunk={cfg.voxel_chunk_size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
