"""The topic and frame options every ``para-bag`` subcommand shares (``add_topic_args``, ``topic_config``: a recording's
topics, frames and pairing, by default the inference node's parameter file) and the progress bar over observations."""

from __future__ import annotations

import argparse
import sys

from para_ros.bag.reader import BagTopicConfig


def key_values(items, flag: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"{flag} {item!r}: use VIEW=TOPIC, e.g. {flag} scene=/cam0/image_raw")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def add_topic_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("topics and frames (defaults: the inference node's parameter file)")
    g.add_argument(
        "--params-file",
        default=None,
        help="inference node parameters YAML to take topics, frames and pairing from (default: config/inference.yaml)",
    )
    g.add_argument(
        "--image-topic",
        action="append",
        metavar="VIEW=TOPIC",
        help="image topic of a view (repeatable); CompressedImage is found at TOPIC/compressed",
    )
    g.add_argument("--info-topic", action="append", metavar="VIEW=TOPIC", help="CameraInfo topic of a view")
    g.add_argument(
        "--image-transport",
        choices=("auto", "raw", "compressed"),
        default=None,
        help="auto (default): raw if the bag has it, else compressed",
    )
    g.add_argument("--tf-topic", default=None, help="default /tf")
    g.add_argument("--tf-static-topic", default=None, help="default /tf_static")
    g.add_argument("--joint-states-topic", default=None, help="default /joint_states ('' = no gripper)")
    g.add_argument("--world-frame", default=None, help="default base")
    g.add_argument("--ee-frame", default=None, help="default grasp_site")
    g.add_argument("--gripper-joint", default=None, help="default gripper")
    g.add_argument(
        "--camera-matrix",
        choices=("k", "p"),
        default=None,
        help="CameraInfo matrix: k (raw images, default) | p (rectified images)",
    )
    g.add_argument("--pair-slop-s", type=float, default=None, help="max scene/wrist stamp difference, s (0.05)")
    g.add_argument("--max-observation-age-s", type=float, default=None, help="stale-pair age, s (1.0)")


# The para-bag options that override config/inference.yaml's topics and pairing, by their BagTopicConfig names.
TOPIC_OVERRIDE_OPTIONS = (
    "image_transport",
    "tf_topic",
    "tf_static_topic",
    "joint_states_topic",
    "world_frame",
    "ee_frame",
    "gripper_joint",
    "pair_slop_s",
    "max_observation_age_s",
    "camera_matrix",
)


def topic_config(args, view_names) -> BagTopicConfig:
    overrides = {"view_names": tuple(view_names)}
    for name in TOPIC_OVERRIDE_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    cfg = BagTopicConfig.from_inference_yaml(args.params_file, **overrides)
    cfg.image_topics.update(key_values(args.image_topic, "--image-topic"))
    cfg.info_topics.update(key_values(args.info_topic, "--info-topic"))
    return BagTopicConfig(**{k: getattr(cfg, k) for k in cfg.__dataclass_fields__})  # re-validate


def progress(iterable, total, desc, quiet):
    from tqdm import tqdm  # tqdm: loaded on first use, not on import

    return tqdm(iterable, total=total, desc=desc, unit="obs", disable=quiet, file=sys.stderr)
