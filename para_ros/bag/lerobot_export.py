"""``para-bag export-lerobot`` and ``para-bag import-lerobot``: recordings / episodes <-> LeRobotDataset v3.

``para-bag export-lerobot INPUT... --out DIR --task "pick up the cube" [--calibration calibration.yaml] [--force]``
    Each INPUT is a recording (rosbag2 directory: extracted first, exactly as ``para-bag extract`` does, with the
    same ``--fps`` / topic options) or an episode directory / a folder of them. Writes one LeRobotDataset v3 with
    LeRobot's own writer (layout: ``para_core.data.lerobot_dataset``): a video per camera, tool pose + gripper as
    ``observation.state``, the next frame's as ``action``, per-frame intrinsics and camera poses in base, exact tool
    poses and stamps, the calibration file's content in ``meta/info.json``. Refuses an existing ``--out`` without
    ``--force``.

``para-bag import-lerobot DATASET --out EPISODES [--calibration calibration.yaml] [--camera-key VIEW=KEY] ...``
    A LeRobotDataset v3 -> PARA episode directories (what ``para-train --data`` reads). Exports of this package
    carry their calibration; a dataset recorded with LeRobot's YAM plugins (joint positions, two cameras) needs
    ``--calibration`` (scene camera pose, wrist mount) and intrinsics (a camera's ``camera_matrix`` in the
    calibration file, or ``--intrinsics VIEW=fx,fy,cx,cy``, which wins): joint positions become tool and wrist-camera
    poses by the YAM's kinematics.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from para_core.calibration.calibration_file import load_calibration
from para_core.data.dataset import Episode, find_episode_dirs, is_episode_dir
from para_core.data.lerobot_dataset import (
    YAM_GRIPPER_NAME,
    YAM_JOINT_NAMES,
    LeRobotImportOptions,
    read_lerobot_episodes,
    video_image_wh,
    write_lerobot_dataset,
)
from para_ros.bag.extraction import add_topic_args, extract
from para_ros.observation.camera_model import ros_K_to_para
from para_ros.robot.lerobot_yam import ignored_distortion, intrinsics_from_calibration, yam_joints_to_poses


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


def export_lerobot(args) -> int:
    out = Path(args.out)
    if out.exists() and not args.force:  # before the (long) extraction
        raise FileExistsError(f"{out} exists; pass --force to replace it (nothing was written)")
    calibration = None
    if args.calibration:
        calibration = load_calibration(args.calibration).to_dict()
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
    n = sum(len(e) for e in episodes)
    print(
        f"wrote {len(episodes)} episode(s), {n} frames, views {list(views)} as a LeRobotDataset v3 to {out} "
        f"(open with lerobot.datasets.lerobot_dataset.LeRobotDataset('{args.repo_id}', root='{out}'))"
    )
    return 0


def _intrinsics(items) -> dict[str, np.ndarray]:
    """``--intrinsics VIEW=fx,fy,cx,cy`` (OpenCV / CameraInfo convention, as a calibration file's ``camera_matrix``)
    -> view -> (3, 3) K in ``para_core``'s pixel convention."""
    out = {}
    for item in items or []:
        view, _, values = item.partition("=")
        try:
            fx, fy, cx, cy = (float(x) for x in values.split(","))
        except ValueError:
            raise ValueError(
                f"--intrinsics {item!r}: use VIEW=fx,fy,cx,cy (pixels), e.g. scene=400,400,319.5,239.5"
            ) from None
        if not (fx > 0 and fy > 0 and np.isfinite([fx, fy, cx, cy]).all()):
            raise ValueError(f"--intrinsics {item!r}: the focal lengths fx, fy must be > 0 and all values finite")
        out[view] = ros_K_to_para(np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]]))
    return out


def import_options(args, calibration=None):
    """LeRobotImportOptions from the command line; ``calibration`` (a loaded ``CalibrationFile``) supplies the
    intrinsics of the views ``--intrinsics`` leaves out, from its cameras' ``camera_matrix``."""
    keys = {}
    for item in args.camera_key or []:
        view, sep, key = item.partition("=")
        if not sep:
            raise ValueError(f"--camera-key {item!r}: use VIEW=FEATURE, e.g. scene=observation.images.top")
        keys[view] = key
    options = LeRobotImportOptions(
        view_names=tuple(v.strip() for v in args.views.split(",") if v.strip()),
        camera_keys=keys,
        state_key=args.state_key,
        joint_names=tuple(args.joint_names.split(",")),
        joint_unit=args.joint_unit,
        gripper_name=args.gripper_name,
        gripper_scale=args.gripper_scale,
        intrinsics=_intrinsics(args.intrinsics),
    )
    if calibration is not None:
        views = [v for v in options.view_names if v not in options.intrinsics]
        options.intrinsics = {
            **intrinsics_from_calibration(calibration, views, video_image_wh(args.dataset, options)),
            **options.intrinsics,
        }
        for warning in ignored_distortion(calibration, views):
            print(f"[import-lerobot] warning: {warning}", file=sys.stderr)
    return options


def import_lerobot(args) -> int:
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise FileExistsError(f"{out} is not empty; pass --force to write into it")
    calibration = None
    if args.calibration:
        calibration = load_calibration(args.calibration)
    options = import_options(args, calibration)
    joints_to_poses = None
    if calibration is not None:
        joints_to_poses = yam_joints_to_poses(calibration, options.view_names, args.yam_config)
    episodes = read_lerobot_episodes(args.dataset, options, joints_to_poses)
    for i, ep in enumerate(episodes):
        ep.save(out / f"episode_{i:04d}")
    print(
        f"wrote {len(episodes)} episode(s), {sum(len(e) for e in episodes)} frames to {out} "
        f"(train: para-train --data {out} --out RUN)"
    )
    return 0


def add_import_args(p: argparse.ArgumentParser) -> None:
    """The options that say how to read a LeRobot dataset (defaults fit LeRobot's YAM plugins)."""
    g = p.add_argument_group("LeRobot dataset layout (defaults: LeRobot's YAM plugins)")
    g.add_argument("--views", default="scene,wrist", help="camera views, in policy order")
    g.add_argument(
        "--camera-key",
        action="append",
        metavar="VIEW=FEATURE",
        help="video feature of a view (default observation.images.VIEW), e.g. scene=observation.images.top",
    )
    g.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="calibration.yaml (para_calibration: 1): scene camera pose and wrist mount, for datasets "
        "without camera poses (joint positions -> poses by the YAM's kinematics)",
    )
    g.add_argument(
        "--intrinsics",
        action="append",
        metavar="VIEW=fx,fy,cx,cy",
        help="pinhole intrinsics at the dataset's image size, OpenCV / CameraInfo convention (as "
        "camera_matrix in the calibration file, which they override)",
    )
    g.add_argument("--state-key", default="observation.state", help="feature with the joint positions")
    g.add_argument(
        "--joint-names",
        default=",".join(YAM_JOINT_NAMES),
        help="the 6 arm joints' names in the state feature, in chain order",
    )
    g.add_argument("--joint-unit", choices=("deg", "rad"), default="deg", help="unit of the joint positions")
    g.add_argument("--gripper-name", default=YAM_GRIPPER_NAME, help="gripper's name in the state ('' = none)")
    g.add_argument("--gripper-scale", type=float, default=100.0, help="value of a fully open gripper (YAM: 100)")
    g.add_argument("--yam-config", default=None, help="yam.yaml for the model and the default wrist mount")


def add_parsers(sub) -> None:
    """Register ``export-lerobot`` and ``import-lerobot`` on para-bag's subparsers."""
    ex = sub.add_parser("export-lerobot", help="recordings or episodes -> a LeRobotDataset v3 directory")
    ex.add_argument("inputs", nargs="+", help="rosbag2 directories and/or episode directories (or folders of them)")
    ex.add_argument("--out", required=True, help="dataset directory to write")
    ex.add_argument("--task", required=True, help="the task in words, stored with every frame")
    ex.add_argument("--calibration", default=None, metavar="FILE", help="calibration.yaml to store in the metadata")
    ex.add_argument("--repo-id", default="local/para_export", help="LeRobot repo id (name only; nothing is uploaded)")
    ex.add_argument("--vcodec", default="libsvtav1", help="video codec (LeRobot's default libsvtav1; h264)")
    ex.add_argument("--force", action="store_true", help="replace an existing --out")
    ex.add_argument("--fps", type=float, default=30.0, help="recordings: extraction rate by stamp (0: every pair)")
    ex.add_argument("--views", default="scene,wrist", help="camera views, in policy order")
    ex.add_argument("--quiet", action="store_true", help="no progress")
    add_topic_args(ex)
    ex.set_defaults(func=export_lerobot)
    im = sub.add_parser("import-lerobot", help="a LeRobotDataset v3 -> PARA episode directories (training data)")
    im.add_argument("dataset", help="LeRobotDataset v3 directory (meta/info.json)")
    im.add_argument("--out", required=True, help="folder for the episode directories")
    im.add_argument("--force", action="store_true", help="write into a non-empty --out")
    add_import_args(im)
    im.set_defaults(func=import_lerobot)
