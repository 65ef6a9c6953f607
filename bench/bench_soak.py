"""Soak benchmark: the whole deploy graph against the simulator for a long time; every --report-every seconds each
node's memory and CPU, the chunk rate and the camera -> chunk latency, and at the end how much each figure grew.

Usage (an hour with 30 Hz cameras; the shipped pick-and-place checkpoint, as para-deploy's sim robot):
    MUJOCO_GL=egl python bench/bench_soak.py --duration 3600 --report-every 60 --camera-rate 30
Short and light (what the slow test runs): --duration 120 --report-every 20 --checkpoint none --camera-rate 10

The graph is para-deploy's: the nodes of :func:`para_ros.deploy.graph.plan` for robot sim, each its own process
through :class:`para_ros.deploy.graph_run.GraphRun` (as ``para-deploy`` and ``para-sim eval`` start it), logs in
``<out>/logs``, with the
cameras at --camera-rate (sim_node's ``scene_cam_rate_hz`` / ``wrist_cam_rate_hz``). By default pick-and-place
attempts run back to back as in para-deploy (a task reset after each success or --episode-time-limit), so the reset
path soaks too; --no-task leaves the arm to the policy.

Figures, per report window:

* per node: RSS (``VmRSS`` of ``/proc/<pid>/status``, MiB) and CPU % of one core (``utime + stime`` of
  ``/proc/<pid>/stat`` over the window's wall time: every thread of the process);
* chunk rate (``/para/action_chunk`` messages received here per second) and command rate (the executor's
  ``JointTrajectory`` messages per second);
* camera -> chunk latency: receive time here minus the chunk's header stamp (its observation's image stamp; the
  simulator stamps with wall time), p50 and p99 over the window's chunks.

At the end, for every figure: its value at the second report (the first one holds the start-up: model load, first
renders, DDS discovery) and at the last, their difference, and that difference per hour. A leak is a figure that keeps
growing; a figure that settles does not. ``--json`` (default ``<out>/soak.json``) keeps every report and the growth.
Exit status: 0; 1 when a node died (or had to be killed at the end), no chunk came in a window after the first, or
RSS grew more than --max-rss-growth-mib; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from para_ros.ros_io.spin import spin_until
from para_ros.stamps import stamp_to_ns

CLK_TCK = os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MiB (``VmRSS``), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_time_s(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads) in seconds, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14, 15 of proc(5)
    except (OSError, ValueError, IndexError):
        return None


class GraphWatch:
    """This process's view of the graph: chunks (receive time, header stamp) and commands, per report window."""

    def __init__(self, chunk_topic: str, trajectory_topic: str):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from rclpy.signals import SignalHandlerOptions
        from trajectory_msgs.msg import JointTrajectory

        from para_msgs.msg import ActionChunk

        self.context = rclpy.Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("para_soak_watch", context=self.context)
        self._lock = threading.Lock()
        self._latencies_s: list[float] = []
        self._commands = 0
        self.node.create_subscription(ActionChunk, chunk_topic, self._on_chunk, QoSProfile(depth=50))
        self.node.create_subscription(JointTrajectory, trajectory_topic, self._on_command, QoSProfile(depth=200))
        from diagnostic_msgs.msg import DiagnosticArray

        self.executor_values: dict[str, str] = {}  # the chunk executor's newest /diagnostics values
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, QoSProfile(depth=50))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="para_soak_watch", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1, on_error="stop")

    def _on_chunk(self, msg) -> None:
        received_ns = time.time_ns()
        stamp_ns = stamp_to_ns(msg.header.stamp)
        with self._lock:
            self._latencies_s.append((received_ns - stamp_ns) / 1e9)

    def _on_command(self, msg) -> None:
        with self._lock:
            self._commands += 1

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name.startswith("chunk_executor"):
                with self._lock:
                    self.executor_values = {kv.key: kv.value for kv in status.values}

    def executor_diagnostics(self) -> dict[str, str]:
        with self._lock:
            return dict(self.executor_values)

    def take(self) -> tuple[list[float], int]:
        """(the latencies of the chunks since the last call, the number of commands since then)."""
        with self._lock:
            latencies, self._latencies_s = self._latencies_s, []
            commands, self._commands = self._commands, 0
        return latencies, commands

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(timeout=2.0)


def window_report(
    t_s: float, window_s: float, nodes, cpu_before: dict, latencies_s: list[float], commands: int
) -> dict:
    """One report: per node RSS and CPU % over the window, chunk and command rates, latency percentiles (ms)."""
    report = {
        "t_s": round(t_s, 3),
        "window_s": round(window_s, 3),
        "nodes": {},
        "chunks": len(latencies_s),
        "chunk_rate_hz": len(latencies_s) / window_s,
        "command_rate_hz": commands / window_s,
        "latency_p50_ms": float("nan"),
        "latency_p99_ms": float("nan"),
    }
    if latencies_s:
        report["latency_p50_ms"] = 1e3 * float(np.percentile(latencies_s, 50))
        report["latency_p99_ms"] = 1e3 * float(np.percentile(latencies_s, 99))
    for n in nodes:
        pid = n.proc.pid
        cpu = cpu_time_s(pid)
        before = cpu_before.get(n.spec.name)
        report["nodes"][n.spec.name] = {
            "pid": pid,
            "rss_mib": rss_mib(pid),
            "cpu_pct": None if cpu is None or before is None else 100.0 * (cpu - before) / window_s,
        }
        cpu_before[n.spec.name] = cpu
    return report


def figures(report: dict) -> dict[str, float]:
    """The report's figures by name (``<node>.rss_mib``, ``<node>.cpu_pct``, ``chunk_rate_hz``, ...)."""
    out = {
        f"{name}.{key}": v
        for name, node in report["nodes"].items()
        for key, v in node.items()
        if key != "pid" and v is not None
    }
    out.update({k: report[k] for k in ("chunk_rate_hz", "command_rate_hz", "latency_p50_ms", "latency_p99_ms")})
    return out


def growth(reports: list[dict]) -> dict[str, dict]:
    """Every figure at the second report and at the last, the difference and the difference per hour.

    The second report, not the first: the first window holds the start-up. Empty with fewer than three reports (the
    second would be the last)."""
    if len(reports) < 3:
        return {}
    second, last = reports[1], reports[-1]
    hours = (last["t_s"] - second["t_s"]) / 3600.0
    a, b = figures(second), figures(last)
    return {
        name: {
            "second": a[name],
            "last": b[name],
            "growth": b[name] - a[name],
            "growth_per_hour": (b[name] - a[name]) / hours if hours > 0 else float("nan"),
        }
        for name in a
        if name in b
    }


def plot_reports(reports: list[dict], path: Path, title: str = "") -> Path:
    """``path`` (PNG): RSS per node, camera -> chunk latency p50/p99 and the chunk/command rates over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_min = np.array([r["t_s"] for r in reports]) / 60.0
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for name in reports[0]["nodes"]:
        axes[0].plot(t_min, [r["nodes"][name]["rss_mib"] for r in reports], marker=".", label=name)
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].legend(fontsize=8)
    for key, label in (("latency_p50_ms", "p50"), ("latency_p99_ms", "p99")):
        axes[1].plot(t_min, [r[key] for r in reports], marker=".", label=label)
    axes[1].set_ylabel("camera -> chunk (ms)")
    axes[1].legend(fontsize=8)
    axes[2].plot(t_min, [r["command_rate_hz"] for r in reports], marker=".", label="commands")
    axes[2].plot(t_min, [r["chunk_rate_hz"] for r in reports], marker=".", label="chunks")
    axes[2].set_ylabel("rate (Hz)")
    axes[2].set_xlabel("time since start (min)")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(title or "bench_soak", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def format_report(report: dict) -> str:
    nodes = "  ".join(
        f"{name} {v['rss_mib'] or float('nan'):6.1f} MiB {v['cpu_pct'] or float('nan'):5.1f} %"
        for name, v in report["nodes"].items()
    )
    executor = ""
    if "executor_tick_rate_hz" in report:
        executor = (
            f"  |  executor ticks {report['executor_tick_rate_hz']:6.2f} Hz, period error p99 "
            f"{report['executor_tick_period_error_p99_ms']:.2f} ms ({report['executor_scheduler'] or '?'}; "
            f"ROS thread {report.get('executor_ros_thread_scheduler') or '?'})"
        )
    return (
        f"  t={report['t_s']:7.1f} s  chunks {report['chunk_rate_hz']:5.1f} Hz  commands "
        f"{report['command_rate_hz']:5.1f} Hz  latency p50 {report['latency_p50_ms']:6.1f} ms p99 "
        f"{report['latency_p99_ms']:6.1f} ms  |  {nodes}{executor}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds to run (default 3600)")
    parser.add_argument("--report-every", type=float, default=60.0, help="seconds per report (default 60)")
    parser.add_argument(
        "--camera-rate",
        type=float,
        default=30.0,
        help="both cameras' frame rate, Hz (sim_node scene_cam_rate_hz / wrist_cam_rate_hz; default 30)",
    )
    parser.add_argument(
        "--checkpoint",
        default="",
        help="policy checkpoint (default: the sim robot's, the shipped "
        "pick-and-place one); none = the untrained random model (light, for CPUs)",
    )
    parser.add_argument("--device", default="", help="torch device: auto | cpu | cuda | cuda:N (default: the file's)")
    parser.add_argument("--no-task", action="store_true", help="no pick-and-place attempts (no task resets)")
    parser.add_argument("--episode-time-limit", type=float, default=30.0, help="seconds per attempt (default 30)")
    parser.add_argument(
        "--max-rss-growth-mib",
        type=float,
        default=None,
        help="exit 1 when a node's RSS grew more than this between the second and the last report",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=10.0,
        help="seconds the nodes get to stop after SIGINT before they are killed (default 10)",
    )
    parser.add_argument("--out", default=None, help="output directory (default runs/soak-<timestamp>)")
    parser.add_argument(
        "--node-param",
        action="append",
        default=[],
        metavar="NODE:NAME:=VALUE",
        help="a parameter for one node, e.g. chunk_executor:control_thread_priority:=50 (repeatable)",
    )
    parser.add_argument("--json", default=None, help="write the reports and the growth here (default <out>/soak.json)")
    return parser


def run(args) -> int:
    from para_ros.deploy import graph
    from para_ros.deploy.graph_run import GraphRun, SignalStop
    from para_ros.deploy.monitor import graph_topics
    from para_ros.nodes.parameter_registry import check_node_params

    if not (
        args.duration > 0 and args.report_every > 0 and 0.5 <= args.camera_rate <= 120.0 and args.shutdown_timeout > 0
    ):
        print(
            "bench_soak: --duration, --report-every and --shutdown-timeout must be > 0, --camera-rate within "
            "0.5..120 Hz",
            file=sys.stderr,
        )
        return 2
    if args.duration < 3 * args.report_every:
        print(
            f"bench_soak: --duration {args.duration:g} s gives fewer than 3 reports of --report-every "
            f"{args.report_every:g} s: no growth between the second and the last; raise --duration",
            file=sys.stderr,
        )
        return 2
    try:
        node_params = check_node_params(graph.parse_node_params(args.node_param))
        settings = graph.DeploySettings(robot="sim", checkpoint=args.checkpoint, device=args.device)
    except ValueError as exc:
        print(f"bench_soak: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or Path("runs") / datetime.now().strftime("soak-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    group = GraphRun(out / "logs")  # the watch joins the graph's domain
    plan = graph.plan(settings)
    topics = graph_topics(plan)
    signals = SignalStop()  # its ``why`` is the run's stop reason
    stop = signals.event
    watch = driver = None
    reports: list[dict] = []
    status = 0
    print(
        f"bench_soak: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
        f"{args.duration:g} s, report every {args.report_every:g} s, cameras {args.camera_rate:g} Hz, checkpoint "
        f"{'untrained' if graph.uses_untrained_model(settings) else graph.effective_checkpoint(settings)}, "
        f"task {'off' if args.no_task else 'on'}; ROS_DOMAIN_ID {group.domain_id}, output {out}",
        flush=True,
    )
    try:
        cameras = {"scene_cam_rate_hz": float(args.camera_rate), "wrist_cam_rate_hz": float(args.camera_rate)}
        group.start_plan(plan, {**node_params, "sim_node": {**cameras, **node_params.get("sim_node", {})}})
        watch = GraphWatch("/para/action_chunk", topics.joint_trajectory)
        if not args.no_task:
            from para_ros.deploy.episodes import TaskDriver

            driver = TaskDriver(time_limit_s=args.episode_time_limit)
            driver.start()
        t0 = time.monotonic()
        ticks_before = float("nan")
        cpu_before = {n.spec.name: cpu_time_s(n.proc.pid) for n in group.nodes}
        t_last = t0
        while not stop.is_set():
            t_next = min(t_last + args.report_every, t0 + args.duration)
            while not stop.is_set() and time.monotonic() < t_next:
                dead = group.first_dead()
                if dead is not None:
                    signals.why = f"{dead.spec.name} exited with status {dead.returncode}"
                    print(f"bench_soak: {signals.why}; last lines of its log:\n{group.log_tail(dead)}", file=sys.stderr)
                    status = 1
                    stop.set()
                    break
                stop.wait(0.2)
            now = time.monotonic()
            if now - t_last < 0.5 * args.report_every:
                break  # stopped early: no full window left to report
            latencies, commands = watch.take()
            report = window_report(now - t0, now - t_last, group.nodes, cpu_before, latencies, commands)
            ex = watch.executor_diagnostics()
            ticks = float(ex.get("ticks", "nan"))
            report["executor_tick_rate_hz"] = (
                (ticks - ticks_before) / (now - t_last) if ticks_before == ticks_before else float("nan")
            )  # NaN before the first diagnostics
            ticks_before = ticks
            for key in ("tick_period_error_p99_ms", "tick_start_error_p99_ms", "overruns"):
                report[f"executor_{key}"] = float(ex.get(key, "nan"))
            report["executor_scheduler"] = ex.get("control_scheduler", "")
            report["executor_ros_thread_scheduler"] = ex.get("ros_thread_scheduler", "")
            t_last = now
            reports.append(report)
            print(format_report(report), flush=True)
            if len(reports) > 1 and report["chunks"] == 0:
                print(f"bench_soak: no chunk in the window ending at t={report['t_s']:.0f} s", file=sys.stderr)
                status = 1
            if now - t0 >= args.duration - 1e-3:
                break
    finally:
        if driver is not None:
            driver.stop_event.set()
            driver.join(timeout=10.0)
        if watch is not None:
            watch.close()
        group.stop(timeout_s=args.shutdown_timeout)
        signals.restore()

    killed = [n.spec.name for n in group.nodes if n.killed]
    if killed:
        print(f"bench_soak: killed after the {args.shutdown_timeout:g} s shutdown timeout: {killed}", file=sys.stderr)
        status = 1
    grown = growth(reports)
    if grown:
        print(f"growth from the second report to the last ({reports[1]['t_s']:.0f} s -> {reports[-1]['t_s']:.0f} s):")
        for name, g in grown.items():
            print(
                f"  {name:32s} {g['second']:9.2f} -> {g['last']:9.2f}  {g['growth']:+9.2f}  "
                f"({g['growth_per_hour']:+.2f} per hour)"
            )
    else:
        print("growth: fewer than 3 reports, none computed")
    if args.max_rss_growth_mib is not None:
        over = {
            k: g["growth"] for k, g in grown.items() if k.endswith(".rss_mib") and g["growth"] > args.max_rss_growth_mib
        }
        if over:
            print(f"bench_soak: RSS grew more than {args.max_rss_growth_mib:g} MiB: {over}", file=sys.stderr)
            status = 1
    result = {
        "settings": {k: v for k, v in vars(args).items()},
        "stop_reason": signals.why,
        "reports": reports,
        "growth": grown,
        "task": ({"attempts": len(driver.rows), "error": driver.error} if driver is not None else None),
        "nodes": {
            n.spec.name: {"returncode": n.returncode, "killed": n.killed, "exited_early": n.exited_early}
            for n in group.nodes
        },
    }
    json_path = Path(args.json) if args.json else out / "soak.json"
    json_path.write_text(json.dumps(result, indent=2, default=str))
    if reports:
        plot = plot_reports(
            reports,
            json_path.with_suffix(".png"),
            f"bench_soak: {args.duration:.0f} s, cameras {args.camera_rate:g} Hz, {platform.machine()}, "
            f"{os.cpu_count()} cpus",
        )
        print(f"bench_soak: plot {plot}", flush=True)
    print(f"bench_soak: {signals.why}; {len(reports)} reports in {json_path}", flush=True)
    return status


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
