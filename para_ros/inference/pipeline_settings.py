"""The inference pipeline as the inference node's parameters set it up, and a change of its dynamic parameters
applied. Built from the parameter values (a plain mapping, like :class:`para_ros.inference.policy_choice.PolicyChoice`),
so what each parameter does is testable without ROS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from para_core.model.policy import Policy
from para_ros.inference.familiarity_check import FamiliarityCheckSettings
from para_ros.inference.pipeline import InferencePipeline, PairingSettings, Report
from para_ros.observation.builder import ObservationSettings
from para_ros.observation.camera_check import CameraCheckSettings
from para_ros.observation.ee_from_joints import EeFromJoints

EE_SOURCES = ("tf", "joint_states")


def pairing_settings(p: Mapping[str, Any]) -> PairingSettings:
    return PairingSettings(pair_slop_s=p["pair_slop_s"], max_observation_age_s=p["max_observation_age_s"])


def camera_check_settings(p: Mapping[str, Any]) -> CameraCheckSettings:
    return CameraCheckSettings(
        enabled=bool(p["camera_check"]),
        min_contrast_levels=float(p["camera_min_contrast_levels"]),
        frozen_after_s=float(p["camera_frozen_after_s"]),
        frozen_tool_motion_m=float(p["camera_frozen_tool_motion_m"]),
    )


def familiarity_check_settings(p: Mapping[str, Any]) -> FamiliarityCheckSettings:
    return FamiliarityCheckSettings(
        enabled=bool(p["familiarity_check"]), window_frames=int(p["familiarity_window_frames"])
    )


def ee_from_joints(p: Mapping[str, Any]) -> EeFromJoints | None:
    """The joint-state history and forward kinematics behind ``ee_source: joint_states``; None for ``tf``.

    :raises ValueError: another ``ee_source``.
    """
    if p["ee_source"] not in EE_SOURCES:
        raise ValueError(
            f"ee_source={p['ee_source']!r}: use 'tf' (the EE frame is in TF) or 'joint_states' "
            "(forward kinematics of /joint_states)"
        )
    return EeFromJoints(p["yam_config"] or None) if p["ee_source"] == "joint_states" else None


def build_pipeline(
    policy: Policy, p: Mapping[str, Any], report: Report, ee_from_joints: EeFromJoints | None = None
) -> InferencePipeline:
    """The pipeline of ``policy`` with the settings the parameter values ``p`` name (its views' topic parameters
    included); in lockstep (``lockstep_ack_topic`` set) an observation waits up to ``tf_timeout_s`` for the gripper
    opening of its own instant."""
    views = tuple(policy.view_names)
    pipeline = InferencePipeline(
        policy,
        ObservationSettings(
            view_names=views,
            camera_matrix=p["camera_matrix"],
            gripper_joint=p["gripper_joint"],
            gripper_open_position=float(p["gripper_open_position"]),
            past_n=policy.config.mv_past_n,
            step_dt_s=policy.config.step_dt_s,
        ),
        report,
        pairing=pairing_settings(p),
        info_sources=[p[f"{view}_info_topic"] for view in views],
        gripper_source=p["joint_states_topic"],
        ee_from_joints=ee_from_joints,
        camera_check=camera_check_settings(p),
        familiarity_check=familiarity_check_settings(p),
        draw_overlay=bool(p["overlay_topic"]),
    )
    if p["lockstep_ack_topic"]:  # each frame's gripper opening is the one of its own instant
        pipeline.gripper_wait_s = float(p["tf_timeout_s"])
    return pipeline


def apply_parameter_changes(pipeline: InferencePipeline, p: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
    """The dynamic parameters in ``changes`` (``p``: every value, the changes included) take effect from the next
    frame: a new pairing rule starts pairing afresh, a new familiarity setting starts its window afresh."""
    if "pair_slop_s" in changes or "max_observation_age_s" in changes:
        pipeline.set_pairing(pairing_settings(p))
    if any(name.startswith("camera_") for name in changes):
        pipeline.camera_check.settings = camera_check_settings(p)
    if any(name.startswith("familiarity_") for name in changes):
        pipeline.familiarity_check.settings = familiarity_check_settings(p)
        pipeline.familiarity_check.reset()


def familiarity_summary(pipeline: InferencePipeline) -> str:
    """What the familiarity check will do, for the node's ready line."""
    memory = pipeline.policy.familiarity
    if memory is None:
        return "off (the checkpoint has no familiarity memory; para-train familiarity builds one)"
    if not pipeline.familiarity_check.settings.enabled:
        return "off (familiarity_check false)"
    limits = ", ".join(f"{v} {memory.limits[v]:.2f}" for v in memory.view_names)
    window = pipeline.familiarity_check.window_frames(memory.settings.window_frames)
    return f"on (limits {limits}, window {window} frames)"
