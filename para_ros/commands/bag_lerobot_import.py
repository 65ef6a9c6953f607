"""``para-bag import-lerobot``: a LeRobotDataset v3 -> PARA episode directories (what ``para-train --data`` reads).

``para-bag import-lerobot DATASET --out EPISODES [--layout NAME] [--calibration calibration.yaml] [--camera-key
VIEW=KEY] ...``
    Exports of this package carry their calibration (poses per frame, intrinsics). A dataset recorded with LeRobot's
    YAM plugins (joint positions, two cameras) needs its layout (``--layout``: joint names, unit, gripper scale; the
    profiles of ``para_ros.robot.lerobot_yam_layouts``), ``--calibration`` (scene camera pose, wrist mount) and
    intrinsics (a camera's ``camera_matrix`` in the calibration file, or ``--intrinsics VIEW=fx,fy,cx,cy``, which
    wins): joint positions become tool and wrist-camera poses by the YAM's kinematics. The dataset is checked against
    the layout first (names, camera keys, every joint value inside the arm's range in the layout's unit); a dataset
    that does not fit is refused with what was expected and what it has, and nothing is written.

Each imported episode's ``meta`` holds the calibration it was built with (``meta.calibration``: file name, sha256 and
the full content: both cameras, the wrist mount, intrinsics, residuals), so ``para-train`` records it in the
checkpoint's ``recipe.json`` (``para_core.train.calibration_record``), and the layout it was read with
(``meta.lerobot_layout``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from para_core.calibration.calibration_file import load_calibration
from para_core.data.lerobot_dataset import (
    K_KEY,
    T_KEY,
    TOOL_KEY,
    LeRobotImportOptions,
    read_lerobot_episodes,
    video_image_wh,
)
from para_core.train.calibration_record import lerobot_export_record
from para_ros.calibration.consumers import file_record
from para_ros.observation.camera_model import ros_K_to_para
from para_ros.robot.lerobot_yam import ignored_distortion, intrinsics_from_calibration, yam_joints_to_poses
from para_ros.robot.lerobot_yam_layouts import (
    DEFAULT_LAYOUT,
    JOINT_UNITS,
    LAYOUTS,
    ArmRange,
    LeRobotYamLayout,
    check_layout,
    layout_with_overrides,
    read_state_columns,
)


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


def layout_from_args(args) -> LeRobotYamLayout:
    """``--layout`` with ``--joint-names`` / ``--joint-unit`` / ``--gripper-name`` / ``--gripper-scale`` applied."""
    return layout_with_overrides(
        args.layout,
        joint_names=args.joint_names.split(",") if args.joint_names else None,
        joint_unit=args.joint_unit,
        gripper_name=args.gripper_name,
        gripper_scale=args.gripper_scale,
    )


def import_options(args, calibration=None, layout: LeRobotYamLayout | None = None) -> LeRobotImportOptions:
    """LeRobotImportOptions from the command line; ``calibration`` (a loaded ``CalibrationFile``) supplies the
    intrinsics of the views ``--intrinsics`` leaves out, from its cameras' ``camera_matrix``.

    The layout's unit is applied by :func:`joints_to_poses_in_layout` (the reader hands it the recorded values), so
    the options say ``joint_unit="rad"``: the reader converts nothing itself."""
    layout = layout or layout_from_args(args)
    views = tuple(v.strip() for v in args.views.split(",") if v.strip())
    keys = {v: layout.camera_key_pattern.format(view=v) for v in views}
    for item in args.camera_key or []:
        view, sep, key = item.partition("=")
        if not sep:
            raise ValueError(f"--camera-key {item!r}: use VIEW=FEATURE, e.g. scene=observation.images.top")
        keys[view] = key
    options = LeRobotImportOptions(
        view_names=views,
        camera_keys=keys,
        state_key=args.state_key,
        joint_names=layout.joint_names,
        joint_unit="rad",  # the values reach joints_to_poses_in_layout as recorded; it converts them
        gripper_name=layout.gripper_name,
        gripper_scale=layout.gripper_scale,
        intrinsics=_intrinsics(args.intrinsics),
    )
    if calibration is not None:
        missing_k = [v for v in options.view_names if v not in options.intrinsics]
        options.intrinsics = {
            **intrinsics_from_calibration(calibration, missing_k, video_image_wh(args.dataset, options)),
            **options.intrinsics,
        }
        for warning in ignored_distortion(calibration, missing_k):
            print(f"[import-lerobot] warning: {warning}", file=sys.stderr)
    return options


def joints_to_poses_in_layout(layout: LeRobotYamLayout, calibration, views, yam_config_path=None):
    """-> callable (N, 6) joint values as the layout records them -> (T_base_tool (N, 4, 4), {view: T_base_cam})."""
    to_poses = yam_joints_to_poses(calibration, views, yam_config_path)

    def convert(values: np.ndarray):
        return to_poses(layout.joints_to_radians(values))  # (N, 6) radians -> poses

    return convert


def has_calibration_features(dataset, views) -> bool:
    """True when the dataset carries this package's per-frame geometry (an export of ``para-bag export-lerobot``)."""
    info_path = Path(dataset) / "meta" / "info.json"
    if not info_path.is_file():
        return False
    features = json.loads(info_path.read_text()).get("features", {})
    return TOOL_KEY in features and all(
        K_KEY.format(view=v) in features and T_KEY.format(view=v) in features for v in views
    )


def import_lerobot(args) -> int:
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise FileExistsError(f"{out} is not empty; pass --force to write into it")
    calibration = load_calibration(args.calibration) if args.calibration else None
    layout = layout_from_args(args)
    options = import_options(args, calibration, layout)
    views = options.view_names
    joints_to_poses = None
    calibration_record = None
    if has_calibration_features(args.dataset, views):
        calibration_record = lerobot_export_record(args.dataset)
    else:
        columns = read_state_columns(args.dataset, options.state_key)
        warnings = check_layout(
            columns,
            layout,
            {v: options.camera_key(v) for v in views},
            ArmRange.from_yam_config(args.yam_config),
            where=str(args.dataset),
            state_key=options.state_key,
        )
        for warning in warnings:
            print(f"[import-lerobot] warning: {warning}", file=sys.stderr)
        print(f"[import-lerobot] layout {layout.name}: {layout.unit_words}", file=sys.stderr)
        if calibration is not None:
            joints_to_poses = joints_to_poses_in_layout(layout, calibration, views, args.yam_config)
            calibration_record = {**file_record(args.calibration), "source": str(Path(args.calibration).resolve())}
    episodes = read_lerobot_episodes(args.dataset, options, joints_to_poses)
    for i, ep in enumerate(episodes):
        if calibration_record is not None:
            ep.meta["calibration"] = calibration_record
        if joints_to_poses is not None:
            ep.meta["lerobot_layout"] = layout.to_dict()
        ep.save(out / f"episode_{i:04d}")
    print(
        f"wrote {len(episodes)} episode(s), {sum(len(e) for e in episodes)} frames to {out} "
        f"(train: para-train --data {out} --out RUN)"
    )
    return 0


def add_import_args(p: argparse.ArgumentParser) -> None:
    """The options that say how to read a LeRobot dataset (``--layout`` picks a recorder's profile)."""
    g = p.add_argument_group("LeRobot dataset layout")
    g.add_argument(
        "--layout",
        default=DEFAULT_LAYOUT,
        choices=sorted(LAYOUTS),
        help="how the recorder wrote the joints: "
        + "; ".join(f"{n}: {lay.description}" for n, lay in LAYOUTS.items())
        + f" (default {DEFAULT_LAYOUT})",
    )
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
        default=None,
        help="the 6 arm joints' names in the state feature, in chain order (the layout's)",
    )
    g.add_argument(
        "--joint-unit",
        choices=JOINT_UNITS,
        default=None,
        help="unit of the joint positions (the layout's): deg, rad, or range ([-100, 100] over the I2RT joint range)",
    )
    g.add_argument("--gripper-name", default=None, help="gripper's name in the state ('' = none; the layout's)")
    g.add_argument(
        "--gripper-scale", type=float, default=None, help="value of a fully open gripper (the layout's: 100 or 1)"
    )
    g.add_argument("--yam-config", default=None, help="yam.yaml for the model, the joint range and the default mount")


def add_parser(sub) -> None:
    """Register ``import-lerobot`` on para-bag's subparsers."""
    im = sub.add_parser("import-lerobot", help="a LeRobotDataset v3 -> PARA episode directories (training data)")
    im.add_argument("dataset", help="LeRobotDataset v3 directory (meta/info.json)")
    im.add_argument("--out", required=True, help="folder for the episode directories")
    im.add_argument("--force", action="store_true", help="write into a non-empty --out")
    add_import_args(im)
    im.set_defaults(func=import_lerobot)
