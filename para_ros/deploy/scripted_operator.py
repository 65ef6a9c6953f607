"""A scripted operator for ``para-eval-robot --robot sim``: answers the evaluation's prompts the way a person beside
the arm would, from what the simulator itself sees, so that the whole operator-judged procedure runs here.

    python -m para_ros.deploy.scripted_operator --seed 100000     # next to para-eval-robot, in its ROS domain

- prompt ``reset`` for episode k: resets the scene through the simulator's own mechanism (``task_seed`` = seed + k,
  ``/sim_node/reset_task``: arm home, cube and pad at that layout), then publishes ``k`` on ``~/start``;
- prompt ``running``: follows ``/sim_node/task_state`` of that layout with the simulator's judgement
  (:class:`para_ros.sim.pick_place.EpisodeMonitor`) and marks ``success`` once the cube has rested released on the
  pad for ``success_hold_s``;
- prompt ``judging`` (the time limit came, the arm is held): waits until the scene has stopped changing (the
  simulator's state of the cube the same for ``still_s``, and not ``moving``; at most ``rest_wait_s``), as a person
  looks once things stopped moving: a gripper that was opening at the limit still lets the cube go onto the pad.
  Then marks ``success`` if the cube rests on the pad, else ``failure`` with the simulator's cause (``no_grasp``,
  ``dropped``, ``misplaced``, ``fallen``, ``timeout``) as the reason.

It never reads the evaluation's report: the report's outcomes are checked against the simulator by the tests.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from para_ros.ros_io.spin import spin_until
from para_ros.sim.pick_place import EpisodeMonitor, Judgement, check_seed

EVAL_NODE = "/para_eval_robot"
RESET_TRIES = 6  # the simulator's reset is asked for up to this many times (each waits 10 s for the answer)


class ScriptedOperator:
    """The operator's node (own rclpy context, spun in a thread); :meth:`close` ends it."""

    def __init__(
        self,
        seed: int,
        success_hold_s: float = 0.5,
        still_s: float = 1.0,
        rest_wait_s: float = 5.0,
        domain_id: int | None = None,
    ):
        import rclpy  # rclpy: loaded on first use, not on import
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        check_seed(seed)
        if not (0 < success_hold_s <= 10 and 0 <= still_s <= rest_wait_s <= 30):
            raise ValueError(
                f"success_hold_s={success_hold_s} must be in (0, 10] s, still_s={still_s} and rest_wait_s="
                f"{rest_wait_s} within [0, 30] s with still_s <= rest_wait_s"
            )
        self.seed, self.success_hold_s, self.still_s, self.rest_wait_s = seed, success_hold_s, still_s, rest_wait_s
        self.String = String
        self.context = rclpy.Context()
        rclpy.init(
            args=[],
            context=self.context,
            signal_handler_options=SignalHandlerOptions.NO,
            **({} if domain_id is None else {"domain_id": int(domain_id)}),
        )
        self.node = rclpy.create_node("para_scripted_operator", context=self.context)
        n = self.node
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.start_pub = n.create_publisher(String, f"{EVAL_NODE}/start", QoSProfile(depth=10))
        self.mark_pub = n.create_publisher(String, f"{EVAL_NODE}/mark", QoSProfile(depth=10))
        self.params = n.create_client(SetParameters, "/sim_node/set_parameters")
        self.reset = n.create_client(Trigger, "/sim_node/reset_task")
        self._lock = threading.Lock()
        self._prompts: list[dict] = []
        self._states: list[dict] = []
        n.create_subscription(String, f"{EVAL_NODE}/prompt", self._on_prompt, latched)
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=200))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self._spin_forever, daemon=True)
        self._spin.start()
        self.marks: dict[int, tuple[str, str]] = {}  # episode -> (outcome, reason) it sent

    def _spin_forever(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), period_s=0.1, on_error="continue")

    def _on_prompt(self, msg) -> None:
        with self._lock:
            self._prompts.append(json.loads(msg.data))

    def _on_state(self, msg) -> None:
        with self._lock:
            self._states.append(json.loads(msg.data))

    def _take(self) -> tuple[list[dict], list[dict]]:
        with self._lock:
            prompts, states = self._prompts, self._states
            self._prompts, self._states = [], []
        return prompts, states

    def close(self) -> None:
        if self.context.ok():
            self.context.try_shutdown()
        self._spin.join(timeout=5.0)

    def _send(self, pub, text: str) -> None:
        pub.publish(self.String(data=text))

    def run(self, stop: threading.Event) -> None:
        """Answer prompts until ``stop`` is set."""
        from para_ros.ros_io.task_services import reset_task  # rclpy helpers: loaded on first use

        episode, phase, monitor, layout_seed, run = None, "idle", EpisodeMonitor(), None, None
        success_since = None
        judging_since = None
        last: Judgement | None = None
        state_since = 0.0  # when the cube's judged state last changed
        while not stop.is_set():
            time.sleep(0.02)
            prompts, states = self._take()
            for p in prompts:
                if p["phase"] == "reset" and (p.get("run"), p["episode"], "reset") != (run, episode, phase):
                    run, episode, phase = p.get("run"), p["episode"], "reset"
                    self.marks.pop(episode, None)  # a continued evaluation runs an unmarked episode again
                    layout_seed = self.seed + episode
                    try:
                        self._reset(reset_task, layout_seed, stop)
                    except RuntimeError:  # that evaluation is gone (or not there yet): wait for the next prompt
                        continue
                    monitor, success_since, last = EpisodeMonitor(), None, None
                    self._send(self.start_pub, str(episode))
                elif p["phase"] in ("running", "judging") and (p.get("run"), p["episode"]) == (run, episode):
                    phase = p["phase"]
                    judging_since = time.monotonic() if phase == "judging" else None
            now = time.monotonic()
            for st in states:
                if st.get("seed") != layout_seed or phase not in ("running", "judging"):
                    continue
                before = last.state if last is not None else None
                last = monitor.update(Judgement(st["state"], st["place_error_m"], st["cube_height_m"], st["held"]))
                state_since = now if last.state != before else state_since
                success_since = (success_since or now) if last.success else None
            if episode in self.marks or last is None:
                continue
            if phase == "running" and success_since is not None and now - success_since >= self.success_hold_s:
                self._mark(episode, "success", "")
            elif phase == "judging" and (
                (last.state != "moving" and now - max(state_since, judging_since) >= self.still_s)
                or now - judging_since >= self.rest_wait_s
            ):
                outcome = monitor.outcome()
                self._mark(
                    episode, "success" if outcome == "success" else "failure", "" if outcome == "success" else outcome
                )

    def _reset(self, reset_task, layout_seed: int, stop: threading.Event) -> None:
        """Reset the scene to ``layout_seed``, trying again while the simulator does not answer (a simulator that
        has just started, beside the endpoints of the one before it that DDS still announces), as a person would
        press the button again; RuntimeError after :data:`RESET_TRIES` tries (or when ``stop`` is set)."""
        for attempt in range(1, RESET_TRIES + 1):
            try:
                reset_task(self.params, self.reset, layout_seed)
                return
            except RuntimeError as exc:
                print(f"scripted operator: reset to layout {layout_seed}, try {attempt}: {exc}", flush=True)
                if attempt == RESET_TRIES or stop.wait(1.0):
                    raise

    def _mark(self, episode: int, outcome: str, reason: str) -> None:
        self.marks[episode] = (outcome, reason)
        self._send(self.mark_pub, f"{episode} {outcome} {reason}".strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m para_ros.deploy.scripted_operator", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=100000, help="layout seed of episode 0 (episode k: seed + k)")
    parser.add_argument("--success-hold", type=float, default=0.5, help="seconds the cube must rest on the pad")
    parser.add_argument(
        "--still", type=float, default=1.0, help="at a time limit: seconds the cube's state must stay the same"
    )
    parser.add_argument("--rest-wait", type=float, default=5.0, help="at a time limit: seconds to wait at most")
    args = parser.parse_args(argv)
    from para_ros.deploy.graph_run import SignalStop

    signals = SignalStop("stopped by a signal")
    op = ScriptedOperator(args.seed, args.success_hold, args.still, args.rest_wait)
    try:
        op.run(signals.event)
    finally:
        op.close()
        signals.restore()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
