#!/usr/bin/env python3
"""Benchmark ``inference_node`` over DDS between processes: image stamp -> chunk latency and throughput.

The node runs in its own process (as deployed); this process is a synthetic two-camera rig
(``para_ros.ros_io.synthetic_rig``) that publishes image pairs + CameraInfo + TF at ``--rate`` Hz, stamped with the time of
publishing, and records every ``ActionChunk``. Latency = (receipt of the chunk here) - (its observation stamp), i.e.
DDS in + decode + TF + policy + DDS out. Throughput = chunks received per second. Prints median / p99 / max with the
machine and settings, the node's stage medians, and (``--floor``, the default) the transport floor measured in the
same run: ``bench/transport_floor_node.py`` takes the same messages and answers with an empty chunk at once, so the
node's overhead above what rclpy and DDS cost on this machine is printed apart. Examples::

    python bench/bench_inference_node.py                          # tiny random model, CPU, 64 px images, 20 Hz
    python bench/bench_inference_node.py --image-size 480 --rate 30
    python bench/bench_inference_node.py --preset paper --device cuda --dtype bf16   # on a GPU machine
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from para_core.model.config import INFERENCE_DTYPES, PRESET_NAMES

FLOOR_NODE = Path(__file__).resolve().parent / "transport_floor_node.py"


def measure(rig, node_cmd, args, what: str) -> dict | None:
    """Start ``node_cmd``, drive the rig at ``args.rate`` for warm-up + duration, stop the node; the figures, or None
    (with the reason on stderr) when the node sent no chunk."""
    from para_ros.dds_env import loopback_dds_env
    from para_ros.ros_io.synthetic_rig import set_stamp
    from para_ros.stamps import stamp_to_ns

    receipt_ns, node_receive_ms = {}, {}

    def on_chunk(msg):
        stamp = stamp_to_ns(msg.header.stamp)
        receipt_ns.setdefault(stamp, time.time_ns())
        if msg.model_id == "transport_floor" and msg.time_from_stamp:  # the floor node's own receive stage
            node_receive_ms.setdefault(stamp, stamp_to_ns(msg.time_from_stamp[0]) / 1e6)

    from para_msgs.msg import ActionChunk

    sub = rig.node.create_subscription(ActionChunk, "/para/action_chunk", on_chunk, 100)
    rig.chunks.clear()
    rig.diagnostics.clear()
    node = subprocess.Popen(node_cmd, env=loopback_dds_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rig.publish_static_scene()
        deadline = time.monotonic() + 120
        while not rig.chunks and time.monotonic() < deadline:  # wait for the node (model load) and a first chunk
            rig.publish_observation(rig.now_ns())
            time.sleep(0.2)
        if not rig.chunks:
            print(f"{what}: no chunk within 120 s: is the node failing? run it by hand to see its log", file=sys.stderr)
            return None
        sent: list[int] = []
        rig_delay_ms: list[float] = []
        t_end_warm = time.monotonic() + args.warmup
        t_end = t_end_warm + args.duration
        period = 1.0 / args.rate
        next_t = time.monotonic()
        while time.monotonic() < t_end:
            # As a camera driver does: the frame exists before its stamp is known (exposure), so the messages are
            # built first and stamped at "exposure"; so is the robot's TF for that instant (a robot driver publishes
            # it on its own, off the camera's path). What the rig still spends after the stamp (publishing TF,
            # CameraInfo and both images through rclpy) is measured and reported apart from the node's overhead.
            images = {view: rig.image(view, 0) for view in ("scene", "wrist")}
            infos = {view: rig.camera_info(view, 0) for view in ("scene", "wrist")}
            transforms = rig.observation_transforms(10**9)  # stamped 1 s; moved to the real stamp below
            stamp = rig.now_ns()
            for msg in (*images.values(), *infos.values()):
                set_stamp(msg.header.stamp, stamp)
            for tf in transforms:
                set_stamp(tf.header.stamp, stamp + stamp_to_ns(tf.header.stamp) - 10**9)  # the history's offsets kept
            rig.publish_observation(stamp, tf_lead_s=0.0, images=images, info=infos, transforms=transforms)
            if time.monotonic() >= t_end_warm:
                sent.append(stamp)
                rig_delay_ms.append((rig.now_ns() - stamp) / 1e6)
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
        time.sleep(1.5)
    finally:
        node.terminate()
        try:
            node.wait(10)
        except subprocess.TimeoutExpired:  # a node stuck in its DDS shutdown: the figures are taken, end it
            print(f"{what}: did not stop within 10 s of SIGTERM; killed", file=sys.stderr)
            node.kill()
            node.wait(10)
        rig.node.destroy_subscription(sub)
    lat_ms = np.array([(receipt_ns[s] - s) / 1e6 for s in sent if s in receipt_ns])
    if len(lat_ms) == 0:
        print(f"{what}: no chunk for any measured observation", file=sys.stderr)
        return None
    status = next(
        (st for d in reversed(rig.diagnostics) for st in d.status if st.name.startswith("para: inference")), None
    )
    receive = [node_receive_ms[s] for s in sent if s in node_receive_ms]
    return {
        "sent": len(sent),
        "lat_ms": lat_ms,
        "rig_ms": float(np.median(rig_delay_ms)),
        "status": status,
        "receive_ms": float(np.median(receive)) if receive else None,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--preset", choices=PRESET_NAMES, default="tiny", help="random model preset")
    parser.add_argument("--checkpoint", default="", help="checkpoint directory instead of a random model")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    parser.add_argument(
        "--dtype",
        choices=INFERENCE_DTYPES,
        default="fp32",
        help="the node's dtype (auto: the fastest the device computes natively)",
    )
    parser.add_argument("--image-size", type=int, default=64, help="square camera image side, px (default 64)")
    parser.add_argument("--rate", type=float, default=20.0, help="camera rate, Hz (default 20)")
    parser.add_argument("--duration", type=float, default=15.0, help="measured seconds (default 15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first (default 3)")
    parser.add_argument("--fast-path", action="store_true", help="the node's fast inference path (fast_path:=true)")
    parser.add_argument("--compile-mode", default="off", help="the node's compile_mode parameter (default off)")
    parser.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the transport floor (bench/transport_floor_node.py: the same "
        "subscriptions, an empty chunk at once) in this run, after the node (default on)",
    )
    args = parser.parse_args(argv)

    from para_ros.dds_env import apply_loopback_dds_env

    apply_loopback_dds_env()
    import rclpy

    from para_core.data import synthetic as syn
    from para_ros.ros_io.synthetic_rig import SyntheticRig

    S = args.image_size
    K = syn.intrinsics_from_fovy(S, S, 60.0)
    T_ee = np.eye(4)
    T_ee[:3, 3] = [0.35, 0.0, 0.12]
    T_wrist = syn.wrist_camera_pose((0.35, 0.0, 0.12))
    node_cmd = [
        sys.executable,
        "-m",
        "para_ros.nodes.inference_node",
        "--ros-args",
        "-p",
        f"device:={args.device}",
        "-p",
        f"dtype:={args.dtype}",
        "-p",
        f"random_preset:={args.preset}",
        "-p",
        "publish_pointcloud:=false",
        "-p",
        f"max_rate_hz:={max(100.0, 2 * args.rate)}",
        "-p",
        f"fast_path:={str(args.fast_path).lower()}",
        "-p",
        f"compile_mode:={args.compile_mode}",
    ]
    if args.checkpoint:
        node_cmd += ["-p", f"checkpoint:={args.checkpoint}"]
    rclpy.init()
    rig = SyntheticRig(syn.scene_camera_pose(), T_wrist, T_ee, seed=0, image_size=S, K=K, node_name="bench_rig")
    try:
        result = measure(rig, node_cmd, args, "inference_node")
        floor = (
            measure(rig, [sys.executable, str(FLOOR_NODE)], args, "transport floor")
            if result is not None and args.floor
            else None
        )
    finally:
        rig.close()
        rclpy.shutdown()
    if result is None:
        return 1
    report(args, result, floor)
    return 0


def report(args, result: dict, floor: dict | None) -> None:
    """Print the node's figures, its stage medians and, when measured, the transport floor beside them."""
    try:
        import torch

        torch_version = torch.__version__
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except Exception:  # noqa: BLE001 - informative only
        torch_version, gpu = "?", "?"
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    lat_ms, node_status, S = result["lat_ms"], result["status"], args.image_size
    print(f"inference_node over DDS (loopback, Fast DDS profile {os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE')})")
    print(
        f"  machine: {cpu}, {os.cpu_count()} cores, GPU {gpu}, torch {torch_version}, python {platform.python_version()}"
    )
    print(
        f"  settings: model {args.checkpoint or 'random ' + args.preset}, device {args.device}, dtype {args.dtype}, "
        f"images 2 x {S}x{S} rgb8 at {args.rate:.1f} Hz, {args.duration:.0f} s measured, fast path {args.fast_path}, "
        f"compile_mode {args.compile_mode}"
    )
    print(
        f"  observations sent: {result['sent']}, chunks received: {len(lat_ms)} "
        f"({100.0 * len(lat_ms) / max(result['sent'], 1):.1f} %; the node skips pairs while busy)"
    )
    print(f"  throughput: {len(lat_ms) / args.duration:.2f} chunks/s")
    if node_status is not None:
        drops = {
            kv.key: kv.value
            for kv in node_status.values
            if kv.key.startswith(("dropped.", "problems.")) or kv.key in ("policy_total_s", "last_error")
        }
        print(f"  node's own counters: {drops}")
    print(
        f"  stamp -> chunk latency [ms]: median {np.median(lat_ms):.2f}  p99 {np.percentile(lat_ms, 99):.2f}  "
        f"min {lat_ms.min():.2f}  max {lat_ms.max():.2f}"
    )
    stages = (
        {}
        if node_status is None
        else {
            kv.key[len("stage_median_ms.") :]: float(kv.value)
            for kv in node_status.values
            if kv.key.startswith("stage_median_ms.")
        }
    )
    if not stages:
        return
    print("  where it goes (the node's own stage medians, ms; its clock, receipt -> publish):")
    for name, ms in stages.items():
        print(f"    {name:<20} {ms:8.3f}")
    model_ms = stages.get("model", 0.0) + stages.get("preprocess", 0.0) + stages.get("decode", 0.0)
    rig_ms = result["rig_ms"]
    overhead_ms = float(np.median(lat_ms)) - model_ms
    print(
        f"  overhead around the policy (latency median - preprocess - model - decode): {overhead_ms:.2f} ms, "
        f"of which the rig's own stamp -> last image published {rig_ms:.2f} ms (a camera driver's "
        f"readout); the graph's: {overhead_ms - rig_ms:.2f} ms"
    )
    if floor is not None:
        floor_ms = float(np.median(floor["lat_ms"]))
        print(
            f"  transport floor, same run (bench/transport_floor_node.py: the node's subscriptions and TF listener, "
            f"an empty chunk from the last image's callback; {len(floor['lat_ms'])} chunks): median "
            f"{floor_ms:.2f} ms, p99 {np.percentile(floor['lat_ms'], 99):.2f} ms; its receive "
            f"{floor['receive_ms'] if floor['receive_ms'] is not None else float('nan'):.2f} ms (the node's "
            f"{stages.get('receive', float('nan')):.2f}), the rig's {floor['rig_ms']:.2f} ms"
        )
        print(
            f"  the floor without the rig (rclpy + DDS in and out here): {floor_ms - floor['rig_ms']:.2f} ms; "
            f"the node's overhead above the floor: {overhead_ms - floor_ms:.2f} ms"
        )


if __name__ == "__main__":
    raise SystemExit(main())
