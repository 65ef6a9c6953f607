"""``para-bag``: turn rosbag2 recordings into training episodes, and evaluate a policy offline on a recording.

``para-bag extract BAG --out DIR [--fps 30] [--max-frames N]``
    Synchronised observations (``para_ros.bag.reader``: the inference node's pairing, TF and decoding rules) are
    decimated to ``--fps`` by stamp (the observation nearest each grid time ``t0 + k / fps`` within half a period;
    images are never interpolated, every kept frame keeps its real stamp and its poses are looked up at that stamp)
    and written as one ``para_core.data.dataset.Episode`` directory. The episode's ``fps`` is the MEASURED rate of the kept
    frames (1 / median stamp spacing), not ``--fps``: a 10 Hz recording extracted with ``--fps 30`` keeps every frame
    and says 10. ``meta`` records ``requested_fps``, ``measured_fps`` and ``gaps`` (spacings longer than 1.5 measured
    periods: count, largest in seconds). Training resamples such episodes by stamps (``para_core.data.dataset``).
    The camera calibration the recording used (``--calibration FILE``, or ``calibration.yaml`` inside the bag
    directory) is copied next to the episode and recorded in ``meta.calibration``; ``para-train`` keeps it in the
    checkpoint's ``recipe.json``.

``para-bag eval BAG (--checkpoint DIR | --random-preset tiny) [--out DIR] [--write-chunks OUT.mcap]``
    Replays the recording through ``para_core.model.policy.Policy`` observation by observation (offline, as fast as the
    model runs; the same inputs the node would build: images, CameraInfo K, camera poses at each image stamp, EE pose,
    past EE positions, gripper). Step i of each predicted chunk is compared with the recorded EE pose (TF ``world <-
    ee_frame``, tf2 interpolation) at ``stamp + time_offset_i``; steps beyond the recording are left out. Writes into
    ``--out``: ``metrics.json`` (``para_core.eval.metrics.metrics_dict``), ``chunks.npz`` (predictions and ground truth),
    ``error_per_step.png``, ``rotation_error_per_step.png``, ``trajectory.png``, ``overlays/overlay_NNNNN.png`` (every
    ``--overlay-every`` chunks: the predicted path and the actual future path drawn into one camera image) and
    ``response_volume_NNNNN.png`` (the voxel distribution of one step, see ``para_core.eval.figures``).
    ``--write-chunks`` writes the predicted ``para_msgs/ActionChunk`` (``/para/action_chunk``) and their markers
    (``/para/markers``) as a new bag, stamped like the recording, to view next to it (Foxglove, rviz2 +
    ``ros2 bag play``): a path ending in ``.mcap`` gives one self-contained MCAP file, any other path a rosbag2
    directory.

``para-bag eval BAG --recorded-chunks [TOPIC]``
    No model: scores the ``ActionChunk`` messages a live run recorded in the bag (``para-deploy`` records
    ``/para/action_chunk``) against the same bag's TF, with the same metrics and plots (no overlays).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from para_core.eval import figures
from para_core.eval import metrics as ev
from para_core.eval.calibration import contact_sheet
from para_core.eval.method_figure import figure_numbers, method_figure_data, write_method_figure
from para_core.model.config import INFERENCE_DTYPES, PRESET_NAMES, V4Config
from para_core.model.policy import Policy
from para_ros.bag.play import BagPlayer, PlayOptions, parse_remaps
from para_ros.bag.reader import BagError, BagReader, make_typestore
from para_ros.bag.topic_options import add_topic_args, progress, topic_config
from para_ros.bag.view import argmax_voxels
from para_ros.commands import bag_lerobot_export, bag_view
from para_ros.commands.bag_extract import (
    extract,
    frame_timing,  # noqa: F401 - para-bag extract's timing, tested through this module
)
from para_ros.dds_env import apply_loopback_dds_env
from para_ros.ros_io.chunk_msg import action_chunk_msg
from para_ros.stamps import stamp_to_ns, stamp_to_s
from para_ros.viz.rerun_log import RerunLog

CHUNK_TOPIC = "/para/action_chunk"
MARKER_TOPIC = "/para/markers"


# ------------------------------------------------------------------------------------------------- calibration
def calib(args) -> int:
    """Calibration check: project the tool frame (TF) into each camera (CameraInfo + camera TF) over time."""

    views = tuple(v.strip() for v in args.views.split(",") if v.strip())
    if args.frames < 1:
        raise ValueError(f"--frames {args.frames}: use 1 or more")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with BagReader(args.bag, topic_config(args, views)) as bag:
        stamps = bag.pair_stamps()
        if not stamps:
            raise BagError(f"no scene/wrist pair in {args.bag}: {bag.stats.summary() or 'no images'}")
        picks = sorted({stamps[int(i)] for i in np.linspace(0, len(stamps) - 1, min(args.frames, len(stamps)))})
        frames = [
            {
                "stamp_ns": obs.stamp_ns,
                "T_world_ee": obs.T_world_ee,
                "images": {v: c.image_rgb for v, c in zip(views, obs.cameras)},
                "K": {v: c.K for v, c in zip(views, obs.cameras)},
                "T_world_cam": {v: c.T_world_cam for v, c in zip(views, obs.cameras)},
            }
            for obs in bag.observations(set(picks))
        ]
        report = contact_sheet(frames, views, out / "calibration_sheet.png")
        report.update(
            {"bag": str(Path(args.bag).resolve()), "ee_frame": bag.config.ee_frame, "camera_frames": bag.camera_frames}
        )
    (out / "calibration.json").write_text(json.dumps(report, indent=2))
    seen = {v: sum(f["views"][v]["in_image"] for f in report["frames"]) for v in views}
    print(
        f"calibration sheet: {out / 'calibration_sheet.png'} ({len(frames)} frames; tool frame inside the image: "
        + ", ".join(f"{v} {n}/{len(frames)}" for v, n in seen.items())
        + "). The magenta ring must sit on the gripper between the finger tips in every image; an extrinsic off by "
        "d metres moves it by about f * d / depth pixels."
    )
    return 0


# ---------------------------------------------------------------------------------------------------- figure
def figure(args) -> int:
    """The paper's method figure from one real inference step on frame ``--frame`` of a recording."""

    policy = load_policy(args)
    if not policy.model.has_voxel_volume:
        raise ValueError(
            f"model kind {policy.config.model_kind!r} has no voxel volume to draw; the figure is for "
            "checkpoints of a voxel-volume kind (para_v4, para_dino_kv)"
        )
    cfg = policy.config
    with BagReader(args.bag, topic_config(args, policy.view_names)) as bag:
        stamps = bag.pair_stamps()
        if not stamps:
            raise BagError(f"no camera pair in {args.bag}: {bag.stats.summary() or 'no images'}")
        if not 0 <= args.frame < len(stamps):
            raise ValueError(f"--frame {args.frame}: the recording has observations 0..{len(stamps) - 1}")
        obs = next(iter(bag.observations({stamps[args.frame]}, cfg.mv_past_n, cfg.step_dt_s)), None)
        if obs is None:
            raise BagError(f"frame {args.frame} has no complete observation: {bag.stats.summary()}")
        inputs = policy.preprocess(obs.cameras, obs.state)
        step = args.step % cfg.n_window
        gt, _, _ = _future_truth(bag, obs.stamp_ns, np.array([step * cfg.step_dt_s]))
    data = method_figure_data(policy.model, inputs, [c.image_rgb for c in obs.cameras], step=step, gt_xyz=gt[0])
    paths = write_method_figure(data, args.out)
    n = figure_numbers(data)
    print(
        f"method figure of frame {args.frame} (t = {obs.stamp_ns / 1e9:.3f} s), step {n['step']}: argmax at "
        f"{n['point_m']} m, bin height {n['bin_height_cm']} cm, top-1 {n['top1_prob_pct']} %; wrote "
        f"{paths['svg']}, {paths['npz']} and the panels in {args.out}"
    )
    return 0


# ---------------------------------------------------------------------------------------------------- ablate
ABLATION_COLUMNS = (
    ("position error mean cm", ("position_error_m", "all", "mean"), 100.0),
    ("position error median cm", ("position_error_m", "all", "median"), 100.0),
    ("position error p90 cm", ("position_error_m", "all", "p90"), 100.0),
    ("last step error mean cm", ("position_error_m", "per_step", -1, "mean"), 100.0),
    ("rotation error mean deg", ("rotation_error_deg", "all", "mean"), 1.0),
    ("gripper accuracy %", ("gripper_accuracy", "all"), 100.0),
)


def _dig(d, path):
    for key in path:
        if d is None:
            return None
        d = d[key] if isinstance(key, int) else d.get(key)
    return d


def ablation_table(rows: list[tuple[str, dict]]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the offline metrics of several checkpoints (``metrics.json`` dicts), side by side."""
    header = ["checkpoint", "model", "chunks"] + [name for name, _, _ in ABLATION_COLUMNS]
    table = []
    for label, m in rows:
        cells = [label, str(m.get("model_id", "")), str(m.get("chunks_evaluated", ""))]
        for _, path, scale in ABLATION_COLUMNS:
            v = _dig(m, path)
            cells.append("n/a" if v is None else f"{float(v) * scale:.2f}")
        table.append(cells)
    return header, table


def ablate(args) -> int:
    """Evaluate several checkpoints on the same recordings; one table of the offline metrics (stdout, CSV, MD)."""

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    labels = [Path(c).name if Path(c).name != "checkpoint" else Path(c).parent.name for c in args.checkpoints]
    if len(set(labels)) != len(labels):
        labels = [f"{i}:{label}" for i, label in enumerate(labels)]
    rows = []
    for bag in args.bags:
        for ckpt, label in zip(args.checkpoints, labels):
            sub = out / Path(bag).name / label.replace(":", "_").replace("/", "_")
            ev_args = build_parser().parse_args(
                [
                    "eval",
                    str(bag),
                    "--checkpoint",
                    str(ckpt),
                    "--out",
                    str(sub),
                    "--device",
                    args.device,
                    "--overlay-every",
                    "0",
                    "--response-volume-every",
                    "-1",
                    "--max-frames",
                    str(args.max_frames),
                    "--quiet",
                ]
            )
            evaluate(ev_args)
            rows.append(
                (
                    f"{label} @ {Path(bag).name}" if len(args.bags) > 1 else label,
                    json.loads((sub / "metrics.json").read_text()),
                )
            )
    header, table = ablation_table(rows)
    with open(out / "ablation.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *table])
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in table]
    (out / "ablation.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {out / 'ablation.csv'} and {out / 'ablation.md'}")
    return 0


# ------------------------------------------------------------------------------------------------------ play
def play(args) -> int:
    """Publish a recording into the live graph with its original timing (``para_ros.bag.play``)."""

    options = PlayOptions(
        bag=args.bag,
        rate=args.rate,
        start_offset_s=args.start_offset,
        loop=args.loop,
        clock=args.clock,
        clock_rate_hz=args.clock_rate,
        remaps=parse_remaps(args.remap),
        topics=tuple(args.topics or ()),
    )
    if not Path(args.bag).is_dir():
        raise BagError(f"{args.bag} is not a rosbag2 directory")
    apply_loopback_dds_env()
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        counts = BagPlayer(options, stop).run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    print("para-bag play: published " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    return 0


# ------------------------------------------------------------------------------------------------------ eval
def load_policy(args):
    device = None if args.device == "auto" else args.device
    fast = bool(getattr(args, "fast", False))
    if args.checkpoint:
        return Policy.from_checkpoint(args.checkpoint, device=device, dtype=args.dtype, fast=fast)
    print(
        f"warning: no --checkpoint: evaluating an UNTRAINED policy (preset {args.random_preset}, seed "
        f"{args.random_seed}); its numbers are a baseline, not a result",
        file=sys.stderr,
    )
    return Policy.random_init(
        V4Config.preset(args.random_preset), device=device, dtype=args.dtype, seed=args.random_seed, fast=fast
    )


class ChunkBagWriter:
    """Predicted chunks (+ markers) into a new bag: ``path.mcap`` -> one MCAP file; other paths -> rosbag2 dir."""

    def __init__(self, path: str | Path):
        from rosbags.rosbag2 import StoragePlugin, Writer  # rosbags: loaded on first use, not on import

        self.path = Path(path)
        self.single_file = self.path.suffix == ".mcap"
        self.bag_dir = self.path.with_name(self.path.name + ".d") if self.single_file else self.path
        for p in {self.path, self.bag_dir}:
            if p.exists():
                raise FileExistsError(f"{p} exists; remove it or choose another --write-chunks path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        store = make_typestore()
        self._writer = Writer(self.bag_dir, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._chunk_conn = self._writer.add_connection(CHUNK_TOPIC, "para_msgs/msg/ActionChunk", typestore=store)
        self._marker_conn = self._writer.add_connection(
            MARKER_TOPIC, "visualization_msgs/msg/MarkerArray", typestore=store
        )
        self.count = 0

    def write(self, stamp_ns: int, world_frame: str, ee_frame: str, model_id: str, out, ee_xyz) -> None:
        from rclpy.serialization import serialize_message  # rclpy: loaded on first use, not on import

        from para_ros.ros_io.rviz import chunk_markers  # rclpy: loaded on first use, not on import

        msg = action_chunk_msg(out, stamp_ns, world_frame, ee_frame, model_id)
        self._writer.write(self._chunk_conn, int(stamp_ns), serialize_message(msg))
        markers = chunk_markers(msg.header, out.positions_world, out.confidence, ee_xyz)
        self._writer.write(self._marker_conn, int(stamp_ns), serialize_message(markers))
        self.count += 1

    def close(self) -> Path:
        self._writer.close()
        if self.single_file:
            files = sorted(self.bag_dir.glob("*.mcap"))
            shutil.move(str(files[0]), str(self.path))
            shutil.rmtree(self.bag_dir)
        return self.path


def _future_truth(bag: BagReader, stamp_ns: int, offsets_s: np.ndarray):
    """Recorded EE positions (T, 3), rotations (T, 3, 3) and gripper (T,) at stamp + offsets (NaN: not recorded)."""
    T = len(offsets_s)
    pos, rot, grip = np.full((T, 3), np.nan), np.full((T, 3, 3), np.nan), np.full(T, np.nan)
    for i, off in enumerate(offsets_s):
        t = int(stamp_ns) + int(round(float(off) * 1e9))
        M = bag.try_lookup(bag.config.ee_frame, t)
        if M is None:
            continue
        pos[i], rot[i] = M[:3, 3], M[:3, :3]
        g = bag.gripper_at(t)
        grip[i] = np.nan if g is None else g
    return pos, rot, grip


def _new_record() -> dict:
    return {
        "stamps": [],
        "pred_pos": [],
        "pred_quat": [],
        "pred_grip": [],
        "conf": [],
        "gt_pos": [],
        "gt_rot": [],
        "gt_grip": [],
        "ee_pos": [],
        "offsets": [],
    }


def _append(rec: dict, bag: BagReader, stamp_ns: int, positions, quats, gripper, confidence, offsets, ee_xyz) -> None:
    gt_pos, gt_rot, gt_grip = _future_truth(bag, stamp_ns, offsets)
    for key, value in (
        ("stamps", stamp_ns),
        ("pred_pos", positions),
        ("pred_quat", quats),
        ("pred_grip", gripper),
        ("conf", confidence),
        ("gt_pos", gt_pos),
        ("gt_rot", gt_rot),
        ("gt_grip", gt_grip),
        ("ee_pos", ee_xyz),
        ("offsets", offsets),
    ):
        rec[key].append(np.asarray(value, dtype=np.int64 if key == "stamps" else np.float64))


def _replay(args, out_dir: Path) -> tuple[dict, str, dict]:
    """Run the policy over the bag's observations; returns the records, the model id and report context."""

    if args.threads:
        torch.set_num_threads(args.threads)
    policy = load_policy(args)
    cfg = policy.config
    overlay_view = args.overlay_view or policy.view_names[0]
    if overlay_view not in policy.view_names:
        raise ValueError(f"--overlay-view {overlay_view!r} is not a view of this policy {policy.view_names}")
    ov = policy.view_names.index(overlay_view)
    rec = _new_record()
    writer = ChunkBagWriter(args.write_chunks) if args.write_chunks else None
    viz = RerunLog(args.rerun) if getattr(args, "rerun", None) else None
    policy_errors: dict[str, int] = {}
    try:
        with BagReader(args.bag, topic_config(args, policy.view_names)) as bag:
            stamps = bag.pair_stamps()
            if not stamps:
                raise BagError(f"no scene/wrist pair in {args.bag}; check the image topics and --pair-slop-s")
            keep = stamps[: args.max_frames] if args.max_frames else stamps
            for obs in progress(
                bag.observations(set(keep), cfg.mv_past_n, cfg.step_dt_s), len(keep), "eval", args.quiet
            ):
                try:
                    out = policy.predict(obs.cameras, obs.state)
                except ValueError as exc:
                    policy_errors[str(exc)[:200]] = policy_errors.get(str(exc)[:200], 0) + 1
                    continue
                offsets = np.asarray(out.time_offsets_s, dtype=np.float64)
                i = len(rec["stamps"])
                _append(
                    rec,
                    bag,
                    obs.stamp_ns,
                    out.positions_world,
                    out.quaternions_xyzw,
                    out.gripper,
                    out.confidence,
                    offsets,
                    obs.T_world_ee[:3, 3],
                )
                if viz is not None:
                    viz.log_observation(obs, policy.view_names)
                    viz.log_policy_output(obs.stamp_ns, out, argmax_voxels(policy))
                if writer is not None:
                    writer.write(
                        obs.stamp_ns,
                        bag.config.world_frame,
                        bag.config.ee_frame,
                        policy.model_id,
                        out,
                        obs.T_world_ee[:3, 3],
                    )
                if args.overlay_every > 0 and i % args.overlay_every == 0:
                    cam = obs.cameras[ov]
                    dense = np.linspace(0.0, offsets[-1], 4 * len(offsets)) if offsets[-1] > 0 else offsets
                    actual, _, _ = _future_truth(bag, obs.stamp_ns, dense)
                    actual = actual[np.isfinite(actual[:, 0])]
                    img = figures.draw_path_overlay(
                        cam.image_rgb,
                        cam.K,
                        cam.T_world_cam,
                        [
                            figures.Path3D(actual, figures.ACTUAL_COLOUR, "actual future (TF)"),
                            figures.Path3D(out.positions_world, figures.PRED_COLOUR, "predicted chunk"),
                        ],
                        title=f"{overlay_view} t={(obs.stamp_ns - stamps[0]) / 1e9:.2f} s",
                    )
                    figures.save_rgb_png(out_dir / "overlays" / f"overlay_{i:05d}.png", img)
                rv_every = args.response_volume_every
                if (i == 0 and rv_every >= 0) or (rv_every > 0 and i % rv_every == 0):
                    _response_volume_figure(
                        policy, obs, obs.state, out_dir / f"response_volume_{i:05d}.png", args.response_volume_step
                    )
            context = {
                "reader_stats": bag.stats.summary(),
                "policy_refused": policy_errors,
                "world_frame": bag.config.world_frame,
                "ee_frame": bag.config.ee_frame,
                "image_topics": bag.image_topics,
                "source": "policy replay",
            }
    finally:
        chunks_path = writer.close() if writer is not None else None
        if viz is not None:
            viz.close()
    context["chunks_bag"] = str(chunks_path) if chunks_path else None
    if policy_errors and not rec["stamps"]:
        context["reader_stats"] += f"; policy refused: {policy_errors}"
    return rec, policy.model_id, context


def _recorded(args) -> tuple[dict, str, dict]:
    """Score the ActionChunks recorded in the bag (a live run) against the same bag's TF; no model, no images."""
    rec = _new_record()
    model_ids: set[str] = set()
    skipped = 0
    with BagReader(args.bag, topic_config(args, ("scene", "wrist")), cameras=False) as bag:
        cfg = bag.config
        for _, chunk in bag.messages(args.recorded_chunks, "para_msgs/msg/ActionChunk"):
            if args.max_frames and len(rec["stamps"]) >= args.max_frames:
                break
            n = len(chunk.poses)
            if n == 0 or len(chunk.time_from_stamp) != n or (rec["pred_pos"] and n != len(rec["pred_pos"][0])):
                skipped += 1
                continue
            if chunk.header.frame_id and chunk.header.frame_id != cfg.world_frame:
                raise BagError(
                    f"recorded chunks are in frame {chunk.header.frame_id!r}, the evaluation world frame "
                    f"is {cfg.world_frame!r}: pass --world-frame {chunk.header.frame_id}"
                )
            stamp = stamp_to_ns(chunk.header.stamp)
            pos = np.array([[p.position.x, p.position.y, p.position.z] for p in chunk.poses])
            quat = np.array([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in chunk.poses])
            offsets = np.array([stamp_to_s(d) for d in chunk.time_from_stamp])
            grip = np.asarray(chunk.gripper, dtype=np.float64)
            conf = np.asarray(chunk.confidence, dtype=np.float64)
            grip = grip if grip.size == n else np.full(n, np.nan)
            conf = conf if conf.size == n else np.full(n, np.nan)
            ee = bag.try_lookup(cfg.ee_frame, stamp)
            _append(rec, bag, stamp, pos, quat, grip, conf, offsets, np.full(3, np.nan) if ee is None else ee[:3, 3])
            model_ids.add(str(chunk.model_id))
        context = {
            "reader_stats": f"{len(rec['stamps'])} recorded chunks on {args.recorded_chunks}"
            + (f", {skipped} skipped (empty or a different length)" if skipped else ""),
            "world_frame": cfg.world_frame,
            "ee_frame": cfg.ee_frame,
            "source": "recorded chunks",
            "chunks_bag": None,
        }
    return rec, ",".join(sorted(model_ids)), context


def evaluate(args) -> int:
    out_dir = Path(args.out or f"para_eval_{Path(args.bag).resolve().name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.recorded_chunks:
        rec, model_id, context = _recorded(args)
    else:
        rec, model_id, context = _replay(args, out_dir)
    if not rec["stamps"]:
        raise BagError(f"no chunk could be evaluated on {args.bag}: {context['reader_stats']}")
    A = {k: np.stack(v) for k, v in rec.items()}
    offsets = np.median(A["offsets"], axis=0)  # (T,) identical for every chunk of one model
    pred_rot = Rotation.from_quat(A["pred_quat"].reshape(-1, 4)).as_matrix().reshape(*A["pred_quat"].shape[:2], 3, 3)
    errors = ev.chunk_errors(
        A["pred_pos"],
        pred_rot,
        A["pred_grip"],
        A["gt_pos"],
        A["gt_rot"],
        A["gt_grip"],
        gripper_threshold=args.gripper_threshold,
    )
    extra = dict(context)
    extra.update(
        {
            "bag": str(Path(args.bag).resolve()),
            "gripper_threshold": args.gripper_threshold,
            "ground_truth": f"TF {context['world_frame']} <- {context['ee_frame']} at stamp + time_offset_i "
            "(tf2 interpolation); gripper: joint_states sample-and-hold; steps beyond the "
            "recording are left out",
        }
    )
    metrics = ev.metrics_dict(errors, offsets, model_id=model_id, extra=extra)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    np.savez_compressed(
        out_dir / "chunks.npz",
        stamps_ns=A["stamps"],
        pred_positions=A["pred_pos"],
        pred_quaternions_xyzw=A["pred_quat"],
        pred_gripper=A["pred_grip"],
        confidence=A["conf"],
        gt_positions=A["gt_pos"],
        gt_rotations=A["gt_rot"],
        gt_gripper=A["gt_grip"],
        time_offsets_s=A["offsets"],
        position_error_m=errors.position_m,
        rotation_error_deg=errors.rotation_deg,
    )
    figures.plot_error_per_step(
        metrics["position_error_m"]["per_step"],
        offsets,
        out_dir / "error_per_step.png",
        title=f"position error per step ({model_id})",
        unit="cm",
        scale=100.0,
    )
    figures.plot_error_per_step(
        metrics["rotation_error_deg"]["per_step"],
        offsets,
        out_dir / "rotation_error_per_step.png",
        title="rotation error per step",
        unit="deg",
    )
    last = A["pred_pos"][:, -1]
    figures.plot_trajectory(
        A["stamps"],
        A["ee_pos"],
        A["pred_pos"][:, 0],
        out_dir / "trajectory.png",
        extra=[(last, f"predicted (step {len(offsets) - 1}, +{offsets[-1]:.2f} s)", float(offsets[-1]))],
    )
    all_pos = metrics["position_error_m"]["all"]
    chunks_path = context.get("chunks_bag")
    print(
        f"evaluated {metrics['chunks_evaluated']} chunks ({model_id}): position error mean "
        f"{_fmt(all_pos['mean'], 100)} cm, median {_fmt(all_pos['median'], 100)} cm, p90 {_fmt(all_pos['p90'], 100)}"
        f" cm; gripper accuracy {_fmt(metrics['gripper_accuracy']['all'], 100)} %; wrote {out_dir}"
        + (f" and {chunks_path}" if chunks_path else "")
    )
    return 0


def _fmt(v, scale=1.0) -> str:
    return "n/a" if v is None else f"{v * scale:.2f}"


def _response_volume_figure(policy, obs, state, path: Path, step: int) -> None:
    out = policy.last_output
    if out is None or not policy.model.has_voxel_volume:  # e.g. the coordinate-regression baseline: no volume
        return
    with torch.inference_mode():
        feats = policy.model.feature_maps(policy.preprocess(obs.cameras, state))  # (1, N, F, P, P)
    T = out.volume_logits.shape[1]
    data = figures.response_volume_data(out, step=min(max(step, 0), T - 1) if step >= 0 else T - 1, feature_maps=feats)
    figures.plot_response_volume(obs.cameras[data.view].image_rgb, data, path, view_name=policy.view_names[data.view])


# ------------------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="para-bag",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="rosbag2 -> para_core Episode directory (training data)")
    ex.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    ex.add_argument("--out", required=True, help="episode directory to write")
    ex.add_argument("--fps", type=float, default=30.0, help="target frame rate by stamp (0: keep every pair)")
    ex.add_argument("--max-frames", type=int, default=0, help="stop after this many frames (0: all)")
    ex.add_argument("--views", default="scene,wrist", help="comma-separated camera views, in policy order")
    ex.add_argument("--quiet", action="store_true", help="no progress bar")
    ex.add_argument(
        "--calibration",
        default="",
        help="the calibration.yaml the recording used (para-calib solve); "
        "kept next to the episode and in its meta.json, and by para-train in the checkpoint's "
        "recipe.json (default: calibration.yaml inside the bag directory, if any)",
    )
    add_topic_args(ex)
    ca = sub.add_parser(
        "calib",
        help="calibration check: the tool frame (TF) projected into each camera over time (contact sheet PNG + JSON)",
    )
    ca.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    ca.add_argument("--out", required=True, help="output directory")
    ca.add_argument("--frames", type=int, default=8, help="frames on the sheet, evenly over the recording")
    ca.add_argument("--views", default="scene,wrist", help="comma-separated camera views")
    add_topic_args(ca)
    fg = sub.add_parser("figure", help="the paper's method figure (6 panels, SVG + NPZ) from one inference step")
    fg.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    src = fg.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="checkpoint directory (para_v4 or para_dino_kv)")
    src.add_argument("--random-preset", choices=PRESET_NAMES, help="an UNTRAINED random policy")
    fg.add_argument("--random-seed", type=int, default=0)
    fg.add_argument("--frame", type=int, default=0, help="observation index in the recording (default 0)")
    fg.add_argument("--step", type=int, default=-1, help="chunk step to show (-1: the last)")
    fg.add_argument("--out", required=True, help="output directory")
    fg.add_argument("--device", default="auto")
    fg.add_argument("--dtype", default="fp32", choices=INFERENCE_DTYPES)
    add_topic_args(fg)
    ab = sub.add_parser(
        "ablate",
        help="evaluate several checkpoints on the same recordings: one table of the "
        "offline metrics side by side (stdout, CSV, Markdown)",
    )
    ab.add_argument("bags", nargs="+", help="rosbag2 directories")
    ab.add_argument("--checkpoints", nargs="+", required=True, help="checkpoint directories to compare")
    ab.add_argument("--out", required=True, help="output directory (per-checkpoint eval folders + ablation.*)")
    ab.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ab.add_argument("--max-frames", type=int, default=0, help="evaluate at most this many observations (0: all)")
    pl = sub.add_parser(
        "play", help="publish a recording into the live graph with its original timing (ros2 bag play without ROS)"
    )
    pl.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    pl.add_argument("--rate", type=float, default=1.0, help="playback speed factor (default 1)")
    pl.add_argument("--start-offset", type=float, default=0.0, help="skip this many seconds of the recording")
    pl.add_argument("--loop", action="store_true", help="replay until Ctrl-C")
    pl.add_argument(
        "--clock",
        action="store_true",
        help="publish /clock of the recording's time (run the nodes with use_sim_time:=true)",
    )
    pl.add_argument("--clock-rate", type=float, default=100.0, help="/clock rate, Hz (default 100)")
    pl.add_argument(
        "--remap", nargs="*", metavar="FROM:=TO", help="topic remaps, e.g. /cam/image:=/scene_cam/image_raw"
    )
    pl.add_argument("--topics", nargs="*", help="only these topics (default all)")
    ev = sub.add_parser("eval", help="replay a recording through a policy and score it against the recorded TF")
    ev.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    src = ev.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="checkpoint directory (model.safetensors + config.json)")
    src.add_argument("--random-preset", choices=PRESET_NAMES, help="an UNTRAINED random policy (baseline/tests)")
    src.add_argument(
        "--recorded-chunks",
        nargs="?",
        const=CHUNK_TOPIC,
        metavar="TOPIC",
        help=f"no model: score the ActionChunks recorded in the bag (a live run; default topic "
        f"{CHUNK_TOPIC}) against its TF; needs only TF (+ joint states)",
    )
    ev.add_argument("--random-seed", type=int, default=0)
    ev.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ev.add_argument("--dtype", default="fp32", choices=INFERENCE_DTYPES)
    ev.add_argument(
        "--fast",
        action="store_true",
        help="the model's fast inference path (para_core.model.v4_fast; "
        "the same voxels as the reference path, tested), as the node's fast_path parameter",
    )
    ev.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    ev.add_argument("--out", default=None, help="output directory (default ./para_eval_<bag name>)")
    ev.add_argument("--max-frames", type=int, default=0, help="evaluate at most this many observations (0: all)")
    ev.add_argument("--overlay-every", type=int, default=10, help="one overlay image per N chunks (0: none)")
    ev.add_argument("--overlay-view", default=None, help="view to draw overlays into (default: the first view)")
    ev.add_argument(
        "--response-volume-every",
        type=int,
        default=0,
        help="response-volume figure every N chunks (0: only the first chunk; -1: none)",
    )
    ev.add_argument("--response-volume-step", type=int, default=-1, help="chunk step to show (-1: the last)")
    ev.add_argument("--gripper-threshold", type=float, default=0.5, help="opening >= this counts as open")
    ev.add_argument(
        "--write-chunks",
        default=None,
        metavar="OUT.mcap",
        help="write the predicted ActionChunks + markers as a bag (.mcap: one file; else a directory)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.add_argument(
        "--rerun",
        default=None,
        metavar="FILE.rrd",
        help="also write a rerun recording: posed cameras, "
        "trajectory, each chunk's path and argmax voxels, voxel cloud (open with: rerun FILE.rrd); "
        "with a policy (for --recorded-chunks use 'para-bag view')",
    )
    add_topic_args(ev)
    bag_lerobot_export.add_parsers(sub)
    bag_view.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        handler = (
            getattr(args, "func", None)
            or {"extract": extract, "calib": calib, "play": play, "eval": evaluate, "ablate": ablate, "figure": figure}[
                args.command
            ]
        )
        return handler(args)
    except (BagError, FileExistsError, FileNotFoundError, ImportError, ValueError) as exc:
        print(f"para-bag {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
