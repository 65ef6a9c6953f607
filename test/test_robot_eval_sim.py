"""``para-eval-robot`` end to end in the simulator: an A/B of two shipped checkpoints through the real nodes and real
DDS, judged by the scripted operator (its own process, answering the prompts from the simulator's task state),
interrupted with SIGINT after 3 episodes and continued with ``--continue`` to 6.

The reference is the simulator's own judgement, heard by this test's own node: the last ``/sim_node/task_state`` of
each episode's layout (seed 100000 + episode) when the evaluation took the mark (its ``~/feedback``); ``on_target``
(the cube resting released on the pad) must be the report's ``success``, anything else its ``failure``. (Not the
scene's state later: the stopped executor holds its last command, sent ahead of the arm, so the arm still moves a
little, and one run saw a cube judged on the pad at its success mark and off it at the episode's end.) The report's rates, Wilson intervals
and McNemar p-value are recomputed here from the per-episode outcomes with the textbook formulas. Bad input on the
way: a mark for an episode that is not running (refused on ``~/feedback``, the report unchanged), and a new
evaluation into the same folder without ``--continue`` (refused, nothing overwritten)."""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from ros_helpers import start_python, stop_process

from para_ros.ros_io.spin import spin_until

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SEED = 100000
TIME_LIMIT_S = 8.0  # about the shipped policy's time to success on this busy CPU: both outcomes come up
MARKED = re.compile(r"^episode (\d+) marked (\w+)")
PROGRESS = re.compile(r"^\s+episode\s+(\d+) \[\d+/\d+\] round \d+ (\w+): (\w+)")


class SimWitness:
    """The test's own node: the simulator's task state of each open episode's layout, the evaluation's prompts and
    feedback; it can publish a mark of its own."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.String = String
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node("robot_eval_witness", context=self.context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.lock = threading.Lock()
        self.prompt: dict | None = None
        self.prompts: list[dict] = []
        self.feedback: list[str] = []
        self.last_state: dict[int, dict] = {}  # layout seed -> its last task state while its episode was open
        self.at_mark: dict[int, dict | None] = {}  # episode -> last_state of its layout when its mark was taken
        self.node.create_subscription(String, "/para_eval_robot/prompt", self._on_prompt, latched)
        self.node.create_subscription(String, "/para_eval_robot/feedback", self._on_feedback, QoSProfile(depth=50))
        self.node.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=200))
        self.mark_pub = self.node.create_publisher(String, "/para_eval_robot/mark", QoSProfile(depth=10))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        spin_until(self.executor, lambda: not self.context.ok(), on_error="stop")

    def _on_prompt(self, msg):
        with self.lock:
            self.prompt = json.loads(msg.data)
            self.prompts.append(self.prompt)

    def _on_feedback(self, msg):
        with self.lock:
            self.feedback.append(msg.data)
            m = MARKED.match(msg.data)
            if m:  # the simulator's state of that episode's layout when the mark was taken
                self.at_mark[int(m.group(1))] = self.last_state.get(SEED + int(m.group(1)))

    def _on_state(self, msg):
        st = json.loads(msg.data)
        with self.lock:
            p = self.prompt
            if p and p["phase"] in ("running", "judging") and st.get("seed") == SEED + p["episode"]:
                self.last_state[st["seed"]] = st

    def forget_prompt(self):
        """Between two runs: no episode is open (a new simulator's first states are of its default layout)."""
        with self.lock:
            self.prompt = None

    def mark(self, text: str):
        self.mark_pub.publish(self.String(data=text))

    def close(self):
        self.context.try_shutdown()
        self.thread.join(timeout=3.0)


def _eval_args(out: Path, episodes: int, *extra: str) -> list[str]:
    return [
        "para_ros.commands.eval_robot",
        "--variant",
        f"A={REPO / 'checkpoints/pick_place'}",
        "--variant",
        f"B={REPO / 'checkpoints/pick_place_fewshot5'}",
        "--episodes",
        str(episodes),
        "--time-limit",
        str(TIME_LIMIT_S),
        "--out",
        str(out),
        *extra,
    ]


def _follow(proc, lines: list[str], progress: list[tuple], on_progress=None) -> threading.Thread:
    def read():
        for line in proc.stdout:
            lines.append(line.rstrip())
            m = PROGRESS.match(line)
            if m:
                progress.append((int(m.group(1)), m.group(2), m.group(3)))
                if on_progress is not None:
                    on_progress(len(progress))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _finish(proc, reader: threading.Thread, operator, timeout_s: float) -> int | None:
    """Wait for ``proc`` to end by itself (its output read by ``reader``); fail at once if the scripted operator
    died (nobody would answer), SIGINT then kill ``proc`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if operator.poll() is not None:
                    stop_process(proc, timeout_s=20)
                    pytest.fail("the scripted operator died:\n" + operator.communicate()[0][-3000:])
        stop_process(proc, timeout_s=20)
        return None
    finally:
        reader.join(timeout=5)


def _wilson(k: int, n: int) -> list[float]:
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.timeout(2700)  # two graphs, six episodes, three restarts of the inference node on a shared 2-core CPU
def test_operator_judged_ab_in_the_simulator_interrupted_and_continued(tmp_path):
    out = tmp_path / "ab"
    witness = SimWitness()
    operator = start_python(["para_ros.deploy.scripted_operator", "--seed", str(SEED)], module=True)
    try:
        # ---- run 1: interrupted (SIGINT, as Ctrl-C) once 3 episodes are judged
        lines: list[str] = []
        progress: list[tuple] = []
        proc = start_python(_eval_args(out, 6), module=True)

        def interrupt(n):
            if n == 3:
                proc.send_signal(signal.SIGINT)

        reader = _follow(proc, lines, progress, interrupt)
        # a stray mark for an episode that is not running, once episode 0 is open
        _wait(lambda: witness.prompt is not None, 600, "no prompt from para-eval-robot:\n" + "\n".join(lines))
        witness.mark("5 success")
        _wait(lambda: len(progress) >= 1, 900, "episode 0 never judged:\n" + "\n".join(lines))
        report0 = json.loads((out / "report.json").read_text())
        witness.mark("0 failure marked late")  # episode 0 is judged: this mark is for no running episode
        rc = _finish(proc, reader, operator, 1200)  # the SIGINT comes from interrupt()
        assert rc == 130, "\n".join(lines)
        assert any(f.startswith("refused: episode 5 is not running") for f in witness.feedback), witness.feedback
        assert any(f.startswith("refused: episode 0 is not running") for f in witness.feedback), witness.feedback
        first = json.loads((out / "report.json").read_text())
        assert first["interrupted"] is True
        assert [r["episode"] for r in first["episodes"]] == [0, 1, 2]
        assert first["episodes"][0] == report0["episodes"][0]  # the late mark changed nothing
        witness.forget_prompt()

        # ---- a new evaluation into the same folder without --continue: refused, nothing overwritten
        before = (out / "report.json").read_bytes()
        bad = start_python(_eval_args(out, 6), module=True)
        rc, text = stop_process(bad, timeout_s=120, stop_signal=0)  # signal 0: none; waits for its own end
        assert rc == 2 and "holds an evaluation already" in text and "--continue" in text, text
        assert (out / "report.json").read_bytes() == before

        # ---- run 2: --continue to 6
        lines2: list[str] = []
        proc2 = start_python(_eval_args(out, 6, "--continue"), module=True)
        reader2 = _follow(proc2, lines2, progress)
        rc = _finish(proc2, reader2, operator, 1200)
        assert rc == 0, "\n".join(lines2)
        assert "--continue: 3 episode(s) kept" in "\n".join(lines2)
    finally:
        stop_process(operator, timeout_s=10)
        witness.close()

    report = json.loads((out / "report.json").read_text())
    rows = report["episodes"]
    assert report["order"] == ["A", "B", "B", "A", "A", "B"]  # ABBA, continued in the same order
    assert [r["episode"] for r in rows] == list(range(6))
    assert [r["variant"] for r in rows] == report["order"]
    assert rows[:3] == first["episodes"]  # the kept episodes, every field
    assert sorted(p[0] for p in progress) == list(range(6))  # one progress line per episode over the two runs

    # every outcome is the simulator's own judgement of that layout at the episode's end
    sim_says = {}
    for r in rows:
        st = witness.at_mark.get(r["episode"])
        assert st is not None, f"no task state of episode {r['episode']}'s layout when it was marked"
        sim_says[r["episode"]] = "success" if st["state"] == "on_target" else "failure"
    later = {k: witness.last_state.get(SEED + k, {}).get("state") for k in range(6)}
    assert {r["episode"]: r["outcome"] for r in rows} == sim_says, f"the scene's last states: {later}"
    for r in rows:
        if r["outcome"] == "failure":
            assert r["reason"] in ("no_grasp", "dropped", "misplaced", "fallen", "timeout") and r["time_limit_hit"]
        assert 0 < r["duration_s"] <= TIME_LIMIT_S + 0.5

    # the figures, recomputed by hand from the outcomes
    for lab in ("A", "B"):
        mine = [r for r in rows if r["variant"] == lab]
        k = sum(r["outcome"] == "success" for r in mine)
        s = report["summaries"][lab]
        assert (s["successes"], s["episodes"]) == (k, 3)
        assert s["wilson95"] == pytest.approx(_wilson(k, 3), abs=1e-9)
    rounds: dict[int, dict] = {}
    for r in rows:
        rounds.setdefault(r["round"], {})[r["variant"]] = r["outcome"] == "success"
    b = sum(v["A"] and not v["B"] for v in rounds.values())
    c = sum(v["B"] and not v["A"] for v in rounds.values())
    tail = sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c)
    (pair,) = report["pairs"]
    assert (pair["a_only"], pair["b_only"], pair["seeds"]) == (b, c, 3)
    assert pair["mcnemar_p"] == pytest.approx(min(1.0, 2 * tail) if b + c else 1.0)

    # one recording per episode, each a bag the project's reader replays (cameras, TF, joint states)
    from para_ros.bag.reader import BagReader

    for r in rows:
        with BagReader(out / r["recording"]) as bag:
            assert sum(1 for _ in bag.observations()) >= 3
