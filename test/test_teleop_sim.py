"""``para-teleop`` end to end in the simulator, real DDS, real MuJoCo, real rosbags.

1. A session led by the scripted leader (the simulator's expert at the leader arm): each episode's bag extracts with
   ``para-bag extract``; the extracted tool poses equal, within 1 mm, the i2rt SDK's own FK of the simulator's joint
   states recorded at the same stamps (an independent kinematic model of the simulator's truth); the tool path visits
   the layout's cube and pad; ``teleop.json`` holds the task and the scripted leader's mark, which is the simulator's
   own judgement (``/sim_node/task_state``, heard by this test). A mark for an episode that is not running is
   refused on ``~/feedback``. Slow: 5 episodes, and a tiny policy trained from them.
2. Faults with this test as the leader (its own node publishing ``/leader/joint_states``): a leader jump of 1 rad, a
   leader that stops, a leader driven beyond a joint limit, a leader with 7 joints. The follower follows a slow leader
   (the positive control), holds on the jump and the loss, and every command the executor sent (heard with its
   publication sequence numbers) is inside ``config/yam.yaml``'s joint range and workspace box, with per-tick joint
   and tool steps within the speed limits over the ticks the sequence numbers say passed.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from executor_helpers import ReferenceKinematics, load_limits
from ros_helpers import start_python, stop_process

from para_core.data.dataset import Episode
from para_ros.commands import bag as bag_tools
from para_ros.sim.pick_place import sample_layout

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parent.parent
TASK = "pick the cube, place it on the pad"
ARM = [f"joint{i}" for i in range(1, 7)]


class Witness:
    """The test's own node: the session's prompts, feedback and leader state, the simulator's task state and joint
    states, every executor command with its sequence number; it can publish commands and leader states."""

    def __init__(self):
        import rclpy
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from trajectory_msgs.msg import JointTrajectory

        self.String, self.JointState = String, JointState
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = n = rclpy.create_node("teleop_witness", context=self.context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.lock = threading.RLock()
        self.prompt: dict | None = None
        self.feedback: list[str] = []
        self.leader_state: dict = {}
        self.task_states: list[dict] = []
        self.follower: np.ndarray | None = None
        self.follower_stamp = 0.0  # header stamp of ``follower`` (the simulator's clock: this machine's wall clock)
        self.follower_history: list[tuple[float, np.ndarray]] = []  # (stamp, q) of every follower state heard
        self.commands: list[tuple[int, float, np.ndarray]] = []  # (sequence number, receipt time, q (6,))
        self.command_stamps: dict[int, float] = {}  # sequence number -> the command's target time (s)
        n.create_subscription(String, "/para_teleop/prompt", self._on_prompt, latched)
        n.create_subscription(String, "/para_teleop/feedback", self._on_feedback, QoSProfile(depth=100))
        n.create_subscription(String, "/para_teleop/leader_state", self._on_leader_state, QoSProfile(depth=10))
        n.create_subscription(String, "/sim_node/task_state", self._on_task, QoSProfile(depth=200))
        n.create_subscription(JointState, "/joint_states", self._on_joints, qos_profile_sensor_data)
        n.create_subscription(JointTrajectory, "/joint_trajectory", self._on_command, QoSProfile(depth=1000))
        # the executor publishes each command's tool pose in the same tick, stamped with its target time: the n-th
        # message of each topic is the n-th command, so the sequence numbers pair them
        n.create_subscription(PoseStamped, "/chunk_executor/commanded_pose", self._on_pose, QoSProfile(depth=1000))
        self.command_pub = n.create_publisher(String, "/para_teleop/command", QoSProfile(depth=10))
        self.leader_pub = n.create_publisher(JointState, "/leader/joint_states", qos_profile_sensor_data)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - shutting down
                return

    def _on_prompt(self, msg):
        with self.lock:
            self.prompt = json.loads(msg.data)

    def _on_feedback(self, msg):
        with self.lock:
            self.feedback.append(msg.data)

    def _on_leader_state(self, msg):
        with self.lock:
            self.leader_state = json.loads(msg.data)

    def _on_task(self, msg):
        with self.lock:
            self.task_states.append(json.loads(msg.data))

    def _on_joints(self, msg):
        d = dict(zip(msg.name, msg.position))
        if all(j in d for j in ARM):
            with self.lock:
                self.follower = np.array([d[j] for j in ARM])
                self.follower_stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                self.follower_history.append((self.follower_stamp, self.follower))

    def _on_command(self, msg, info):
        q = np.array(msg.points[0].positions[:6])
        with self.lock:
            self.commands.append((info["publication_sequence_number"], time.monotonic(), q))

    def _on_pose(self, msg, info):
        with self.lock:
            self.command_stamps[info["publication_sequence_number"]] = (
                msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            )

    def say(self, text: str):
        self.command_pub.publish(self.String(data=text))

    def lead(self, q, names=ARM, gripper=1.0):
        msg = self.JointState()
        msg.name = [*names, "gripper"]
        msg.position = [float(v) for v in q] + [float(gripper)]
        self.leader_pub.publish(msg)

    def wait(self, what, timeout_s: float, every_s: float = 0.05):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                value = what()
            if value is not None and value is not False:
                return value
            time.sleep(every_s)
        with self.lock:
            raise AssertionError(f"timed out; feedback {self.feedback[-5:]}, leader {self.leader_state}")

    def close(self):
        self.context.try_shutdown()
        self.thread.join(timeout=2.0)


def _truth_errors_m(bag: Path, episode_dir: Path, kin: ReferenceKinematics) -> tuple[int, float, float]:
    """(frames compared, largest position error m, largest rotation error rad) between the extracted tool poses and
    the SDK's FK of the recorded joint states at the same stamps."""
    from rosbags.rosbag2 import Reader
    from scipy.spatial.transform import Rotation

    from para_ros.bag.recording import make_typestore

    ep = Episode.load(episode_dir)
    store = make_typestore()
    joints = {}
    with Reader(bag) as reader:
        connections = [c for c in reader.connections if c.topic == "/joint_states"]
        for c, _, raw in reader.messages(connections=connections):
            m = store.deserialize_cdr(raw, c.msgtype)
            joints[m.header.stamp.sec * 10**9 + m.header.stamp.nanosec] = dict(zip(m.name, m.position))
    n, pos, rot = 0, 0.0, 0.0
    for t_ns, T in zip(ep.stamps_ns, ep.T_world_ee):
        if int(t_ns) not in joints:
            continue
        ref = kin.fk([joints[int(t_ns)][j] for j in ARM])
        pos = max(pos, float(np.linalg.norm(ref[:3, 3] - T[:3, 3])))
        rot = max(rot, float(Rotation.from_matrix(ref[:3, :3].T @ T[:3, :3]).magnitude()))
        n += 1
    return n, pos, rot


def _teleop_args(out: Path, *extra: str) -> list[str]:
    return ["para_ros.commands.teleop", "--robot", "sim", "--task", TASK, "--out", str(out), *extra]


def _scripted_session(tmp_path: Path, episodes: int, seed: int) -> tuple[Path, Witness, str]:
    out = tmp_path / "teleop"
    witness = Witness()
    proc = start_python(_teleop_args(out, "--scripted-leader", str(seed), "--episodes", str(episodes)), module=True)
    try:
        # once episode 0 records, a mark for another episode is refused
        witness.wait(lambda: bool(witness.prompt) and witness.prompt["phase"] == "recording", 180.0)
        witness.say("5 success")
        text, _ = proc.communicate(timeout=120 + 40 * episodes)
    finally:
        stop_process(proc)
    assert proc.returncode == 0, text
    return out, witness, text


def _check_episodes(out: Path, witness: Witness, seed: int, episodes: int, tmp_path: Path) -> list[Path]:
    kin = ReferenceKinematics()
    bags = sorted(out.glob("episode_*"))
    assert [b.name for b in bags] == [f"episode_{k:06d}" for k in range(episodes)]
    extracted = []
    for k, bag in enumerate(bags):
        meta = json.loads((bag / "teleop.json").read_text())
        assert meta["task"] == TASK and meta["episode"] == k and meta["robot"] == "sim"
        # the mark is the simulator's own judgement of that layout (its last task state)
        states = [s for s in witness.task_states if s.get("seed") == seed + k]
        assert states, f"no task state of layout {seed + k} heard"
        truth = "success" if states[-1]["state"] == "on_target" else "failure"
        assert meta["mark"] == truth, (meta, states[-1])
        ep_dir = tmp_path / f"ep{k}"
        assert bag_tools.main(["extract", str(bag), "--out", str(ep_dir), "--fps", "10", "--quiet"]) == 0
        ep = Episode.load(ep_dir)
        assert ep.view_names == ("scene", "wrist") and len(ep) >= 40
        n, pos_err, rot_err = _truth_errors_m(bag, ep_dir, kin)
        assert n >= 0.8 * len(ep) and pos_err < 1e-3 and rot_err < 1e-3, (n, len(ep), pos_err, rot_err)
        lay = sample_layout(seed + k)
        xy = ep.T_world_ee[:, :2, 3]
        assert np.linalg.norm(xy - lay.cube_xy_m, axis=1).min() < 0.015, "the tool never went to the cube"
        if meta["mark"] == "success":
            assert np.linalg.norm(xy - lay.target_xy_m, axis=1).min() < 0.015, "the tool never went to the pad"
        extracted.append(ep_dir)
    refused = [f for f in witness.feedback if f.startswith("refused: success for episode 5")]
    assert refused and "it is not running (episode 0 is)" in refused[0], witness.feedback
    return extracted


def test_a_teleoperated_episode_is_recorded_and_extracts_to_the_simulators_truth(tmp_path):
    witness = None
    try:
        out, witness, _ = _scripted_session(tmp_path, episodes=1, seed=0)
        _check_episodes(out, witness, 0, 1, tmp_path)
        # export-lerobot takes the recording as it is, its task from teleop.json
        ds = tmp_path / "ds"
        assert bag_tools.main(["export-lerobot", str(out / "episode_000000"), "--out", str(ds), "--quiet"]) == 0
        import pyarrow.parquet as pq

        tasks = pq.read_table(ds / "meta" / "tasks.parquet").to_pylist()  # LeRobot v3: the task is the index
        assert [t["task_index"] for t in tasks] == [0] and TASK in tasks[0].values()
        assert [json.loads(line)["mark"] for line in (out / "episodes.jsonl").read_text().splitlines()] == [
            json.loads((out / "episode_000000" / "teleop.json").read_text())["mark"]
        ]
    finally:
        if witness is not None:
            witness.close()


@pytest.mark.slow
def test_five_teleoperated_episodes_extract_and_train(tmp_path):
    from para_core.train import cli as train_cli

    witness = None
    try:
        out, witness, _ = _scripted_session(tmp_path, episodes=5, seed=10)
        eps = _check_episodes(out, witness, 10, 5, tmp_path)
    finally:
        if witness is not None:
            witness.close()
    data = tmp_path / "data"
    data.mkdir()
    for ep in eps:
        ep.rename(data / ep.name)
    rc = train_cli.main(
        ["--data", str(data), "--preset", "tiny", "--out", str(tmp_path / "run"), "--max-iters", "3"]
        + ["--val-fraction", "0", "--num-workers", "0", "--no-progress"]
    )
    assert rc == 0 and (tmp_path / "run" / "checkpoint" / "model.safetensors").is_file()


def test_the_follower_holds_or_stays_within_every_limit_whatever_the_leader_does(tmp_path):
    limits = load_limits()
    lower, upper = np.array(limits["joint_lower_rad"]), np.array(limits["joint_upper_rad"])
    speed = np.array(limits["max_joint_speed_rad_s"])
    box_lo, box_hi = np.array(limits["workspace_min_m"]), np.array(limits["workspace_max_m"])
    executor = yaml.safe_load((REPO / "config" / "executor.yaml").read_text())["chunk_executor"]["ros__parameters"]
    period_s = 1.0 / executor["control_rate_hz"]
    witness = Witness()
    proc = start_python(_teleop_args(tmp_path / "rec"), module=True)
    leader = {"q": None, "names": ARM, "on": True}
    stop = threading.Event()

    def lead():  # the leader arm: 50 states a second of whatever leader["q"] says, while on
        while not stop.is_set():
            if leader["on"] and leader["q"] is not None:
                witness.lead(leader["q"], leader["names"])
            time.sleep(0.02)

    # Phases are cut by the commands' own stamps (the executor's clock is this machine's wall clock: tick time + the
    # 0.05 s lookahead), never by when this busy process got round to a message: deliveries can lag by seconds.
    def stamped():  # (stamp, q) of every command heard with its stamp, in the executor's order
        with witness.lock:
            return [
                (witness.command_stamps[s], q)
                for s, _, q in sorted(witness.commands, key=lambda c: c[0])
                if s in witness.command_stamps
            ]

    def latest():
        with witness.lock:
            cmds = stamped()
            return cmds[-1][1] if cmds else None

    def commands_between(t0, t1):
        """The commands stamped in [t0, t1), once this process has heard the follower's state of t1 (and so,
        delivered in order, the commands before it). The executor may have sent none for a while: after a lost
        joint state it is silent until the next chunk (the arm's controller keeps the last point)."""
        witness.wait(lambda: witness.follower_stamp >= t1, 30.0)
        time.sleep(0.2)
        return np.array([q for t, q in stamped() if t0 <= t < t1]).reshape(-1, 6)

    def follower_at(t):
        """The follower's measured joints of the first state stamped at or after t."""
        witness.wait(lambda: witness.follower_stamp >= t, 30.0)
        return witness.follower.copy()

    def move(start, end, seconds):
        t0 = time.monotonic()
        while (s := (time.monotonic() - t0) / seconds) < 1.0:
            leader["q"] = start + s * (end - start)
            time.sleep(0.02)
        leader["q"] = end.copy()

    def drive(end, seconds, tries=3):
        """Move the leader from the follower to ``end``. On a loaded machine this process's leader stream can stall
        past the leader timeout: the gate then holds the follower, as it should, and the move starts again from
        where the follower stopped (at most ``tries`` times)."""
        for _ in range(tries):
            leader["q"] = witness.follower.copy()
            witness.wait(lambda: witness.leader_state.get("state") == "following", 30.0)
            move(leader["q"].copy(), end, seconds)
            time.sleep(1.0)
            if witness.leader_state.get("state") == "following":
                return
        raise AssertionError(f"the leader lost the follower {tries} times: {witness.leader_state}")

    thread = threading.Thread(target=lead, daemon=True)
    thread.start()
    try:
        q0 = witness.wait(lambda: None if witness.follower is None else witness.follower.copy(), 180.0)
        leader["q"] = q0.copy()
        witness.wait(lambda: witness.leader_state.get("state") == "following", 30.0)
        # positive control: a slow leader is followed (waits: DDS discovery and a loaded machine take their time)
        target = q0 + [0.3, 0, 0, 0, 0, 0]
        drive(target, 1.5)
        witness.wait(lambda: latest() is not None and abs(latest()[0] - target[0]) < 0.01, 30.0)
        time.sleep(0.5)
        # a 1 rad jump: held
        t_jump = time.time()
        leader["q"] = target + [1.0, 0, 0, 0, 0, 0]
        time.sleep(1.5)
        assert witness.leader_state["state"] == "syncing" and witness.leader_state["jumps"] >= 1
        t_end = time.time()
        before = commands_between(0.0, t_jump)[-1]  # the last command before the jump
        after_jump = commands_between(t_jump, t_end)
        assert abs(before[0] - target[0]) < 0.01
        assert np.abs(after_jump - before).max(initial=0.0) < 0.01, "commanded towards the jump"
        assert np.abs(follower_at(t_end) - before).max() < 0.02, "the follower moved towards the jump"
        # back to the follower: followed again; then the leader stops: held
        leader["q"] = witness.follower.copy()
        witness.wait(lambda: witness.leader_state.get("state") == "following", 30.0)
        time.sleep(0.5)
        leader["on"] = False
        witness.wait(lambda: witness.leader_state.get("state") == "no_leader", 30.0)
        t_lost = time.time()
        at_loss = follower_at(t_lost + 0.3)  # the last chunk's 0.1 s are over: the executor holds
        time.sleep(1.5)
        t_end = time.time()
        held = commands_between(t_lost + 0.3, t_end)
        assert np.abs(held - held[:1]).max(initial=0.0) < 1e-4, "commanded a move without a leader"
        assert np.abs(follower_at(t_end) - at_loss).max() < 1e-3, "the follower moved without a leader"
        # back, then joint6 (the tool's roll: the tool stays where it is, inside the workspace box) driven 0.4 rad
        # beyond its upper limit: the follower goes to the limit and no further
        leader["q"] = witness.follower.copy()
        leader["on"] = True
        witness.wait(lambda: witness.leader_state.get("state") == "following", 30.0)
        t_beyond = time.time()
        beyond = leader["q"].copy()
        beyond[5] = upper[5] + 0.4
        drive(beyond, 2.0)
        time.sleep(0.5)
        at_limit = commands_between(t_beyond, time.time())
        assert len(at_limit) > 50 and at_limit[:, 5].max() <= upper[5] + 1e-6
        assert at_limit[:, 5].max() > upper[5] - 0.01, "the follower did not reach the limit"
        assert witness.leader_state["clamped_ticks"] > 0
        # a leader of another joint count: refused, named, and the follower holds
        leader["names"] = [*ARM, "joint7"]
        leader["q"] = np.append(witness.follower, 0.0)
        witness.wait(lambda: any("leader refused: the leader has 7 arm joints" in f for f in witness.feedback), 30.0)
        witness.wait(lambda: witness.leader_state.get("state") == "no_leader", 30.0)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=60)
    except BaseException:
        print(stop_process(proc)[1])  # para-teleop's own account, with the failure
        raise
    finally:
        stop.set()
        thread.join(timeout=2.0)
        stop_process(proc)
        witness.close()
    assert proc.returncode == 130, text
    kin = ReferenceKinematics()
    heard = [c for c in sorted(witness.commands, key=lambda c: c[0]) if c[0] in witness.command_stamps]
    assert len(heard) > 500 and len(heard) > 0.9 * len(witness.commands)
    history = list(witness.follower_history)

    def reseeded(q, t0, t1) -> bool:
        """``q`` is where the follower was measured around the silent spell (t0, t1): the executor's restart after a
        lost joint state (its first command is the measured joints, clamped into the joint range). Within 0.01 rad
        of the follower's measured path (the segments between the states this process heard: it may have missed the
        very one the executor read)."""
        path = [np.clip(m, lower, upper) for ts, m in history if t0 - 0.5 <= ts <= t1]
        for a, b in zip(path, path[1:] or path):
            d = b - a
            u = 0.0 if not d.any() else float(np.clip(np.dot(q - a, d) / np.dot(d, d), 0.0, 1.0))
            if np.abs(a + u * d - q).max() < 0.01:
                return True
        return False

    prev, reseeds = None, 0
    for seq, _, q in heard:
        assert np.all(q >= lower - 1e-6) and np.all(q <= upper + 1e-6), f"joint limit broken at #{seq}: {q}"
        p = kin.fk(q)[:3, 3]
        assert np.all(p >= box_lo - 1e-4) and np.all(p <= box_hi + 1e-4), f"tool outside the workspace at #{seq}"
        t = witness.command_stamps[seq]
        if prev is not None:
            # ticks between the two commands: from the stamps (a feedback loss sends nothing for a while), at least
            # the number of commands between them (one a tick)
            ticks = max(seq - prev[0], round((t - prev[3]) / period_s))
            dt = period_s * ticks
            assert seq > prev[0]
            if ticks > seq - prev[0] and reseeded(q, prev[3], t):
                reseeds += 1  # after a silent spell the executor restarts from the measured joints (no motion)
            else:
                assert np.all(np.abs(q - prev[1]) <= speed * dt + 1e-6), f"joint speed limit broken at #{seq}"
                assert np.linalg.norm(p - prev[2]) <= limits["max_ee_speed_m_s"] * dt + 1e-4, f"tool too fast at #{seq}"
        prev = (seq, q, p, t)
