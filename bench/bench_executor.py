"""Benchmark of the chunk executor's control loop: period error and per-tick compute time at 100 Hz and 500 Hz.

Runs the real executor core (chunk timeline, blending, IK on the YAM model, safety filter with FK) in its
fixed-rate thread, fed a fresh chunk every ``--chunk-period`` seconds from another thread (a tool moving on a
circle over the table, like a policy at 10 Hz), and sends to a backend: ``recording`` (in memory, echoes the
command back as the measured state) or ``sdk_sim`` (the i2rt SDK's MuJoCo SimRobot). No ROS, so the numbers are
the loop's own; the node adds a DDS publish per tick.

Prints machine info, settings, and for each rate: start error (start - deadline), period error
(|interval between tick starts - period|), compute time per tick (median, p99, max), overruns (missed deadlines).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time

import numpy as np


def machine_info() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import mujoco

    return (
        f"machine: {platform.node()} | {platform.platform()} | CPU: {cpu} | logical cores: {os.cpu_count()} | "
        f"load avg: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
        f"python {platform.python_version()} | numpy {np.__version__} | mujoco {mujoco.__version__}"
    )


def run_rate(
    rate_hz: float, duration_s: float, backend_name: str, blend: str, smoothing: str, chunk_period_s: float
) -> dict:
    from scipy.spatial.transform import Rotation

    from para_core.model.rotations import make_matrix
    from para_ros.execution.backends import I2rtSdkBackend, RecordingBackend
    from para_ros.execution.chunk import Chunk, ChunkChecks
    from para_ros.execution.control_loop import FixedRateLoop
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.execution.timeline import BlendConfig
    from para_ros.robot.yam import load_yam_config

    yam = load_yam_config()
    checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
    cfg = ExecutorConfig(
        control_rate_hz=rate_hz,
        checks=checks,
        blend=BlendConfig(blend),
        smoothing=smoothing,
        command_lookahead_s=1.0 / rate_hz,
        # the bench measures once, ticks on and feeds chunks stamped on receipt: engaged, no watchdog, no lead
        start_engaged=True,
        joint_state_timeout_s=None,
        chunk_min_lead_s=0.0,
    )
    core = ExecutorCore(cfg, yam)
    R = np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]]).T
    quat = Rotation.from_matrix(R).as_quat()
    centre, radius, omega = np.array([0.32, 0.0, 0.10]), 0.05, 2 * np.pi / 4.0  # one turn in 4 s

    def circle(t):
        return centre + radius * np.stack([np.cos(omega * t), np.sin(omega * t), np.zeros_like(t)], axis=-1)

    t_base = time.monotonic()
    q0 = core.kin.ik(make_matrix(circle(np.array(0.0)), quat), np.array([0, 1.6, 1.3, -1.2, 0, 0])).q_rad
    if backend_name == "sdk_sim":
        backend = I2rtSdkBackend(sim=True)
        backend.robot.command_joint_pos(np.append(q0, 0.5))
    else:
        backend = RecordingBackend(q0, 0.5)
    core.set_measured_joints(*backend.read_joints())

    def tick():
        command = core.tick(time.monotonic() - t_base)
        if command is not None:
            backend.send(command)

    stop = threading.Event()

    def feeder():
        while not stop.is_set():
            now = time.monotonic() - t_base
            stamp = now - 0.05
            t = np.arange(32) * (4 / 30)  # PARA: 32 steps, frame_stride 4 at 30 fps
            core.add_chunk(
                Chunk(
                    stamp,
                    t,
                    circle(stamp + t),
                    np.tile(quat, (32, 1)),
                    np.full(32, 0.5),
                    np.ones(32),
                    "base",
                    "grasp_site",
                ),
                now,
            )
            stop.wait(chunk_period_s)

    feed = threading.Thread(target=feeder, daemon=True)
    feed.start()
    loop = FixedRateLoop(rate_hz, tick)
    loop.start()
    time.sleep(duration_s)
    loop.stop()
    stop.set()
    feed.join()
    backend.close()
    stats = loop.stats()
    stats["ik_failures"] = core.status.ik_failures
    stats["limit_events"] = core.status.limit_events
    stats["check_failures"] = core.status.check_failures
    stats["state"], stats["activity"] = core.status.state.value, str(core.status.activity)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--rates", type=float, nargs="+", default=[100.0, 500.0], help="control rates to run (Hz)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--backend", choices=("recording", "sdk_sim"), default="recording", help="where commands go")
    parser.add_argument("--blend", choices=("latest", "ensemble"), default="ensemble", help="chunk blending mode")
    parser.add_argument("--smoothing", choices=("none", "ruckig"), default="none", help="joint smoothing")
    parser.add_argument("--chunk-period", type=float, default=0.1, help="seconds between chunks (policy rate)")
    args = parser.parse_args(argv)

    print(machine_info())
    print(
        f"settings: backend={args.backend} blend={args.blend} smoothing={args.smoothing} "
        f"chunk every {args.chunk_period:.3f} s (32 steps, 133 ms apart) duration {args.duration:.1f} s per rate"
    )
    print(
        f"{'rate':>6} {'ticks':>6} {'overruns':>8} | {'start err ms (med/p99/max)':>28} | "
        f"{'period err ms (med/p99/max)':>28} | {'compute ms (med/p99/max)':>26} | ik_fail limits"
    )
    for rate in args.rates:
        s = run_rate(rate, args.duration, args.backend, args.blend, args.smoothing, args.chunk_period)

        def trio(name):
            return "/".join(f"{1e3 * s[f'{name}_{k}_s']:.3f}" for k in ("median", "p99", "max"))

        print(
            f"{rate:6.0f} {int(s['ticks']):6d} {int(s['overruns']):8d} | {trio('start_error'):>28} | "
            f"{trio('period_error'):>28} | {trio('compute'):>26} | {s['ik_failures']:7d} {s['limit_events']:6d}"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
