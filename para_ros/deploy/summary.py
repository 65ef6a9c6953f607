"""The figures ``para-deploy`` prints at the end of a run, computed from what its monitor saw (ROS-free).

Every figure is measured outside the nodes (arrival times at the monitor, message stamps) and, where a node reports
its own counters on ``/diagnostics``, those are shown next to it: the two agreeing is itself a check.
Times: stamps and arrival times are wall-clock nanoseconds (the simulated arm stamps with wall time unless
``publish_clock`` is on; see ``config/sim.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from para_ros.execution.executor_diagnostics import state_and_activity


@dataclass
class RunRecord:
    """What the monitor collected during one run.

    Args:
        duration_s: wall time from the start of the graph to the shutdown request.
        scene_frame_recv_ns: arrival time of every scene camera image.
        chunk_stamp_ns, chunk_recv_ns: observation stamp and arrival time of every ActionChunk.
        command_recv_ns, command_stamp_ns: arrival time and header stamp of every executor command (JointTrajectory).
        joint_positions_first, joint_positions_last: the first and last /joint_states positions (joint name -> rad).
        diagnostics: newest /diagnostics values per status name (key -> value).
        model_id: ``model_id`` of the last chunk.
        untrained: the inference node runs the random-weights model (no checkpoint given).
        graph_start_ns: wall time the first node was started.
    """

    duration_s: float = 0.0
    graph_start_ns: int = 0
    scene_frame_recv_ns: list[int] = field(default_factory=list)
    chunk_stamp_ns: list[int] = field(default_factory=list)
    chunk_recv_ns: list[int] = field(default_factory=list)
    command_recv_ns: list[int] = field(default_factory=list)
    command_stamp_ns: list[int] = field(default_factory=list)
    joint_positions_first: dict[str, float] = field(default_factory=dict)
    joint_positions_last: dict[str, float] = field(default_factory=dict)
    joint_state_count: int = 0
    diagnostics: dict[str, dict[str, str]] = field(default_factory=dict)
    model_id: str = ""
    untrained: bool = True


def percentiles_ms(values_s, qs=(50, 99)) -> list[float]:
    """Percentiles of ``values_s`` (seconds) in milliseconds; nan for no data."""
    values_s = np.asarray(values_s, dtype=np.float64)
    if values_s.size == 0:
        return [float("nan")] * len(qs)
    return [1e3 * float(np.percentile(values_s, q)) for q in qs]


def latencies_s(stamp_ns, recv_ns) -> np.ndarray:
    """Camera-to-chunk latency of each chunk: arrival at the monitor minus the observation stamp, seconds."""
    return (np.asarray(recv_ns, dtype=np.int64) - np.asarray(stamp_ns, dtype=np.int64)) / 1e9


def achieved_rate_hz(times_ns) -> float:
    """Mean rate of events at ``times_ns``: (count - 1) / (last - first); nan with fewer than two."""
    t = np.sort(np.asarray(times_ns, dtype=np.int64))
    if t.size < 2 or t[-1] == t[0]:
        return float("nan")
    return (t.size - 1) / ((t[-1] - t[0]) / 1e9)


def joint_motion_rad(first: dict[str, float], last: dict[str, float], exclude=("gripper",)) -> float:
    """Largest change of any arm joint (not those in ``exclude``) between the first and the last joint state, rad."""
    common = [k for k in first if k in last and k not in exclude]
    if not common:
        return float("nan")
    return float(max(abs(last[k] - first[k]) for k in common))


def _diag(record: RunRecord, prefix: str) -> dict[str, str]:
    for name, values in record.diagnostics.items():
        if name.split(":")[-1].strip() == prefix or name.startswith(prefix):
            return values
    return {}


def _fmt(x: float, unit: str = "", digits: int = 1) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:.{digits}f}{unit}"


def summary_dict(record: RunRecord) -> dict:
    """Every summary figure as a flat dict (also written to ``summary.json``)."""
    lat = latencies_s(record.chunk_stamp_ns, record.chunk_recv_ns)
    lat_p50, lat_p99 = percentiles_ms(lat)
    inference = _diag(record, "inference_node")
    executor = _diag(record, "chunk_executor")
    sim = _diag(record, "sim_node")
    first_chunk_s = float("nan")
    if record.chunk_recv_ns and record.graph_start_ns:
        first_chunk_s = (min(record.chunk_recv_ns) - record.graph_start_ns) / 1e9

    def as_int(values: dict, key: str) -> int | None:
        try:
            return int(float(values[key]))
        except (KeyError, ValueError):
            return None

    return {
        "duration_s": record.duration_s,
        "model_id": record.model_id,
        "untrained_model": record.untrained,
        "scene_frames_seen": len(record.scene_frame_recv_ns),
        "scene_frame_rate_hz": achieved_rate_hz(record.scene_frame_recv_ns),
        "frames_in_scene_node": as_int(inference, "frames_in.scene"),
        "frames_in_wrist_node": as_int(inference, "frames_in.wrist"),
        "chunks_seen": len(record.chunk_stamp_ns),
        "chunks_out_node": as_int(inference, "chunks_out"),
        "chunk_rate_hz": achieved_rate_hz(record.chunk_recv_ns),
        "first_chunk_after_s": first_chunk_s,
        "latency_median_ms": lat_p50,
        "latency_p99_ms": lat_p99,
        "latency_stages_median_ms": {
            k[len("stage_median_ms.") :]: float(v) for k, v in inference.items() if k.startswith("stage_median_ms.")
        },
        "sim_publish_delay_median_ms": {
            k[len("publish_delay_median_ms.") :]: float(v)
            for k, v in sim.items()
            if k.startswith("publish_delay_median_ms.")
        },
        "commands_seen": len(record.command_recv_ns),
        "commands_node": as_int(executor, "commands"),
        "control_rate_hz": achieved_rate_hz(record.command_recv_ns),
        "control_rate_set_hz": float(executor["control_rate_hz"]) if "control_rate_hz" in executor else float("nan"),
        "chunks_accepted": as_int(executor, "chunks_accepted"),
        "chunks_rejected": as_int(executor, "chunks_rejected"),
        "chunks_modified": as_int(executor, "chunks_modified"),
        "chunks_truncated": as_int(executor, "chunks_truncated"),
        "commands_limited": as_int(executor, "limit_events"),
        "ik_failures": as_int(executor, "ik_failures"),
        "commands_failed_check": as_int(executor, "check_failures"),
        "executor_state": state_and_activity(executor)[0],
        "executor_activity": state_and_activity(executor)[1],
        "last_clamp": executor.get("last_warning", ""),
        "last_rejection": executor.get("last_rejection", ""),
        "last_limit_event": executor.get("last_limit_event", ""),
        "joint_states_seen": record.joint_state_count,
        "max_joint_motion_rad": joint_motion_rad(record.joint_positions_first, record.joint_positions_last),
        "gripper_change": (
            abs(record.joint_positions_last["gripper"] - record.joint_positions_first["gripper"])
            if "gripper" in record.joint_positions_first and "gripper" in record.joint_positions_last
            else float("nan")
        ),
    }


def _camera_delay_text(delays_ms: dict[str, float]) -> str:
    """The simulator's stamp -> publish delay per camera: the part of 'receive' that is the camera's own."""
    if not delays_ms:
        return "n/a (no simulator diagnostics)"
    return (
        ", ".join(f"{cam} {v:.1f}" for cam, v in delays_ms.items()) + " ms (the simulator's stamp -> publish: "
        "stepping and rendering after the simulated exposure; a real driver stamps at exposure too)"
    )


def format_summary(record: RunRecord, extra_lines: list[str] | None = None) -> str:
    """The human-readable summary printed at the end of ``para-deploy``."""
    s = summary_dict(record)

    def node(v) -> str:
        return "n/a" if v is None else str(v)

    model = s["model_id"] or "(no chunk received)"
    if s["untrained_model"]:
        model += "  -- UNTRAINED random weights (no checkpoint given): the actions mean nothing"
    lines = [
        f"PARA deploy run: {s['duration_s']:.1f} s",
        f"  model                 {model}",
        f"  frames in             {s['scene_frames_seen']} scene images seen "
        f"({_fmt(s['scene_frame_rate_hz'], ' Hz')}); "
        f"inference node counted scene {node(s['frames_in_scene_node'])}, wrist {node(s['frames_in_wrist_node'])}",
        f"  chunks out            {s['chunks_seen']} seen ({_fmt(s['chunk_rate_hz'], ' Hz', 2)}); node counted "
        f"{node(s['chunks_out_node'])}; first after {_fmt(s['first_chunk_after_s'], ' s')}",
        f"  camera->chunk latency median {_fmt(s['latency_median_ms'], ' ms')}, p99 {_fmt(s['latency_p99_ms'], ' ms')} "
        "(chunk arrival minus image stamp)",
        "  latency stages        "
        + (
            ", ".join(f"{k} {v:.1f}" for k, v in s["latency_stages_median_ms"].items())
            + " ms (the inference node's medians; 'receive' holds the camera's own stamp ->"
            " publish delay)"
            if s["latency_stages_median_ms"]
            else "n/a"
        ),
        "  of which the camera's  " + _camera_delay_text(s["sim_publish_delay_median_ms"]),
        f"  executor              {s['commands_seen']} commands seen, achieved {_fmt(s['control_rate_hz'], ' Hz')} "
        f"(set {_fmt(s['control_rate_set_hz'], ' Hz', 0)}); node counted {node(s['commands_node'])}; "
        f"state {s['executor_state'] or 'n/a'}" + (f" ({s['executor_activity']})" if s["executor_activity"] else ""),
        f"  chunks                accepted {node(s['chunks_accepted'])}, rejected {node(s['chunks_rejected'])}; "
        f"of those accepted, modified {node(s['chunks_modified'])} (clamped into the workspace or truncated before "
        f"an implausibly fast step: {node(s['chunks_truncated'])} truncated)",
        f"  commands clamped      {node(s['commands_limited'])} limited by joint/speed/workspace limits, "
        f"IK failures {node(s['ik_failures'])}, failed final check (not sent) {node(s['commands_failed_check'])}",
        f"  arm motion            largest arm joint change first -> last {_fmt(s['max_joint_motion_rad'], ' rad', 3)}, "
        f"gripper change {_fmt(s['gripper_change'], '', 2)} (0 closed .. 1 open), "
        f"{s['joint_states_seen']} joint states",
    ]
    if s["last_clamp"]:
        lines.append(f"  last modified         {s['last_clamp'][:160]}")
    if s.get("last_rejection"):
        lines.append(f"  last rejection        {s['last_rejection'][:160]}")
    lines += list(extra_lines or [])
    return "\n".join(lines)
