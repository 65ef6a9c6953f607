"""``para-bag extract``'s procedure: a recording -> one ``para_core.data.dataset.Episode`` directory, with the
calibration it was recorded with next to it (the command's parser: ``para_ros.commands.bag``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from para_core.data.dataset import Episode
from para_ros.bag.reader import BagError, BagReader, select_by_fps
from para_ros.bag.topic_options import progress, topic_config
from para_ros.calibration.consumers import file_record, keep_next_to
from para_ros.calibration.consumers import load as load_calibration_file

# --------------------------------------------------------------------------------------------------- extract
GAP_FACTOR = 1.5  # a spacing longer than 1.5 measured periods is a gap (at least one frame missing)


def frame_timing(stamps_ns) -> dict:
    """Measured rate and gaps of an episode's stamps: ``{"measured_fps": 1 / median spacing, "max_spacing_s",
    "gaps": {"count", "largest_s", "threshold_s"}}`` (a gap: a spacing longer than ``GAP_FACTOR`` median spacings;
    ``largest_s`` is 0 without gaps). Fewer than two frames: measured_fps and threshold_s are None."""
    steps_ns = np.diff(np.asarray(stamps_ns, dtype=np.int64)).astype(np.float64)  # (N - 1,)
    if steps_ns.size == 0:
        return {"measured_fps": None, "max_spacing_s": 0.0, "gaps": {"count": 0, "largest_s": 0.0, "threshold_s": None}}
    period_ns = float(np.median(steps_ns))
    threshold_ns = GAP_FACTOR * period_ns
    gaps_ns = steps_ns[steps_ns > threshold_ns]  # (n_gaps,)
    return {
        "measured_fps": 1e9 / period_ns,
        "max_spacing_s": float(steps_ns.max()) * 1e-9,
        "gaps": {
            "count": int(gaps_ns.size),
            "largest_s": float(gaps_ns.max()) * 1e-9 if gaps_ns.size else 0.0,
            "threshold_s": threshold_ns * 1e-9,
        },
    }


def extract(args) -> int:
    views = tuple(v.strip() for v in args.views.split(",") if v.strip())
    with BagReader(args.bag, topic_config(args, views)) as bag:
        stamps = bag.pair_stamps()
        if not stamps:
            raise BagError(
                f"no scene/wrist pair in {args.bag}: {bag.stats.summary() or 'no images'}; check the "
                "image topics and --pair-slop-s"
            )
        keep = select_by_fps(stamps, args.fps)
        if args.max_frames:
            keep = keep[: args.max_frames]
        # Preallocated on the first frame (an episode of images can be GBs: no list + np.stack copy).
        n_max, n = len(keep), 0
        arrays: dict[str, np.ndarray] = {}
        for obs in progress(bag.observations(set(keep)), len(keep), "extract", args.quiet):
            if not arrays:
                arrays = {
                    "stamps": np.zeros(n_max, np.int64),
                    "T_ee": np.zeros((n_max, 4, 4)),
                    "grip": np.zeros(n_max),
                    "pair_gap_ns": np.zeros(n_max, np.int64),
                }
                for v, cam in zip(views, obs.cameras):
                    arrays[f"img.{v}"] = np.zeros((n_max, *cam.image_rgb.shape), np.uint8)
                    arrays[f"K.{v}"] = np.zeros((n_max, 3, 3))
                    arrays[f"T_cam.{v}"] = np.zeros((n_max, 4, 4))
            for v, cam in zip(views, obs.cameras):
                if cam.image_rgb.shape != arrays[f"img.{v}"].shape[1:]:
                    raise BagError(
                        f"the {v} image size changes at t={obs.stamp_ns / 1e9:.3f} s "
                        f"({arrays[f'img.{v}'].shape[1:]} -> {cam.image_rgb.shape}); an episode needs one "
                        "size per view: split the bag there"
                    )
                arrays[f"img.{v}"][n] = cam.image_rgb
                arrays[f"K.{v}"][n] = cam.K
                arrays[f"T_cam.{v}"][n] = cam.T_world_cam
            arrays["stamps"][n] = obs.stamp_ns
            arrays["T_ee"][n] = obs.T_world_ee
            arrays["grip"][n] = obs.gripper
            arrays["pair_gap_ns"][n] = obs.pair_gap_ns
            n += 1
        if n == 0:
            raise BagError(f"no observation could be built from {args.bag}: {bag.stats.summary()}")
        source_rate = (len(stamps) - 1) / max((stamps[-1] - stamps[0]) / 1e9, 1e-9) if len(stamps) > 1 else 0.0
        timing = frame_timing(arrays["stamps"][:n])
        fallback = float(args.fps) if args.fps and args.fps > 0 else (source_rate or 1.0)
        fps = timing["measured_fps"] or fallback  # one frame: no spacing to measure
        cfg = bag.config
        calibration = _recording_calibration(args)
        meta = {
            "source_bag": str(Path(args.bag).resolve()),
            "extracted_by": "para-bag extract",
            "image_topics": bag.image_topics,
            "info_topics": cfg.info_topics,
            "camera_frames": bag.camera_frames,
            "world_frame": cfg.world_frame,
            "ee_frame": cfg.ee_frame,
            "gripper_joint": cfg.gripper_joint,
            "has_gripper": bag.has_gripper,
            "pair_slop_s": cfg.pair_slop_s,
            "pairing_rule": "nearest: each other's nearest frames within pair_slop_s, ties to the newer frame",
            "pair_gap_ns": arrays["pair_gap_ns"][:n].tolist(),  # per frame: newest minus oldest image stamp
            "pair_gap_s": {
                "max": float(arrays["pair_gap_ns"][:n].max()) * 1e-9,
                "median": float(np.median(arrays["pair_gap_ns"][:n])) * 1e-9,
            },
            "source_pair_rate_hz": source_rate,
            "pairs_in_bag": len(stamps),
            "requested_fps": args.fps,
            "measured_fps": timing["measured_fps"],
            "max_spacing_s": timing["max_spacing_s"],
            "gaps": timing["gaps"],
            "reader_stats": bag.stats.summary(),
        }
        if calibration is not None:
            meta["calibration"] = {**file_record(calibration), "source": str(Path(calibration).resolve())}
        episode = Episode(
            view_names=views,
            stamps_ns=arrays["stamps"][:n],
            images={v: arrays[f"img.{v}"][:n] for v in views},
            K={v: arrays[f"K.{v}"][:n] for v in views},
            T_world_cam={v: arrays[f"T_cam.{v}"][:n] for v in views},
            T_world_ee=arrays["T_ee"][:n],
            gripper=arrays["grip"][:n],
            fps=fps,
            meta=meta,
        )
        out = episode.save(args.out)
        if calibration is not None:
            print(f"kept the recording's calibration {calibration} as {keep_next_to(calibration, out)}")
        if not bag.has_gripper:
            print(
                f"warning: no '{cfg.gripper_joint}' joint in {cfg.joint_states_topic}: gripper stored as 1.0 (open)",
                file=sys.stderr,
            )
        if (
            args.fps
            and args.fps > 0
            and timing["measured_fps"]
            and abs(timing["measured_fps"] - args.fps) > 0.01 * args.fps
        ):
            print(
                f"warning: the kept frames run at {timing['measured_fps']:.4g} Hz, not the requested --fps "
                f"{args.fps:g} (the recording is slower); stored fps={timing['measured_fps']:.4g}, training "
                "resamples the targets by stamps",
                file=sys.stderr,
            )
        gaps = timing["gaps"]
        print(
            f"wrote {len(episode)} frames ({episode.duration_s:.2f} s, measured {episode.fps:.4g} fps, "
            f"{gaps['count']} gap(s)"
            + (f", largest {gaps['largest_s']:.3f} s" if gaps["count"] else "")
            + f", max pair gap {meta['pair_gap_s']['max'] * 1e3:.1f} ms) to {out}; {bag.stats.summary()}"
        )
    return 0


def _recording_calibration(args) -> Path | None:
    """The calibration.yaml the recording used: ``--calibration``, else ``calibration.yaml`` inside the bag directory
    (validated), else None."""
    path = Path(args.calibration) if getattr(args, "calibration", "") else Path(args.bag) / "calibration.yaml"
    if not path.is_file():
        if getattr(args, "calibration", ""):
            raise BagError(f"--calibration {args.calibration}: no such file")
        return None
    load_calibration_file(path)  # a broken file is refused (CalibrationError is a ValueError), nothing written
    return path
