"""Operator-judged evaluation on a robot (``para-eval-robot``), the running part: the graph, the operator's ROS
interface and keyboard, one recording per episode, and the episode loop (:func:`run_robot_eval`). The rules (order,
marks, report, ``--continue``) are in :mod:`para_ros.deploy.robot_eval`.

The graph is the deploy graph of :mod:`para_ros.deploy.graph` in two process groups in one DDS domain: the robot side
(the arm's backend, the executor, the simulator with backend ``sim``), started once, and the inference node, started
with a variant's checkpoint and parameters and **restarted when the next episode is another variant's**. A restart
needs nothing from the node beyond its ordinary start, works for every parameter (some, like the checkpoint, are
read once at start), and leaves no state of one policy in the other (the fused decoding's memory, the end-effector
history). Its cost, the node's start until its first chunk, is printed at every switch and kept in the report
(``switch_s``). Measured on this 2-core CPU with the shipped checkpoints: 8.5 and 10.2 s on a lightly loaded
machine, 17-33 s beside other jobs (load average 12-14), most of it importing torch and building the model. The
node therefore starts when the reset prompt goes out, so the operator's reset (tens of seconds by hand) hides it;
the hand-over waits for its first chunk. The balanced ``abba`` order switches at every other episode only.

Per episode ``k`` (variant ``V``):

1. ``/chunk_executor/stop``: the arm holds where it is; the inference node restarted (not waited for) if the last
   episode ran another variant;
2. ``~/prompt`` phase ``reset``: the operator resets the scene and answers ``start`` (keyboard, or ``k`` on
   ``~/start``); with backend ``sim`` the scene is reset through ``/sim_node/reset_task`` (the scripted operator,
   :mod:`para_ros.deploy.scripted_operator`, does so); a restarted inference node's first chunk is waited for;
3. the episode's recording opens, ``settle_s`` passes, ``/chunk_executor/resume``: the policy has the arm;
   ``~/prompt`` phase ``running``;
4. a mark ends it (``/chunk_executor/stop`` at once), or the time limit does: the arm is held and ``~/prompt``
   phase ``judging`` asks for the mark;
5. the recording closes, the row goes into the report (rewritten), a progress line is printed.

``~/feedback`` answers every command (``episode 3 marked failure (dropped)``, ``refused: episode 7 is not running
(episode 3 is running)``). Ctrl-C (or SIGTERM) stops the evaluation: the episode under way is not judged and goes
into no report; ``--continue`` runs it again.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from para_ros.deploy import graph
from para_ros.deploy.graph_run import GraphRun, SignalStop, run_exit_status
from para_ros.deploy.robot_eval import (
    MarkRow,
    OperatorDesk,
    RobotEvalSettings,
    check_new_or_continued,
    fmt_rate,
    parse_operator_text,
    round_of,
    write_report,
)
from para_ros.ros_io.spin import spin_until

NODE_NAME = "para_eval_robot"
FIRST_CHUNK_TIMEOUT_S = 300.0  # a restarted inference node loads torch and the model: minutes on a busy small CPU


class OperatorLink:
    """The evaluation's ROS node (own rclpy context and spin thread, no signal handlers): ``~/prompt`` (JSON,
    transient local: an operator that joins late sees the open prompt), ``~/feedback``, the ``~/start`` and
    ``~/mark`` topics into the :class:`OperatorDesk`, the executor's services, and a count of action chunks (is the
    inference node up?)."""

    def __init__(self, desk: OperatorDesk, domain_id: int):
        import uuid

        import rclpy  # rclpy: loaded on first use, not on import
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        from para_msgs.msg import ActionChunk

        self.desk = desk
        self.run_id = uuid.uuid4().hex[:12]  # in every prompt: a continued evaluation prompts episode k anew
        self.String = String
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO, domain_id=domain_id)
        self.node = rclpy.create_node(NODE_NAME, context=self.context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.prompt_pub = self.node.create_publisher(String, "~/prompt", latched)
        self.feedback_pub = self.node.create_publisher(String, "~/feedback", QoSProfile(depth=20))
        self.node.create_subscription(String, "~/start", lambda m: self._on_text(m.data, "start"), QoSProfile(depth=10))
        self.node.create_subscription(String, "~/mark", lambda m: self._on_text(m.data, "mark"), QoSProfile(depth=10))
        self.chunks = 0
        self.node.create_subscription(ActionChunk, "/para/action_chunk", self._on_chunk, QoSProfile(depth=10))
        self.clients = {
            name: self.node.create_client(Trigger, f"/chunk_executor/{name}") for name in ("stop", "resume")
        }
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=NODE_NAME, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1, on_error="continue")

    def _on_chunk(self, _msg) -> None:
        self.chunks += 1

    def _on_text(self, text: str, topic: str) -> None:
        try:
            accepted, message = self.desk.offer(parse_operator_text(text, "topic", topic))
        except ValueError as exc:
            message = f"refused: {exc}"
        self.feedback(message)

    def feedback(self, message: str) -> None:
        """``message`` on ``~/feedback`` and this terminal."""
        self.feedback_pub.publish(self.String(data=message))
        print(f"  operator: {message}", flush=True)

    def prompt(self, phase: str, episode: int | None, **info) -> None:
        """Publish the prompt (``{"run", "phase", "episode", ...}``) and open that phase on the desk."""
        self.desk.open(phase, episode)
        self.prompt_pub.publish(
            self.String(data=json.dumps({"run": self.run_id, "phase": phase, "episode": episode, **info}))
        )

    def call(self, name: str, timeout_s: float = 10.0) -> None:
        """Call ``/chunk_executor/<name>`` (Trigger); RuntimeError when it is not there or refuses."""
        from para_ros.ros_io.task_services import call_service  # rclpy helpers: loaded on first use

        answer = call_service(self.clients[name], None, timeout_s, resend_after_s=5.0)  # stop / resume: idempotent
        if not answer.success:
            raise RuntimeError(f"/chunk_executor/{name} refused: {answer.message}")

    def close(self) -> None:
        if self.context.ok():
            self.context.try_shutdown()
        self._thread.join(timeout=5.0)
        try:
            self.node.destroy_node()
        except Exception:  # noqa: BLE001
            pass


def keyboard_reader(desk: OperatorDesk, link: OperatorLink, stream=None) -> threading.Thread:
    """A daemon thread feeding the lines typed on ``stream`` (stdin) to the desk; it ends at end of input (no
    keyboard: the topics alone)."""

    def read() -> None:
        for line in stream or sys.stdin:
            try:
                _, message = desk.offer(parse_operator_text(line, "keyboard"))
            except ValueError as exc:
                message = f"refused: {exc}"
            link.feedback(message)

    thread = threading.Thread(target=read, name="para_eval_keyboard", daemon=True)
    thread.start()
    return thread


class EpisodeRecordings:
    """The monitor's recorder, one rosbag2 (MCAP) per episode: :meth:`open` starts an episode's bag (with the latest
    ``/tf_static`` messages, which their publishers send once), :meth:`close` ends it; between episodes nothing is
    written."""

    def __init__(self, topics: dict[str, str]):
        self.topics = topics
        self._lock = threading.Lock()
        self._static: dict[bytes, tuple[int, bytes]] = {}
        self._bag = None

    def write(self, topic: str, stamp_ns: int, data: bytes) -> None:
        with self._lock:
            if topic == "/tf_static":
                self._static[bytes(data)] = (stamp_ns, bytes(data))
            if self._bag is not None:
                self._bag.write(topic, stamp_ns, data)

    def open(self, path: Path) -> Path | None:
        """Start writing ``path``. A recording already there (an episode stopped before its mark, run again by
        ``--continue``) is kept under ``NAME.stopped-N``, whose path is returned (None: nothing was there)."""
        from para_ros.bag.recording import McapRecorder  # rosbags: loaded on first use, not on import

        kept = None
        if path.exists():
            i = 1
            while path.with_name(f"{path.name}.stopped-{i}").exists():
                i += 1
            kept = path.with_name(f"{path.name}.stopped-{i}")
            path.rename(kept)
        bag = McapRecorder(path, self.topics)
        with self._lock:
            for stamp_ns, data in self._static.values():
                bag.write("/tf_static", stamp_ns, data)
            self._bag = bag
        return kept

    def close(self) -> dict:
        """End the open recording; the number of messages it holds per topic ({} when none was open)."""
        with self._lock:
            bag, self._bag = self._bag, None
        if bag is None:
            return {}
        bag.close()
        return dict(bag.counts)


def _wait_first_chunk(link: OperatorLink, run: GraphRun, since: int, stop: threading.Event, started: float) -> float:
    """Seconds from ``started`` (monotonic) until a chunk beyond the ``since``-th arrives (the inference node is up);
    RuntimeError when the node died or :data:`FIRST_CHUNK_TIMEOUT_S` passed. Returns early (NaN) when ``stop`` is
    set."""
    while link.chunks <= since:
        if stop.is_set():
            return float("nan")
        dead = run.first_dead()
        if dead is not None:
            raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{run.log_tail(dead)}")
        if time.monotonic() - started > FIRST_CHUNK_TIMEOUT_S:
            raise RuntimeError(f"no action chunk within {FIRST_CHUNK_TIMEOUT_S:.0f} s of starting the inference node")
        time.sleep(0.05)
    return time.monotonic() - started


def _wait_operator(desk: OperatorDesk, timeout_s: float | None, stop: threading.Event, robot: GraphRun):
    """:meth:`OperatorDesk.wait` in slices of a second, raising RuntimeError as soon as a node of the robot side
    (the executor, the simulator) has died: an evaluation never waits for a mark on an arm nobody holds."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        cmd = desk.wait(max(0.0, left), stop)
        if cmd is not None or stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            return cmd
        _robot_dead(robot)


def _robot_dead(robot: GraphRun) -> None:
    dead = robot.first_dead()
    if dead is not None:
        raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{robot.log_tail(dead)}")


def run_robot_eval(settings: RobotEvalSettings, engage: bool = False, echo: bool = False, keyboard=None) -> int:
    """Run the evaluation of ``settings`` (module docstring); the exit status: 0 done, 1 after an error, 2 for bad
    input (nothing started, nothing written), 130 when stopped by a signal. ``keyboard``: the operator's text stream
    (default stdin)."""
    from para_ros.deploy.closed_loop import check_checkpoint_matches_sim  # the sim's camera set: on first use

    out = Path(settings.out)
    try:
        rows = check_new_or_continued(out, settings)
        if settings.backend == "sim":
            for v in settings.variants:
                check_checkpoint_matches_sim(v.checkpoint)
    except ValueError as exc:
        print(f"para-eval-robot: {exc}", file=sys.stderr)
        return 2
    order = settings.plan()
    labels = [v.label for v in settings.variants]
    done = {r.episode for r in rows}
    todo = [k for k in range(settings.episodes) if k not in done]
    out.mkdir(parents=True, exist_ok=True)
    # the inference node's start until its first chunk, every start of this evaluation (a continued one: also before)
    earlier = json.loads((out / "report.json").read_text()).get("switch_s", []) if rows else []
    extra: dict = {"interrupted": False, "switch_s": list(earlier)}
    if rows:
        print(
            f"para-eval-robot: --continue: {len(rows)} episode(s) kept from {out / 'report.json'}, {len(todo)} to run"
        )
    if not todo:
        write_report(out, settings, rows, extra)
        return 0
    full = graph.plan(
        graph.DeploySettings(
            robot=settings.backend,
            checkpoint=settings.variants[0].checkpoint,
            device=settings.device,
            calibration=settings.calibration,
            engage=engage,
        )
    )
    robot_plan = [(s, o) for s, o in full if s.name != "inference_node"]
    inference_plan = [(s, o) for s, o in full if s.name == "inference_node"]
    logs = out / "logs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")  # a continued run keeps the earlier logs
    robot = GraphRun(logs, echo=echo)
    domain = int(robot.domain_id)
    inference = GraphRun(logs / "inference", echo=echo, domain_id=domain)
    signals = SignalStop("stopped by a signal")
    stop = signals.event
    desk = OperatorDesk()
    link = monitor = recordings = None
    running_variant: int | None = None
    try:
        robot.start_plan(robot_plan, settings.node_params)
        link = OperatorLink(desk, domain)
        link.call("stop", timeout_s=120.0)  # held from the start: no policy moves the arm before episode 0's start
        keyboard_reader(desk, link, keyboard)
        if settings.record:
            from para_ros.bag.recording import ros_type_name
            from para_ros.deploy.monitor import DeployMonitor, graph_topics, record_topics

            topics = graph_topics(full)
            recordings = EpisodeRecordings({t: ros_type_name(c) for t, c in record_topics(topics).items()})
            monitor = DeployMonitor(recordings, topics=topics)
        print(
            f"para-eval-robot: {len(todo)} of {settings.episodes} episodes to run ({', '.join(labels)}; order "
            f"{' '.join(labels[v] for v in order)}), backend {settings.backend}, ROS_DOMAIN_ID {domain}, report in "
            f"{out}; the operator answers on the keyboard or /{NODE_NAME}/start and /{NODE_NAME}/mark",
            flush=True,
        )
        for k in todo:
            if stop.is_set():
                break
            variant = settings.variants[order[k]]
            wall0 = time.monotonic()
            _robot_dead(robot)
            switched_at = None
            if running_variant != order[k]:  # the variant's inference node starts while the scene is reset
                link.call("stop")
                if running_variant is not None:
                    inference.stop(timeout_s=5.0)
                since = link.chunks
                if running_variant is not None:
                    inference.start_again(inference_plan, _inference_params(settings, variant))
                else:
                    inference.start_plan(inference_plan, _inference_params(settings, variant))
                running_variant, switched_at = order[k], time.monotonic()
            link.call("stop")  # the arm holds while the operator resets the scene
            link.prompt("reset", k, variant_index=order[k], time_limit_s=settings.time_limit_s)
            print(f"  episode {k}: reset the scene, then start (Enter, or {k} on /{NODE_NAME}/start)", flush=True)
            if _wait_operator(desk, None, stop, robot) is None:
                break
            if switched_at is not None:
                switch_s = _wait_first_chunk(link, inference, since, stop, switched_at)
                if stop.is_set():
                    break
                extra["switch_s"].append(round(switch_s, 2))
                print(f"  inference node started with {variant.label}: first chunk after {switch_s:.1f} s", flush=True)
            recording = ""
            if recordings is not None:
                path = out / "episodes" / f"{k:03d}"
                kept = recordings.open(path)
                if kept is not None:
                    print(f"  episode {k}: the recording of its stopped run is kept as {kept.name}", flush=True)
                recording = str(path.relative_to(out))
            if stop.wait(settings.settle_s):
                break
            _robot_dead(robot)
            link.call("resume")
            started_at = datetime.now(UTC).isoformat(timespec="seconds")
            t0 = time.monotonic()
            link.prompt("running", k, time_limit_s=settings.time_limit_s)
            print(
                f"  episode {k}: the policy has the arm for up to {settings.time_limit_s:g} s; mark it "
                "(s / f REASON / v REASON)",
                flush=True,
            )
            cmd = _wait_operator(desk, settings.time_limit_s, stop, robot)
            duration_s = time.monotonic() - t0
            link.call("stop")
            limit_hit = cmd is None
            if limit_hit and not stop.is_set():
                link.prompt("judging", k)
                print(f"  episode {k}: time limit: the arm is held; mark it (s / f REASON / v REASON)", flush=True)
                cmd = _wait_operator(desk, None, stop, robot)
            if recordings is not None:
                recordings.close()
            if cmd is None:  # stopped before the mark: not judged, no row
                break
            desk.open("idle", None)
            row = MarkRow(
                episode=k,
                round=round_of(k, len(labels)),
                variant=variant.label,
                outcome=cmd.outcome,
                reason=cmd.reason,
                duration_s=round(min(duration_s, settings.time_limit_s) if limit_hit else duration_s, 3),
                time_limit_hit=limit_hit,
                wall_s=round(time.monotonic() - wall0, 3),
                marked_by=cmd.source,
                recording=recording,
                started_at=started_at,
            )
            rows.append(row)
            rows.sort(key=lambda r: r.episode)
            result = write_report(out, settings, rows, extra)
            print(
                f"  episode {k:3d} [{len(rows)}/{settings.episodes}] round {row.round} {variant.label}: "
                f"{row.outcome:8s} {row.duration_s:5.1f} s{' (time limit)' if limit_hit else ''}"
                + (f"  {row.reason}" if row.reason else "")
                + "  -> "
                + ", ".join(f"{lab} {fmt_rate(result['summaries'][lab])}" for lab in labels),
                flush=True,
            )
    except RuntimeError as exc:
        print(f"para-eval-robot: {exc}", file=sys.stderr)
        extra["error"] = str(exc)
    finally:
        extra["interrupted"] = stop.is_set() and "error" not in extra
        if recordings is not None:
            recordings.close()
        if link is not None:
            try:
                link.call("stop", timeout_s=2.0)  # the arm held before the graph goes
            except RuntimeError:
                pass
            link.close()
        inference.stop(timeout_s=5.0)
        robot.stop(timeout_s=5.0)
        if monitor is not None:
            monitor.stop()
        signals.restore()
    result = write_report(out, settings, rows, extra)
    for lab in labels:
        print(f"para-eval-robot: {lab}: {fmt_rate(result['summaries'][lab])} successes (95 % Wilson interval)")
    for p in result["pairs"]:
        print(
            f"para-eval-robot: {p['a']} vs {p['b']} on {p['seeds']} rounds: {p['a_only']} only {p['a']} succeeded, "
            f"{p['b_only']} only {p['b']}; exact McNemar p = {p['mcnemar_p']:.3g}"
        )
    print(f"para-eval-robot: report {out / 'report.md'}", flush=True)
    return run_exit_status(extra)


def _inference_params(settings: RobotEvalSettings, variant) -> dict:
    """The parameters the inference node starts with for ``variant``: the run's, then the variant's checkpoint and
    its own parameters."""
    return {
        "inference_node": {
            **settings.node_params.get("inference_node", {}),
            **variant.inference_params,
            "checkpoint": variant.checkpoint,
        }
    }
