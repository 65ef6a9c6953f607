"""``para-bag extract`` and ``para-bag eval`` end to end on real rosbag2 files; numbers recomputed independently."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from bag_fixtures import (
    K_IMAGE,
    NS,
    T0_NS,
    T_SCENE,
    SyntheticBagSpec,
    reference_ee_pose,
    reference_gripper,
    reference_wrist_pose,
    write_synthetic_bag,
)
from scipy.spatial.transform import Rotation
from test_bag_reader import ANOMALIES, expected_pairs

from para_core.data.dataset import Episode
from para_ros.bag.reader import select_by_fps
from para_ros.commands import bag as bag_tools


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    spec = SyntheticBagSpec(**ANOMALIES)
    return write_synthetic_bag(tmp_path_factory.mktemp("tools") / "bag", spec), spec


def test_extract_writes_the_synchronised_episode(bag, tmp_path):
    path, spec = bag
    rc = bag_tools.main(["extract", str(path), "--out", str(tmp_path / "ep"), "--fps", "5", "--quiet"])
    assert rc == 0
    ep = Episode.load(tmp_path / "ep")
    pairs, scene, wrist = expected_pairs(spec)
    tf_end = T0_NS + int(spec.duration_s * NS)
    expected = [s for s in select_by_fps(sorted(pairs), 5.0) if s <= tf_end]
    assert ep.stamps_ns.tolist() == expected
    assert ep.view_names == ("scene", "wrist")
    assert ep.fps == pytest.approx(1e9 / np.median(np.diff(expected))) and ep.fps == pytest.approx(5.0)
    for i, stamp in enumerate(ep.stamps_ns):
        k_scene, k_wrist = pairs[int(stamp)]
        np.testing.assert_allclose(ep.T_world_ee[i], reference_ee_pose(spec, int(stamp)), atol=1e-6)
        np.testing.assert_allclose(ep.T_world_cam["wrist"][i], reference_wrist_pose(spec, wrist[k_wrist]), atol=1e-6)
        np.testing.assert_allclose(ep.T_world_cam["scene"][i], T_SCENE(), atol=1e-6)
        np.testing.assert_allclose(ep.K["scene"][i], K_IMAGE(spec), atol=1e-12)
        assert ep.gripper[i] == pytest.approx(reference_gripper(spec, int(stamp)))
        assert int(ep.images["scene"][i, 0, 0, 0]) == (7 * k_scene) % 256
        assert ep.meta["pair_gap_ns"][i] == wrist[k_wrist] - scene[k_scene]  # the pair's time difference, per frame
    assert ep.meta["pair_gap_s"]["max"] == pytest.approx(0.003, abs=1e-9)  # wrist 3 ms after scene: the nearest
    assert ep.meta["source_bag"].endswith("bag") and ep.meta["world_frame"] == "base"
    # The training pipeline takes it as it is.
    from para_core.data.dataset import EpisodeDataset
    from para_core.model.config import V4Config

    item = EpisodeDataset([tmp_path / "ep"], V4Config.tiny())[0]
    np.testing.assert_allclose(item["T_world_ee"].numpy(), ep.T_world_ee[0], atol=1e-6)
    rc = bag_tools.main(
        ["extract", str(path), "--out", str(tmp_path / "ep2"), "--fps", "0", "--max-frames", "4", "--quiet"]
    )
    assert rc == 0 and Episode.load(tmp_path / "ep2").stamps_ns.tolist() == sorted(pairs)[:4]


def test_extract_stores_the_measured_rate_and_gaps_and_training_resamples(bag, tmp_path):
    """The bag's pairs run at 10 Hz with wrist frames 5 and 12 unpaired. Extracting with --fps 30 keeps every pair; the
    episode must say 10 fps (not 30), list the two 0.2 s gaps, and the dataset must put chunk step i at exactly
    i * 4 / 30 s after the frame (by hand: linear interpolation of the extracted poses at those times)."""
    path, spec = bag
    rc = bag_tools.main(["extract", str(path), "--out", str(tmp_path / "ep"), "--fps", "30", "--quiet"])
    assert rc == 0
    ep = Episode.load(tmp_path / "ep")
    pairs, _, _ = expected_pairs(spec)
    tf_end = T0_NS + int(spec.duration_s * NS)
    assert ep.stamps_ns.tolist() == sorted(s for s in pairs if s <= tf_end)  # every pair: the bag is slower than 30
    assert ep.fps == pytest.approx(10.0, rel=1e-6)
    assert ep.meta["requested_fps"] == 30.0 and ep.meta["measured_fps"] == pytest.approx(10.0, rel=1e-6)
    assert ep.meta["gaps"]["count"] == 2 and ep.meta["gaps"]["largest_s"] == pytest.approx(0.2, abs=1e-6)
    from para_core.data.dataset import EpisodeDataset
    from para_core.model.config import V4Config

    cfg = V4Config.tiny()  # frame_stride 4, dataset_fps 30, n_window 4
    ds = EpisodeDataset([tmp_path / "ep"], cfg)
    assert ds.episodes[0].time_base == "stamps"
    times_s = (ep.stamps_ns - ep.stamps_ns[0]) / 1e9
    for t in (2, 3, 9):  # frame 3 is wrist frame 3: its chunk spans the gap after wrist frame 4
        query = times_s[t] + np.arange(4) * 4 / 30
        want = np.stack([np.interp(query, times_s, ep.T_world_ee[:, k, 3]) for k in range(3)], axis=-1)
        np.testing.assert_allclose(ds[t]["target_positions_world"].double().numpy(), want, atol=1e-6)
        np.testing.assert_allclose(
            ds[t]["target_gripper"].double().numpy(), np.interp(query, times_s, ep.gripper), atol=1e-6
        )


def test_frame_timing_by_hand():
    timing = bag_tools.frame_timing(np.array([0, 100, 200, 400, 500, 550, 650]) * 1_000_000)  # ms -> ns
    assert timing["measured_fps"] == pytest.approx(10.0)  # median spacing 100 ms
    assert timing["gaps"] == {"count": 1, "largest_s": pytest.approx(0.2), "threshold_s": pytest.approx(0.15)}
    assert timing["max_spacing_s"] == pytest.approx(0.2)
    one = bag_tools.frame_timing(np.array([5]))
    assert one["measured_fps"] is None and one["gaps"]["count"] == 0


def _read_chunks(bag_dir):
    from rosbags.rosbag2 import Reader

    from para_ros.bag.reader import make_typestore

    store = make_typestore()
    chunks = []
    with Reader(bag_dir) as reader:
        conns = [c for c in reader.connections if c.topic == "/para/action_chunk"]
        assert [c.msgtype for c in conns] == ["para_msgs/msg/ActionChunk"]
        assert {c.topic for c in reader.connections} == {"/para/action_chunk", "/para/markers"}
        for conn, _log_ns, raw in reader.messages(connections=conns):
            chunks.append(store.deserialize_cdr(raw, conn.msgtype))
    return chunks


def test_eval_end_to_end_metrics_equal_a_recomputation_from_the_chunks_bag(bag, tmp_path):
    path, spec = bag
    out = tmp_path / "eval"
    rc = bag_tools.main(
        [
            "eval",
            str(path),
            "--random-preset",
            "tiny",
            "--out",
            str(out),
            "--overlay-every",
            "5",
            "--write-chunks",
            str(tmp_path / "chunks"),
            "--threads",
            "1",
            "--quiet",
        ]
    )
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    chunks = _read_chunks(tmp_path / "chunks")
    pairs, _, _ = expected_pairs(spec)
    tf_end = T0_NS + int(spec.duration_s * NS)
    stamps = [c.header.stamp.sec * NS + c.header.stamp.nanosec for c in chunks]
    assert stamps == sorted(s for s in pairs if s <= tf_end)  # one chunk per observation the node would make
    assert metrics["chunks_total"] == len(chunks) and metrics["model_id"] == chunks[0].model_id
    assert chunks[0].header.frame_id == "base" and chunks[0].tool_frame_id == "grasp_site"
    # Ground truth straight from the generator (scipy slerp of the TF samples), not from the tf Buffer.
    T = len(chunks[0].poses)
    pos_err = np.full((len(chunks), T), np.nan)
    rot_err = np.full((len(chunks), T), np.nan)
    grip_ok = np.full((len(chunks), T), np.nan)
    for c, (chunk, stamp) in enumerate(zip(chunks, stamps)):
        for i, (pose, dt) in enumerate(zip(chunk.poses, chunk.time_from_stamp)):
            t = stamp + dt.sec * NS + dt.nanosec
            if t > tf_end:
                continue  # beyond the recording: no ground truth
            gt = reference_ee_pose(spec, t)
            p = np.array([pose.position.x, pose.position.y, pose.position.z])
            q = [pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w]
            pos_err[c, i] = np.linalg.norm(p - gt[:3, 3])
            rot_err[c, i] = math.degrees((Rotation.from_quat(q).inv() * Rotation.from_matrix(gt[:3, :3])).magnitude())
            grip_ok[c, i] = float((chunk.gripper[i] >= 0.5) == (reference_gripper(spec, t) >= 0.5))
    assert metrics["chunks_evaluated"] == int(np.isfinite(pos_err).any(1).sum())
    assert [d["count"] for d in metrics["position_error_m"]["per_step"]] == np.isfinite(pos_err).sum(0).tolist()
    assert np.isfinite(pos_err[:, 0]).all() and not np.isfinite(pos_err[:, -1]).all()  # the end is cut off
    for i, d in enumerate(metrics["position_error_m"]["per_step"]):
        col = pos_err[:, i][np.isfinite(pos_err[:, i])]
        assert d["mean"] == pytest.approx(col.mean(), abs=1e-6)
        assert d["median"] == pytest.approx(np.median(col), abs=1e-6)
        assert d["p90"] == pytest.approx(np.percentile(col, 90), abs=1e-6)
        rcol = rot_err[:, i][np.isfinite(rot_err[:, i])]
        assert metrics["rotation_error_deg"]["per_step"][i]["mean"] == pytest.approx(rcol.mean(), abs=1e-4)
    assert metrics["gripper_accuracy"]["all"] == pytest.approx(np.nanmean(grip_ok), abs=1e-12)
    assert metrics["time_offsets_s"] == pytest.approx([i * 4 / 30 for i in range(T)])
    # Figures and arrays.
    for name in (
        "error_per_step.png",
        "rotation_error_per_step.png",
        "trajectory.png",
        "response_volume_00000.png",
        "chunks.npz",
    ):
        assert (out / name).stat().st_size > 0, name
    overlays = sorted(p.name for p in (out / "overlays").iterdir())
    assert overlays == [f"overlay_{i:05d}.png" for i in range(0, len(chunks), 5)]


def test_eval_write_chunks_single_mcap_file(bag, tmp_path):
    from mcap.reader import make_reader

    path, spec = bag
    target = tmp_path / "pred.mcap"
    rc = bag_tools.main(
        [
            "eval",
            str(path),
            "--random-preset",
            "tiny",
            "--out",
            str(tmp_path / "e"),
            "--max-frames",
            "3",
            "--overlay-every",
            "0",
            "--response-volume-every",
            "-1",
            "--write-chunks",
            str(target),
            "--threads",
            "1",
            "--quiet",
        ]
    )
    assert rc == 0 and target.is_file() and not (tmp_path / "pred.mcap.d").exists()
    with open(target, "rb") as f:
        reader = make_reader(f)
        topics = [ch.topic for _, ch, _ in reader.iter_messages()]
        schemas = {s.name for s in reader.get_summary().schemas.values()}
    assert topics.count("/para/action_chunk") == 3 and topics.count("/para/markers") == 3
    assert "para_msgs/msg/ActionChunk" in schemas
    assert not (tmp_path / "e" / "overlays").exists()


def test_eval_fast_path_writes_the_reference_chunks(bag, tmp_path):
    """``para-bag eval --fast`` (the node's fast_path) predicts what the reference path predicts, chunk for chunk."""
    path, _ = bag
    poses = {}
    for name, extra in (("reference", []), ("fast", ["--fast"])):
        assert (
            bag_tools.main(
                [
                    "eval",
                    str(path),
                    "--random-preset",
                    "tiny",
                    "--out",
                    str(tmp_path / name),
                    "--max-frames",
                    "4",
                    "--overlay-every",
                    "0",
                    "--response-volume-every",
                    "-1",
                    "--write-chunks",
                    str(tmp_path / f"{name}_chunks"),
                    "--threads",
                    "1",
                    "--quiet",
                    *extra,
                ]
            )
            == 0
        )
        poses[name] = np.array(
            [
                [[q.position.x, q.position.y, q.position.z] for q in c.poses]
                for c in _read_chunks(tmp_path / f"{name}_chunks")
            ]
        )
    assert poses["reference"].shape == poses["fast"].shape and poses["reference"].shape[0] == 4
    # Equal, except a rare step where two voxels of the random model tie within float rounding and the argmax flips
    # (test_core_fast_path checks such flips are ties): at most one step per chunk, under a tenth of all steps.
    differs = np.linalg.norm(poses["fast"] - poses["reference"], axis=-1) > 1e-4  # (chunks, T)
    assert differs.sum(axis=1).max() <= 1 and differs.mean() < 0.1, differs


def test_cli_errors_and_help(bag, tmp_path, capsys):
    path, _ = bag
    assert (
        bag_tools.main(
            [
                "eval",
                str(path),
                "--random-preset",
                "tiny",
                "--out",
                str(tmp_path / "x"),
                "--image-topic",
                "wrist=/nope/image",
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no wrist camera images on '/nope/image'" in err and "/wrist_cam/image_raw/compressed" in err
    assert bag_tools.main(["extract", str(tmp_path / "missing"), "--out", str(tmp_path / "y")]) == 2
    assert "does not exist" in capsys.readouterr().err
    for args in ([], ["extract"], ["eval"]):
        r = subprocess.run(
            [sys.executable, "-m", "para_ros.commands.bag", *args, "--help"], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and "usage: para-bag" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "para_ros.commands.bag", "eval", str(path)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "--checkpoint" in r.stderr


def test_eval_recorded_chunks_by_hand(tmp_path):
    """Chunks recorded by a 'live run' with known errors: step i is 1 cm * (i + 1) off in x and turned 5 deg * i
    about the tool z axis; chunk 2 says 'closed' while the gripper is open. No images and no model are needed."""
    spec = SyntheticBagSpec(
        duration_s=1.0,
        skip_topics=(
            "/scene_cam/image_raw",
            "/wrist_cam/image_raw/compressed",
            "/scene_cam/camera_info",
            "/wrist_cam/camera_info",
        ),
    )
    offsets_ns = np.array([0, 150_000_000, 350_000_000])
    chunks = []
    for k in range(9):  # stamps 0.0 .. 0.8 s; steps after the last TF sample (1.0 s) have no ground truth
        stamp = T0_NS + k * 100_000_000
        pos, quat = [], []
        for i, off in enumerate(offsets_ns):
            gt = reference_ee_pose(spec, min(stamp + int(off), T0_NS + NS))  # clamped: no truth after 1 s anyway
            pos.append(gt[:3, 3] + [0.01 * (i + 1), 0.0, 0.0])
            quat.append((Rotation.from_matrix(gt[:3, :3]) * Rotation.from_euler("z", 5.0 * i, degrees=True)).as_quat())
        chunks.append((stamp, np.array(pos), np.array(quat), offsets_ns, np.zeros(3) if k == 2 else np.ones(3)))
    path = write_synthetic_bag(tmp_path / "live", spec, chunks=chunks)
    out = tmp_path / "eval"
    assert bag_tools.main(["eval", str(path), "--recorded-chunks", "--out", str(out), "--quiet"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["model_id"] == "recorded-test" and m["source"] == "recorded chunks"
    assert m["chunks_total"] == 9 and m["chunks_evaluated"] == 9
    assert m["time_offsets_s"] == pytest.approx([0.0, 0.15, 0.35])
    per_step = m["position_error_m"]["per_step"]
    assert [d["count"] for d in per_step] == [9, 9, 7]  # 0.7 + 0.35 and 0.8 + 0.35 s are after the recording
    for i, d in enumerate(per_step):
        assert d["mean"] == pytest.approx(0.01 * (i + 1), abs=1e-9)
        assert d["p90"] == pytest.approx(0.01 * (i + 1), abs=1e-9)
    for i, d in enumerate(m["rotation_error_deg"]["per_step"]):
        assert d["mean"] == pytest.approx(5.0 * i, abs=1e-6)
    assert m["gripper_accuracy"]["all"] == pytest.approx(22 / 25)
    assert (out / "error_per_step.png").is_file() and (out / "trajectory.png").is_file()
    # Without the chunk topic: a clear error listing what the bag has.
    plain = write_synthetic_bag(tmp_path / "plain", SyntheticBagSpec(duration_s=0.3))
    assert bag_tools.main(["eval", str(plain), "--recorded-chunks", "--out", str(tmp_path / "e2"), "--quiet"]) == 2
