"""``para-bag export-lerobot``: recordings / episodes -> LeRobotDataset v3 (``import-lerobot``: ``lerobot_import``).

``para-bag export-lerobot INPUT... --out DIR [--task "pick up the cube"] [--calibration calibration.yaml] [--force]``
    Each INPUT is a recording (rosbag2 directory: extracted first, exactly as ``para-bag extract`` does, with the
    same ``--fps`` / topic options) or an episode directory / a folder of them. Writes one LeRobotDataset v3 with
    LeRobot's own writer (layout: ``para_core.data.lerobot_dataset``): a video per camera, tool pose + gripper as
    ``observation.state``, the next frame's as ``action``, per-frame intrinsics and camera poses in base, exact tool
    poses and stamps, the calibration file's content in ``meta/info.json``. Refuses an existing ``--out`` without
    ``--force``. Without ``--task``, the task of the recordings' ``teleop.json`` (``para-teleop``), when they
    all have the same one.

``para-bag import-lerobot``: see ``para_ros.commands.bag_lerobot_import``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from para_core.calibration.calibration_file import load_calibration
from para_core.data.dataset import Episode, find_episode_dirs, is_episode_dir
from para_core.data.lerobot_compat import open_line
from para_core.data.lerobot_dataset import write_lerobot_dataset
from para_ros.bag.topic_options import add_topic_args
from para_ros.commands import bag_lerobot_import as lerobot_import
from para_ros.commands.bag_extract import extract
from para_ros.robot.lerobot_yam import wrist_mount_record


def _episodes_from_inputs(args) -> list:
    """Episodes of every INPUT: recordings extracted with ``para-bag extract``'s code, episode dirs loaded."""

    episodes = []
    with tempfile.TemporaryDirectory(prefix="para_export_") as tmp:
        for i, item in enumerate(args.inputs):
            path = Path(item)
            if not path.exists():
                raise FileNotFoundError(f"{path} does not exist; pass recordings or episode directories")
            if (path / "metadata.yaml").is_file() or path.suffix in (".mcap", ".db3"):
                ns = argparse.Namespace(**vars(args))
                ns.bag, ns.out, ns.max_frames = str(path), str(Path(tmp) / f"episode_{i:04d}"), 0
                extract(ns)
                episodes.append(Episode.load(ns.out))
            elif is_episode_dir(path) or path.is_dir():
                episodes.extend(Episode.load(p) for p in find_episode_dirs(path))
            else:
                raise FileNotFoundError(f"{path} is neither a recording (metadata.yaml) nor an episode directory")
    return episodes


def recorded_task(inputs) -> str:
    """The one task of the recordings' ``teleop.json`` files (``para-teleop`` writes one into each recording).

    :raises ValueError: an input without one, or recordings of different tasks (the fix: ``--task``)."""
    tasks = {}
    for item in inputs:
        meta = Path(item) / "teleop.json"
        if not meta.is_file():
            raise ValueError(f"--task is needed: {item} has no teleop.json to take the task from")
        tasks[str(item)] = json.loads(meta.read_text()).get("task", "")
    if len(set(tasks.values())) != 1 or not next(iter(tasks.values())).strip():
        raise ValueError(f"--task is needed: the recordings' teleop.json name tasks {sorted(set(tasks.values()))}")
    return next(iter(tasks.values()))


def export_lerobot(args) -> int:
    out = Path(args.out)
    if out.exists() and not args.force:  # before the (long) extraction
        raise FileExistsError(f"{out} exists; pass --force to replace it (nothing was written)")
    if not args.task:
        args.task = recorded_task(args.inputs)
    calibration_file = load_calibration(args.calibration) if args.calibration else None
    calibration = calibration_file.to_dict() if calibration_file is not None else None
    episodes = _episodes_from_inputs(args)
    views = tuple(v.strip() for v in args.views.split(",") if v.strip())
    for ep in episodes:
        if ep.view_names != views:
            raise ValueError(f"an episode has views {list(ep.view_names)}, --views asks for {list(views)}")
    write_lerobot_dataset(
        episodes,
        out,
        task=args.task,
        repo_id=args.repo_id,
        calibration=calibration,
        force=args.force,
        vcodec=args.vcodec,
        progress=None if args.quiet else (lambda e, n: print(f"[export-lerobot] episode {e + 1}/{n}", file=sys.stderr)),
    )
    if "wrist" in views:  # the wrist mount beside the scene camera, from the file or else from the data
        info_path = out / "meta" / "info.json"
        info = json.loads(info_path.read_text())
        info["para"]["wrist_mount"] = wrist_mount_record(episodes, calibration_file, args.yam_config)
        info_path.write_text(json.dumps(info, indent=4))
    n = sum(len(e) for e in episodes)
    print(f"wrote {len(episodes)} episode(s), {n} frames, views {list(views)} as a LeRobotDataset v3 to {out}")
    print(f"open it in Python (LeRobot's LeRobotDataset, here without torchvision): {open_line(out, args.repo_id)}")
    return 0


def add_parsers(sub) -> None:
    """Register ``export-lerobot`` and ``import-lerobot`` on para-bag's subparsers."""
    ex = sub.add_parser("export-lerobot", help="recordings or episodes -> a LeRobotDataset v3 directory")
    ex.add_argument("inputs", nargs="+", help="rosbag2 directories and/or episode directories (or folders of them)")
    ex.add_argument("--out", required=True, help="dataset directory to write")
    ex.add_argument(
        "--task",
        default="",
        help="the task in words, stored with every frame (default: the recordings' teleop.json task, para-teleop)",
    )
    ex.add_argument("--calibration", default=None, metavar="FILE", help="calibration.yaml to store in the metadata")
    ex.add_argument("--repo-id", default="local/para_export", help="LeRobot repo id (name only; nothing is uploaded)")
    ex.add_argument("--vcodec", default="libsvtav1", help="video codec (LeRobot's default libsvtav1; h264)")
    ex.add_argument("--force", action="store_true", help="replace an existing --out")
    ex.add_argument("--fps", type=float, default=30.0, help="recordings: extraction rate by stamp (0: every pair)")
    ex.add_argument("--views", default="scene,wrist", help="camera views, in policy order")
    ex.add_argument("--quiet", action="store_true", help="no progress")
    ex.add_argument("--yam-config", default=None, help="yam.yaml for the model (gripper -> tool site of the mount)")
    add_topic_args(ex)
    ex.set_defaults(func=export_lerobot)
    lerobot_import.add_parser(sub)
