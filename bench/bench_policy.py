#!/usr/bin/env python3
"""Benchmark ``para_core.model.policy.Policy.predict`` (preprocessing + model + decoding): the reference path and the
fast path (``Policy(fast=True)``, ``para_core.model.v4_fast``) and optionally the fast path with a ``torch.compile``'d
backbone, in ONE run, on the same synthetic inputs, the paths alternating.

Prints, per path: median / p10 / p90 / max over the timed runs (after warm-up), the per-stage medians (preprocess,
model, decode), peak memory, the forward's FLOPs (``torch.utils.flop_counter``) and achieved TFLOP/s (against
``--peak-tflops`` when given), then the fast/reference ratio and whether both chose the same voxels, and the decode time of each chunk decoding mode
(``--decoding``, ``para_core.model.decoding``) on the same model outputs beside the path's predict time: what
``joint`` / ``fused`` add to a prediction against the ``argmax`` reference. Examples::

    python bench/bench_policy.py                                   # tiny config on CPU, both paths
    python bench/bench_policy.py --config paper --runs 50          # paper config on cuda if present, else CPU
    python bench/bench_policy.py --config paper --dtype bf16 --device cuda --peak-tflops 989
    python bench/bench_policy.py --config paper --paths reference fast compiled   # + torch.compile'd backbone
    python bench/bench_policy.py --config paper --fast-dtype auto  # fp32 reference vs the fast path in bf16 where
                                                                   # the CPU has bf16 instructions
    python bench/bench_policy.py --config paper --allocator default   # glibc's default: page faults every forward
    python bench/bench_policy.py --config pick_place --runs 10 --decoding argmax joint fused --decoding-top-k 8

On a CPU the policies make glibc keep freed memory (``para_core.model.hardware.keep_freed_memory``, for the whole
process, so every path runs with it); ``--allocator default`` leaves glibc as it is, to see what that costs.
"""

from __future__ import annotations

import argparse
import platform
import time

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES, PRESET_NAMES
from para_core.model.decoding import DECODING_MODES, DecodingConfig


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
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--config", choices=PRESET_NAMES, default="tiny", help="V4Config preset (default tiny)")
    parser.add_argument("--checkpoint", default="", help="load this checkpoint directory instead of random weights")
    parser.add_argument(
        "--device", default=None, help="cpu / cuda / cuda:1 (default: cuda if available else cpu; tiny defaults to cpu)"
    )
    parser.add_argument(
        "--dtype",
        choices=INFERENCE_DTYPES,
        default="fp32",
        help="precision of every path (default fp32; auto: the fastest the device computes natively)",
    )
    parser.add_argument(
        "--fast-dtype",
        choices=INFERENCE_DTYPES,
        default=None,
        help="precision of the fast and compiled paths (default: --dtype), e.g. the fp32 reference "
        "against a bf16 fast path",
    )
    parser.add_argument(
        "--allocator",
        choices=("keep", "default"),
        default="keep",
        help="CPU: keep = glibc keeps freed memory (the policies' default), default = glibc as is",
    )
    parser.add_argument(
        "--paths",
        nargs="+",
        choices=("reference", "fast", "compiled"),
        default=("reference", "fast"),
        help="which inference paths to time, in one run (default reference fast; compiled = the fast "
        "path with the backbone under torch.compile --compile-mode, compiled before timing)",
    )
    parser.add_argument(
        "--compile-mode",
        choices=[m for m in COMPILE_MODES if m != "off"],
        default="default",
        help="torch.compile mode of the compiled path (default: default; reduce-overhead = CUDA graphs on a GPU)",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=0.0,
        help="the device's peak TFLOP/s at this dtype, to report the achieved fraction",
    )
    parser.add_argument("--runs", type=int, default=50, help="timed runs per path (default 50)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed warm-up runs (default 3)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    parser.add_argument(
        "--decoding",
        nargs="*",
        choices=DECODING_MODES,
        default=list(DECODING_MODES),
        help="chunk decoding modes whose decode time is printed (default all; none: skip)",
    )
    parser.add_argument(
        "--decoding-top-k",
        type=int,
        default=DecodingConfig.top_k,
        help=f"candidate voxels per step of joint / fused (default {DecodingConfig.top_k})",
    )
    parser.add_argument(
        "--image-hw",
        type=int,
        nargs=2,
        default=(480, 640),
        metavar=("H", "W"),
        help="raw camera image size before the policy's resize (default 480 640)",
    )
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

    def make(path: str):
        fast = path != "reference"
        options = dict(
            device=device,
            dtype=(args.fast_dtype or args.dtype) if fast else args.dtype,
            fast=fast,
            compile_mode=args.compile_mode if path == "compiled" else "off",
            keep_freed_memory=args.allocator == "keep",
        )
        if args.checkpoint:
            return Policy.from_checkpoint(args.checkpoint, **options)
        return Policy.random_init(V4Config.preset(args.config), **options)

    policies = {name: make(name) for name in args.paths}
    policy = next(iter(policies.values()))
    cfg = policy.config

    rng = np.random.default_rng(0)
    H, W = args.image_hw
    ee = np.array([0.3, 0.0, 0.2])
    cams = [
        CameraObservation(syn.random_image(rng, H, W), syn.intrinsics_from_fovy(W, H, 60.0), syn.scene_camera_pose()),
        CameraObservation(syn.random_image(rng, H, W), syn.intrinsics_from_fovy(W, H, 80.0), syn.wrist_camera_pose(ee)),
    ][: cfg.n_views]
    T_ee = np.eye(4)
    T_ee[:3, :3] = syn.top_down_rotation()
    T_ee[:3, 3] = ee
    state = RobotState(T_ee, 1.0, np.tile(ee, (cfg.mv_past_n, 1)))

    n_params = sum(p.numel() for p in policy.model.parameters())
    print(f"policy latency  config={cfg.name} model_id={policy.model_id}  paths={' + '.join(args.paths)}")
    print(
        f"  device={policy.device} dtype={ {n: p.dtype for n, p in policies.items()} } torch={torch.__version__} "
        f"threads={torch.get_num_threads()} device_preprocess={ {n: p.device_preprocess for n, p in policies.items()} }"
        f" allocator={policy.allocator}"
    )
    print(f"  attention={ {n: p.attention for n, p in policies.items()} }")
    print(f"  cpu={cpu_model()} ({platform.machine()}, {__import__('os').cpu_count()} logical cores)")
    print(
        f"  img_size={cfg.img_size} pred_size={cfg.pred_size} bins={cfg.n_height_bins} views={cfg.n_views} "
        f"V={cfg.n_voxels:,} T={cfg.n_window} params={n_params / 1e6:.1f} M raw_image={H}x{W} "
        f"voxel_chunk={cfg.voxel_chunk_size}; {args.runs} timed runs per path after {args.warmup} warm-up"
    )
    # the compiled path runs the fast path's operations: count them eagerly (the counter does not trace compiled code)
    flops = {
        name: forward_flops(pol if name != "compiled" else make("fast"), cams, state) for name, pol in policies.items()
    }
    if "compiled" in policies:
        t0 = time.perf_counter()
        policies["compiled"].predict(cams, state)
        print(
            f"  compiled path: torch.compile(mode={args.compile_mode}) of the backbone took "
            f"{time.perf_counter() - t0:.1f} s (first prediction)"
        )
    for _ in range(args.warmup):
        for pol in policies.values():
            pol.predict(cams, state)
    for pol in policies.values():
        if pol.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(pol.device)
    times_ms = {name: [] for name in policies}
    decode_ms = {name: {mode: [] for mode in args.decoding} for name in policies}
    fusions = {name: {mode: None for mode in args.decoding} for name in policies}
    stages = {name: {"preprocess": [], "model": [], "decode": []} for name in policies}
    # The wrist camera moves 1 mm between predictions, as on the robot: its voxels are rebuilt every time (only a
    # still camera's are reused, para_core.model.voxels.StaticViewCache); the scene camera stays put.
    wrist_poses = [syn.wrist_camera_pose(ee + [0.001 * i, 0.0, 0.0]) for i in range(8)]
    for run in range(args.runs):  # the paths alternate, so a change in the machine's load hits both alike
        if len(cams) > 1:
            cams[1].T_world_cam = wrist_poses[run % len(wrist_poses)]
        for name, pol in policies.items():
            t0 = time.perf_counter()
            pol.predict(cams, state)  # synchronises the GPU before returning
            times_ms[name].append(1e3 * (time.perf_counter() - t0))
            for k in stages[name]:
                stages[name][k].append(1e3 * pol.last_timing_s[k])
            for mode, ms in time_decoding(
                pol, state, args.decoding, args.decoding_top_k, run * cfg.step_dt_s, fusions[name]
            ).items():
                decode_ms[name][mode].append(ms)
    medians, chosen, chosen_xyz = {}, {}, {}
    for name, pol in policies.items():
        chosen[name] = pol.last_output.chosen_voxel.cpu()  # (B, T)
        chosen_xyz[name] = torch.gather(
            pol.last_output.voxel_xyz.float().cpu(), 1, chosen[name].unsqueeze(-1).expand(-1, -1, 3)
        )  # (B, T, 3)
        t = np.asarray(times_ms[name])
        medians[name] = float(np.median(t))
        if pol.device.type == "cuda":
            mem = f"peak_mem={torch.cuda.max_memory_allocated(pol.device) / 2**30:.2f} GiB"
        else:
            import resource

            mem = f"peak_rss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (whole process)"
        tflops = flops[name] / (medians[name] * 1e-3) / 1e12 if flops[name] else float("nan")
        peak = f" = {100 * tflops / args.peak_tflops:.1f} % of {args.peak_tflops:g}" if args.peak_tflops else ""
        st = {k: float(np.median(v)) for k, v in stages[name].items()}
        print(
            f"  {name:<9} median {medians[name]:9.2f} ms  p10 {np.percentile(t, 10):9.2f}  p90 "
            f"{np.percentile(t, 90):9.2f}  min {t.min():9.2f}  max {t.max():9.2f}  | preprocess "
            f"{st['preprocess']:.2f}  model {st['model']:.2f}  decode {st['decode']:.2f} ms  | {mem}  | "
            f"{flops[name] / 1e9:.3f} GFLOP/forward, {tflops:.4f} TFLOP/s{peak}"
        )
        if args.decoding:
            dm = {mode: float(np.median(v)) for mode, v in decode_ms[name].items()}
            base = dm.get("argmax", st["decode"])
            parts = [
                f"{mode} {ms:.2f} ms ({100 * (ms - base) / medians[name]:+.1f} % of predict)" for mode, ms in dm.items()
            ]
            print(f"  {'':<9} decode by mode (same outputs, top_k {args.decoding_top_k}, median): " + ", ".join(parts))
    if "reference" in medians:
        for name in medians:
            if name != "reference":
                same = int((chosen["reference"] == chosen[name]).sum())
                apart_m = float((chosen_xyz["reference"] - chosen_xyz[name]).norm(dim=-1).max())
                dtypes = ""
                if policies[name].dtype != policies["reference"].dtype and same < chosen[name].numel():
                    dtypes = (
                        f" ({policies[name].dtype} against {policies['reference'].dtype}: a random model's "
                        f"near-tied logits)"
                    )
                print(
                    f"  {name} / reference: {medians['reference'] / medians[name]:.2f}x faster (median); "
                    f"same argmax voxels: {same}/{chosen[name].numel()} steps, chosen voxel centres at most "
                    f"{apart_m:.4f} m apart{dtypes}"
                )
    return 0


def time_decoding(policy, state, modes, top_k: int, stamp_s: float, fusions: dict) -> dict[str, float]:
    """Milliseconds of decoding the policy's last outputs in each mode, each from the same starting point (the
    per-step normaliser computed afresh, as a prediction does); ``fusions`` holds each mode's fusion memory."""
    import torch

    from para_core.model.decoding import ChunkFusion, decode_chunk

    out, cfg = policy.last_output, policy.config
    lse = out.volume_lse if policy.fast else None  # the fast path's forward computes it; else the decode does
    times = {}
    for mode in modes:
        out.volume_lse = lse
        t0 = time.perf_counter()
        with torch.inference_mode():
            if mode == "argmax":
                policy.model.decode(out, refine=policy.refine)
            else:
                decoding = DecodingConfig(mode=mode, top_k=top_k)
                if fusions.get(mode) is None:
                    fusions[mode] = ChunkFusion(
                        decoding.fusion_tau_s,
                        decoding.fusion_radius_m,
                        decoding.fusion_store_k,
                        decoding.fusion_max_chunks,
                    )
                decode_chunk(
                    cfg,
                    out,
                    decoding,
                    refine=policy.refine,
                    start_xyz=state.T_world_ee[:3, 3],
                    fusion=fusions[mode],
                    stamp_s=stamp_s,
                )
            if policy.device.type == "cuda":
                torch.cuda.synchronize(policy.device)
        times[mode] = 1e3 * (time.perf_counter() - t0)
    out.volume_lse = lse
    return times


def forward_flops(policy, cams, state) -> float:
    """FLOPs of one model forward on these inputs (torch's own counter; 0 when it cannot count)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    try:
        inputs = policy.preprocess(cams, state)
        counter = FlopCounterMode(display=False)
        with torch.inference_mode(), counter:
            policy.model(inputs)
        return float(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - informative only
        return 0.0


if __name__ == "__main__":
    raise SystemExit(main())
