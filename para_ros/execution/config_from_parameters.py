"""The chunk executor node's parameter values (a plain dict, name -> value, as ``config/executor.yaml`` names them)
turned into the executor's configuration: :class:`ExecutorConfig` with its chunk checks, blending, smoothing and
confidence supervisor, and the arm joints' wire names. Plain Python, so a bench or a test builds the node's exact
configuration without ROS; every bad value raises ``ValueError`` naming it."""

from __future__ import annotations

from para_ros.execution.chunk import ChunkChecks
from para_ros.execution.confidence_supervisor import SupervisorConfig
from para_ros.execution.executor_core import ExecutorConfig
from para_ros.execution.smoothing import JerkLimits
from para_ros.execution.timeline import BlendConfig


def parse_joint_names(value, default: tuple[str, ...]) -> tuple[str, ...]:
    """``arm_joint_names`` as one name per arm joint: a comma-separated string or a list; empty = ``default`` (the
    arm description's ``model.joint_names``, whose length is the arm's joint count).

    :raises ValueError: naming the value, unless there are exactly ``len(default)`` distinct non-empty names.
    """
    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",")) if value.strip() else ()
    else:
        names = tuple(str(n).strip() for n in (value or ()))
    if not names:
        return tuple(default)
    n = len(default)
    if len(names) != n or not all(names) or len(set(names)) != n:
        raise ValueError(
            f"parameter arm_joint_names={value!r}: give the {n} distinct arm joint names in the order of the arm "
            f"description's model.joint_names, comma-separated, e.g. {','.join(default)}"
        )
    return names


def build_executor_config(p: dict, arm) -> ExecutorConfig:
    """ExecutorConfig from the node's parameter values ``p`` and the arm description ``arm`` (its frames; its limits
    give the workspace box)."""

    checks = ChunkChecks(
        world_frame=arm.model.world_frame,
        tool_frames=(arm.model.tool_site,),
        max_age_s=p["max_chunk_age_s"],
        max_future_s=p["max_chunk_future_s"],
        max_steps=p["max_chunk_steps"],
        max_implied_speed_m_s=p["max_implied_speed_m_s"],
        implausible_speed=p["implausible_speed"],
        out_of_workspace=p["out_of_workspace"],
        workspace_min_m=arm.limits.workspace_min_m,
        workspace_max_m=arm.limits.workspace_max_m,
    )
    return ExecutorConfig(
        control_rate_hz=p["control_rate_hz"],
        command_lookahead_s=p["command_lookahead_s"],
        chunk_min_lead_s=p["chunk_min_lead_s"],
        stale_timeout_s=p["stale_timeout_s"],
        blend=BlendConfig(p["blend_mode"], p["ensemble_k"], p["max_chunks"]),
        checks=checks,
        unreachable=p["unreachable"],
        smoothing=p["smoothing"],
        jerk_limits=JerkLimits(
            p["smoothing_max_velocity_rad_s"], p["smoothing_max_acceleration_rad_s2"], p["smoothing_max_jerk_rad_s3"]
        ),
        ik_position_tol_m=p["ik_position_tol_m"],
        ik_rotation_tol_rad=p["ik_rotation_tol_rad"],
        ik_max_iters=p["ik_max_iters"],
        joint_state_timeout_s=p["joint_state_timeout_s"],
        start_engaged=p["auto_engage"],
        supervisor=supervisor_config(p),
    )


def supervisor_config(p: dict) -> SupervisorConfig:
    """The confidence supervisor's config from the node's ``confidence_*`` parameters (ValueError names a bad pair)."""
    return SupervisorConfig(
        enabled=p["confidence_supervisor"],
        peak_mass_slow_below=p["confidence_peak_mass_slow_below"],
        peak_mass_hold_below=p["confidence_peak_mass_hold_below"],
        entropy_slow_above=p["confidence_entropy_slow_above"],
        entropy_hold_above=p["confidence_entropy_hold_above"],
        chunk_agreement_slow_below=p["confidence_chunk_agreement_slow_below"],
        chunk_agreement_hold_below=p["confidence_chunk_agreement_hold_below"],
        view_agreement_slow_below=p["confidence_view_agreement_slow_below"],
        view_agreement_hold_below=p["confidence_view_agreement_hold_below"],
        steps_checked=p["confidence_steps_checked"],
        hold_after_s=p["confidence_hold_after_s"],
        grace_s=p["confidence_grace_s"],
        resume_after_chunks=p["confidence_resume_after_chunks"],
        slow_speed_scale=p["confidence_slow_speed_scale"],
        rejected_hold_count=p["confidence_rejected_hold_count"],
        rejected_window_chunks=p["confidence_rejected_window_chunks"],
    )
