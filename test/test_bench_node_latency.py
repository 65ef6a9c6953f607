"""bench/bench_inference_node.py and its transport floor (bench/transport_floor_node.py) over real DDS."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import start_python, stop_process, wait_for

from para_ros.ros_io.synthetic_rig import SyntheticRig

pytestmark = pytest.mark.ros

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
K = np.array([[60.0, 0, 32.0], [0, 60.0, 32.0], [0, 0, 1.0]])


def start_floor_node():
    return start_python(
        f"import sys; sys.path.insert(0, {str(BENCH_DIR)!r}); import transport_floor_node as n; "
        "raise SystemExit(n.main([]))"
    )


def test_floor_node_answers_the_wrist_image_with_its_stamp_and_its_receive_stage():
    """One empty chunk per wrist image, stamped like that image (not the scene image, stamped 7 ms earlier here);
    its receive stage lies between 0 and the whole stamp -> chunk time this process measures; it stops on SIGINT
    and on SIGTERM (the benchmark's terminate())."""
    import rclpy

    from para_msgs.msg import ActionChunk
    from para_ros.stamps import set_stamp, stamp_to_ns

    T_ee = np.eye(4)
    T_ee[:3, 3] = [0.35, 0.0, 0.12]
    for stop in (signal.SIGINT, signal.SIGTERM):
        proc = start_floor_node()
        rclpy.init()
        rig = SyntheticRig(np.eye(4), np.eye(4), T_ee, image_size=64, K=K, node_name="floor_test_rig")
        receipt_ns: dict[int, int] = {}
        rig.node.create_subscription(
            ActionChunk,
            "/para/action_chunk",
            lambda m: receipt_ns.setdefault(stamp_to_ns(m.header.stamp), time.time_ns()),
            10,
        )
        try:
            wait_for(
                lambda: (
                    rig.node.count_subscribers("/wrist_cam/image_raw") > 0
                    and rig.node.count_publishers("/para/action_chunk") > 0
                ),
                30,
                what="the floor node",
            )
            time.sleep(0.5)  # discovery of the chunk subscription on the node's side
            sent = []
            for _ in range(5):
                wrist_stamp = rig.now_ns()
                scene_stamp = wrist_stamp - 7_000_000  # the scene camera exposed first
                images = {"scene": rig.image("scene", scene_stamp), "wrist": rig.image("wrist", 0)}
                set_stamp(images["wrist"].header.stamp, wrist_stamp)
                rig.publish_observation(scene_stamp, tf_lead_s=0.0, images=images)
                sent.append(wrist_stamp)
                time.sleep(0.1)
            wait_for(lambda: all(s in receipt_ns for s in sent), 10, what="a chunk for every wrist image")
            by_stamp = {stamp_to_ns(c.header.stamp): c for c in rig.chunks}
            assert set(by_stamp) == set(sent), "a chunk per wrist image, none for the scene images"
            for stamp in sent:
                chunk = by_stamp[stamp]
                assert chunk.model_id == "transport_floor" and len(chunk.poses) == 0
                receive_ns = stamp_to_ns(chunk.time_from_stamp[0])
                assert 0 < receive_ns <= receipt_ns[stamp] - stamp
        finally:
            rig.close()
            rclpy.shutdown()
            rc, out = stop_process(proc, timeout_s=10, stop_signal=stop)
        assert rc == 0, f"floor node did not stop cleanly on {stop!r}: {out[-2000:]}"


def test_node_bench_help():
    res = subprocess.run(
        [sys.executable, str(BENCH_DIR / "bench_inference_node.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "--floor" in res.stdout and "--fast-path" in res.stdout
    res = subprocess.run(
        [sys.executable, str(BENCH_DIR / "transport_floor_node.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "transport floor" in res.stdout


@pytest.mark.slow
def test_node_bench_prints_the_stages_and_the_floor_of_the_same_run():
    """A short run: every observation answered, the stage medians, and the floor below the node's latency (the floor
    runs no model: a floor at or above the node would mean it measured the node again, or nothing)."""
    from para_ros.dds_env import loopback_dds_env

    res = subprocess.run(
        [
            sys.executable,
            str(BENCH_DIR / "bench_inference_node.py"),
            "--duration",
            "3",
            "--warmup",
            "1",
            "--rate",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=loopback_dds_env(),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    for stage in ("receive", "wait", "observation_tf", "preprocess", "model", "decode", "publish", "other"):
        assert re.search(rf"^\s+{stage}\s+[\d.]+$", out, re.M), stage
    node_ms = float(re.search(r"latency \[ms\]: median ([\d.]+)", out).group(1))
    floor_ms = float(re.search(r"transport floor, same run .*?median ([\d.]+) ms", out).group(1))
    assert 0 < floor_ms < node_ms
    above = float(re.search(r"overhead above the floor: ([-\d.]+) ms", out).group(1))
    overhead = float(re.search(r"decode\): ([-\d.]+) ms", out).group(1))
    assert abs(above - (overhead - floor_ms)) < 0.02  # the printed difference is the difference
