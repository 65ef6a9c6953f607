#!/usr/bin/env python3
"""Benchmark the inference node's start-up: process start -> its modules imported -> "ready" (policy loaded) -> the
first ActionChunk, over DDS with a synthetic two-camera rig (``para_ros.ros_io.synthetic_rig``).

Each run starts ``python -m para_ros.nodes.inference_node`` afresh (as para-deploy and the launch files do) and
publishes an observation every 0.1 s from the moment it starts; the times are taken in this process on one clock:
the node's "ready" log line as it arrives, the first chunk as it is received. The modules' import time alone is
measured in a separate interpreter (``python -c "import para_ros.nodes.inference_node"``), and ``-X importtime``
lists the slowest top-level imports. Prints medians over ``--runs`` with the machine, its load and the settings.

    python -m para_ros.dds_env -- python bench/bench_node_startup.py                  # shipped checkpoint, CPU
    python -m para_ros.dds_env -- python bench/bench_node_startup.py --checkpoint ""  # random tiny model
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from para_ros.deploy.graph import SIM_CHECKPOINT

REPO = Path(__file__).resolve().parent.parent
NODE_MODULE = "para_ros.nodes.inference_node"


def import_seconds(env: dict) -> float:
    """Wall time of importing the node's module in a fresh interpreter (interpreter start excluded)."""
    code = f"import time; t = time.perf_counter(); import {NODE_MODULE}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def slowest_imports(env: dict, n: int = 6) -> list[tuple[str, float]]:
    """The ``n`` slowest top-level packages of the node's import (cumulative seconds, ``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {NODE_MODULE}"], env=env, capture_output=True, text=True
    )
    tops: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
        if not cumulative.isdigit():
            continue
        top = name.split(".")[0]
        if name == top:  # a top-level package's own line holds its cumulative time
            tops[top] = max(tops.get(top, 0.0), int(cumulative) / 1e6)
    return sorted(tops.items(), key=lambda kv: -kv[1])[:n]


def one_start(rig, node_cmd: list[str], env: dict, timeout_s: float) -> dict:
    """Start the node, feed it observations until the first chunk; the times (s since the start) or an error."""
    rig.chunks.clear()
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    node = subprocess.Popen(node_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def read_log():
        for line in node.stdout:
            if "ready: model" in line and "ready" not in marks:
                marks["ready"] = time.monotonic() - t0

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        rig.publish_static_scene()
        while not rig.chunks and time.monotonic() - t0 < timeout_s and node.poll() is None:
            rig.publish_observation(rig.now_ns())
            time.sleep(0.1)
        if rig.chunks:
            marks["first_chunk"] = time.monotonic() - t0
    finally:
        node.terminate()
        try:
            node.wait(10)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
        reader.join(5)
    if "first_chunk" not in marks:
        marks["error"] = f"no chunk within {timeout_s:.0f} s (exit status {node.returncode})"
    return marks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument(
        "--checkpoint",
        default=str(REPO / SIM_CHECKPOINT),
        help=f"checkpoint directory (default the shipped default, {SIM_CHECKPOINT}; '' = a random tiny model)",
    )
    parser.add_argument("--device", default="cpu", help="the node's device (default cpu)")
    parser.add_argument("--dtype", default="fp32", help="the node's dtype (default fp32)")
    parser.add_argument("--fast-path", action="store_true", help="the node's fast_path:=true")
    parser.add_argument("--runs", type=int, default=3, help="node starts (default 3)")
    parser.add_argument("--image-size", type=int, default=128, help="square camera image side, px (default 128)")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="longest wait for a first chunk (default 120)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: use 1 or more")

    from para_ros.dds_env import apply_loopback_dds_env, loopback_dds_env

    apply_loopback_dds_env()
    import rclpy

    from para_core.data import synthetic as syn
    from para_ros.ros_io.synthetic_rig import SyntheticRig

    env = loopback_dds_env()
    load_before = os.getloadavg()
    imports = [import_seconds(env) for _ in range(args.runs)]
    tops = slowest_imports(env)
    node_cmd = [sys.executable, "-m", NODE_MODULE, "--ros-args", "-p", f"device:={args.device}"]
    node_cmd += ["-p", f"dtype:={args.dtype}", "-p", f"fast_path:={str(args.fast_path).lower()}"]
    if args.checkpoint:
        node_cmd += ["-p", f"checkpoint:={args.checkpoint}"]
    S = args.image_size
    K = syn.intrinsics_from_fovy(S, S, 60.0)
    T_ee = np.eye(4)
    T_ee[:3, 3] = [0.35, 0.0, 0.12]
    rclpy.init()
    rig = SyntheticRig(
        syn.scene_camera_pose(), syn.wrist_camera_pose((0.35, 0.0, 0.12)), T_ee, seed=0, image_size=S, K=K,
        node_name="bench_startup_rig",
    )  # fmt: skip
    try:
        starts = [one_start(rig, node_cmd, env, args.timeout_s) for _ in range(args.runs)]
    finally:
        rig.close()
        rclpy.shutdown()
    load_after = os.getloadavg()

    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    print("inference_node start-up (process start -> modules imported -> ready -> first chunk)")
    print(
        f"  machine: {cpu}, {os.cpu_count()} cores, python {platform.python_version()}; load average before "
        f"{load_before[0]:.2f}, after {load_after[0]:.2f}"
        + ("  (the cores were shared with other work)" if max(load_before[0], load_after[0]) > 0.5 else "")
    )
    print(
        f"  settings: model {args.checkpoint or 'random tiny'}, device {args.device}, dtype {args.dtype}, "
        f"fast path {args.fast_path}, images 2 x {S}x{S}, {args.runs} run(s)"
    )
    print(f"  import {NODE_MODULE}: median {statistics.median(imports):.2f} s (min {min(imports):.2f})")
    print("  slowest top-level imports (-X importtime, cumulative): " + ", ".join(f"{n} {s:.2f} s" for n, s in tops))
    for what in ("ready", "first_chunk"):
        values = [s[what] for s in starts if what in s]
        if values:
            print(
                f"  {what.replace('_', ' '):<12} median {statistics.median(values):.2f} s after the process started "
                f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} of {len(starts)})"
            )
    for s in starts:
        if "error" in s:
            print(f"  a run failed: {s['error']}", file=sys.stderr)
    return 0 if all("first_chunk" in s for s in starts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
