"""Benchmark of the simulated YAM rig (ROS-free): physics and rendering cost per call.

Prints median / p99 in milliseconds with the machine and settings. Usage:
    MUJOCO_GL=egl python bench/bench_sim.py [--size 256] [--repeats 100]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def timed(fn, repeats: int) -> np.ndarray:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return np.array(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=256, help="square image side, pixels (default 256)")
    parser.add_argument("--repeats", type=int, default=100, help="timed calls per figure (default 100)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco

    from para_ros.sim.yam_scene import YamSim

    t0 = time.perf_counter()
    sim = YamSim()
    build_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    sim.render("scene", args.size, args.size)
    first_render_ms = (time.perf_counter() - t0) * 1e3
    sim.set_joint_targets([0.3, 1.8, 1.5, -1.2, 0.0, 0.3, 0.5])
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"MUJOCO_GL={os.environ['MUJOCO_GL']}, mujoco {mujoco.__version__}, image {args.size}x{args.size}"
    )
    print(f"build scene: {build_ms:.0f} ms; first render (creates the renderer): {first_render_ms:.0f} ms")
    rows = [
        ("step 20 ms of physics (10 x 2 ms)", lambda: sim.step(0.02)),
        ("render scene", lambda: sim.render("scene", args.size, args.size)),
        ("render wrist", lambda: sim.render("wrist", args.size, args.size)),
        ("link_transforms (tf)", sim.link_transforms),
    ]
    for name, fn in rows:
        ms = timed(fn, args.repeats)
        print(f"{name:38s} median {np.median(ms):7.2f} ms   p99 {np.percentile(ms, 99):7.2f} ms")
    sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
