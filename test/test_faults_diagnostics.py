"""Diagnostics recover: every problem a node reports on /diagnostics clears once its condition is gone.

``para_ros.nodes.health`` promises that a problem clears when its condition is gone; a problem that is set and never
cleared keeps ``/diagnostics`` at WARN forever (it happened with a wrist image stamped in the past). Two kinds of check:

* static: every problem key the inference node's code sets (``health.problem(KEY, ...)``, ``ObservationProblem(KEY,
  ...)`` in the node or the observation builder it calls) has a ``health.clear(KEY)`` somewhere in that code, and every keyed problem of the executor core
  (``status.problems[KEY] = ...``) a ``problems.pop(KEY)``; keys must be literal strings, f-strings or module
  constants, so this test sees them all;
* by exercise, ROS-free or in-process (no other process, no DDS peer): each inference-node problem is caused with bad
  input and then clean input brings the status back to OK with no active problem; each executor problem (an event
  counted since the previous report, a keyed problem such as lost feedback, or a non-normal state) is gone from the
  next report once the executor is back to normal. A final check makes sure every key the static walk finds is
  exercised (or named as covered otherwise). Lost feedback over real DDS: test_faults_executor_joint_state_loss.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
INFERENCE_NODE = REPO / "para_ros" / "nodes" / "inference_node.py"
INFERENCE_PIPELINE = REPO / "para_ros" / "inference" / "pipeline.py"  # the node's logic and diagnostics
OBSERVATION_BUILDER = REPO / "para_ros" / "observation" / "builder.py"  # raises the node's observation problems


# ---- static: every key set has a clear -----------------------------------------------------------------------------


def _key_of(arg) -> str | None:
    """The key an argument names: a literal, or an f-string as a pattern ("distortion.{}"); None if dynamic."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in arg.values)
    return None


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def problem_keys(
    *paths: Path, set_names=("problem", "fault"), clear_names=("clear",), key_classes=("ObservationProblem",)
):
    """(keys set, keys cleared, dynamic setter calls) in the sources at ``paths``.

    A setter whose key is ``<x>.key`` (the inference node re-raising an ``ObservationProblem``) is fine when the keys
    come from ``key_classes`` constructors, which are collected as set keys; any other non-literal key is returned as
    a dynamic call (the test then fails: keep keys literal). ``for k in ("a", "b"): ....clear(k)`` clears a and b.
    """
    keys_set, cleared, dynamic = set(), set(), []
    for node in (n for path in paths for n in ast.walk(ast.parse(path.read_text()))):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, (ast.Tuple, ast.List))
        ):
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Call)
                    and _callee(sub) in clear_names
                    and sub.args
                    and isinstance(sub.args[0], ast.Name)
                    and sub.args[0].id == node.target.id
                ):
                    cleared |= {e.value for e in node.iter.elts if isinstance(e, ast.Constant)}
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name, key = _callee(node), _key_of(node.args[0])
        if name in key_classes and key is not None:
            keys_set.add(key)
        elif name in set_names:
            if key is not None:
                keys_set.add(key)
            elif not (isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "key"):
                dynamic.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif name in clear_names and key is not None:
            cleared.add(key)
    return keys_set, cleared, dynamic


def test_every_inference_node_problem_key_is_cleared_somewhere():
    keys_set, cleared, dynamic = problem_keys(INFERENCE_NODE, INFERENCE_PIPELINE, OBSERVATION_BUILDER)
    assert not dynamic, f"problem keys the test cannot see (use a literal or an f-string): {dynamic}"
    assert {"image_stamp.{}", "pairing", "tf", "policy", "internal_error"} <= keys_set, keys_set  # the walk works
    never_cleared = sorted(keys_set - cleared)
    assert not never_cleared, f"problems set but never cleared (diagnostics would stay WARN): {never_cleared}"


def test_problem_key_walk_sees_what_it_must():
    """The walker on a small sample: literal, f-string, loop clear, re-raised key, and a dynamic key it reports."""
    import tempfile

    sample = (
        "def f(self, view, k):\n"
        "    self.health.problem('a', 'x')\n"
        "    self.health.problem(f'b.{view}', 'x')\n"
        "    raise ObservationProblem('c', 'x')\n"
        "    self.health.problem(problem.key, 'x')\n"
        "    self.health.problem(k, 'x')\n"
        "    self.health.clear(f'b.{view}')\n"
        "    for key in ('a', 'c'):\n"
        "        self.health.clear(key)\n"
        "    self._wake.clear()\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(sample)
    try:
        keys_set, cleared, dynamic = problem_keys(Path(fh.name))
    finally:
        Path(fh.name).unlink()
    assert keys_set == {"a", "b.{}", "c"} and cleared == {"a", "b.{}", "c"}
    assert len(dynamic) == 1 and "problem(k," in dynamic[0]


def test_health_reporter_logs_warn_and_error_problems_and_clears_them():
    """A WARN and then an ERROR problem are both logged (rclpy refuses two severities from one line: once it raised
    out of ``problem()``, i.e. out of the inference thread's error handler), and clearing brings the level back."""
    import rclpy.logging

    from para_ros.nodes.health import ERROR, OK, WARN, HealthReporter

    class FakeNode:  # what HealthReporter uses of a node; one logger object, like rclpy's Node.get_logger()
        logger = rclpy.logging.get_logger("health_reporter_test")
        published = []

        def create_publisher(self, *_a, **_k):
            return type("Pub", (), {"publish": lambda _self, msg: FakeNode.published.append(msg)})()

        def create_timer(self, *_a):
            return None

        def get_logger(self):
            return self.logger

        def get_clock(self):
            from rclpy.clock import Clock

            return Clock()

    health = HealthReporter(FakeNode(), "test", log_throttle_s=0.0, median_window=3)
    for ms in (5.0, 1.0, 9.0, 2.0, 4.0):  # a figure reported as the median of its last 3 samples: 9, 2, 4
        health.add_sample("stage_median_ms.model", ms)
    assert {kv.key: kv.value for kv in health.status().values}["stage_median_ms.model"] == "4.000"
    health.problem("a", "warned")
    health.problem("b", "failed", level=ERROR)
    health.problem("a", "warned again")
    assert health.status().level == ERROR
    health.clear("b")
    assert health.status().level == WARN
    health.clear("a")
    assert health.status().level == OK and health.status().message == "ok"
    assert not [kv for kv in health.status().values if kv.key.startswith("problem.")]


# ---- the executor: event problems last one report, non-normal states clear when the state changes ---------------------


def test_executor_event_problems_are_gone_from_the_next_report():
    from para_ros.execution.executor_core import ExecutorStatus
    from para_ros.execution.executor_diagnostics import ERROR, EVENT_PROBLEMS, OK, WARN, diagnostic_summary

    s = ExecutorStatus(activity="tracking")
    level, problems, prev = diagnostic_summary(s, None)
    assert (level, problems) == (OK, [])
    for name, is_error, _ in EVENT_PROBLEMS:
        setattr(s, name, getattr(s, name) + 1)
        level, problems, prev = diagnostic_summary(s, prev)
        assert level == (ERROR if is_error else WARN) and len(problems) == 1, (name, level, problems)
        level, problems, prev = diagnostic_summary(s, prev)  # nothing new happened: gone
        assert (level, problems) == (OK, []), (name, problems)
    # The first report counts everything that happened before it.
    first = ExecutorStatus(activity="idle", chunks_rejected=3, last_rejection="r")
    assert diagnostic_summary(first, None)[1] == ["chunk rejected: r"]


@pytest.fixture(scope="module")
def kin():
    from para_ros.robot.yam_ik import YamKinematics

    return YamKinematics()


def _top_down(kin, q_seed=(0.0, 1.6, 1.3, -1.2, 0.0, 0.0), p=(0.3, 0.0, 0.1)):
    R = np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]]).T
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return kin.ik(T, np.asarray(q_seed)).q_rad, R


def _chunk(stamp, p_start, R, v=(0.0, 0.0, 0.0), n=20, step=0.1):
    from scipy.spatial.transform import Rotation

    from para_ros.execution.chunk import Chunk

    t = np.arange(n) * step
    pos = np.asarray(p_start, float) + np.outer(t, v)
    return Chunk(
        stamp,
        t,
        pos,
        np.tile(Rotation.from_matrix(R).as_quat(), (n, 1)),
        np.full(n, 0.5),
        np.ones(n),
        "base",
        "grasp_site",
        "m",
    )


def test_every_executor_warn_state_is_left_once_its_condition_is_gone(kin):
    """Drive the ROS-free core into each state that makes /diagnostics WARN and out of it again."""
    from para_ros.execution.chunk import ChunkChecks
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.execution.executor_diagnostics import OK, WARN_ACTIVITIES, diagnostic_summary
    from para_ros.robot.yam import load_yam_config

    yam = load_yam_config()
    checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
    core = ExecutorCore(
        ExecutorConfig(
            checks=checks, stale_timeout_s=0.3, start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0
        ),
        yam,
        kinematics=kin,
    )
    q0, R = _top_down(kin)
    seen = set()

    def state_at(t):
        core.tick(t)
        return core.status.activity

    def recovered():  # the level of a report with no new events: the state alone
        s = core.status_snapshot()
        return diagnostic_summary(s, diagnostic_summary(s, None)[2])[0] == OK

    seen.add(state_at(0.0))  # waiting_for_joint_state ...
    core.set_measured_joints(q0, 0.5)
    assert state_at(0.01) == "idle" and recovered()  # ... until the arm's state is known
    core.stop()
    seen.add(state_at(0.02))  # stopped ...
    core.resume()
    assert state_at(0.03) == "idle" and recovered()  # ... until ~/resume
    assert core.add_chunk(_chunk(0.03, [0.3, 0.0, 0.1], R), 0.03)[0]
    assert state_at(0.04) == "tracking"
    seen.add(state_at(0.4))  # hold_stale: no chunk for > 0.3 s ...
    assert core.add_chunk(_chunk(0.41, [0.3, 0.0, 0.1], R), 0.41)[0]
    assert state_at(0.42) == "tracking" and recovered()  # ... until a fresh chunk
    assert core.add_chunk(_chunk(0.43, [0.59, 0.39, 0.02], R), 0.43)[0]  # a corner the arm cannot reach
    seen.add(state_at(0.44))  # hold_unreachable ...
    assert core.add_chunk(_chunk(0.45, [0.3, 0.0, 0.1], R), 0.45)[0]
    assert state_at(0.46) == "tracking" and recovered()  # ... until a reachable target

    # With the feedback watchdog: joint_state_lost (problem joint_state, ERROR) -> waiting_for_chunk -> tracking.
    watched = ExecutorCore(
        ExecutorConfig(checks=checks, joint_state_timeout_s=0.2, start_engaged=True, chunk_min_lead_s=0.0),
        yam,
        kinematics=kin,
    )
    watched.set_measured_joints(q0, 0.5, measured_s=0.0)
    assert watched.tick(0.1) is not None
    assert watched.tick(0.25) is None and watched.status.activity == "joint_state_lost"
    seen.add(watched.status.activity)
    level, problems, _ = diagnostic_summary(watched.status_snapshot(), None)
    assert "joint_state" in watched.status.problems and problems[0].startswith("joint_state: no fresh joint state")
    watched.set_measured_joints(q0, 0.5, measured_s=0.3)
    assert watched.tick(0.3) is None and watched.status.activity == "waiting_for_chunk"  # fresh, but no chunk yet
    seen.add(watched.status.activity)
    assert watched.status.problems == {}  # the problem clears with the fresh state ...
    assert watched.add_chunk(_chunk(0.31, [0.3, 0.0, 0.1], R), 0.31)[0]
    watched.set_measured_joints(q0, 0.5, measured_s=0.32)
    assert watched.tick(0.32) is not None and watched.status.activity == "tracking"  # ... the state with a new chunk
    s = watched.status_snapshot()
    assert diagnostic_summary(s, diagnostic_summary(s, None)[2])[0] == OK

    # Started disengaged (auto_engage false): disengaged -> ~/engage -> idle.
    handed = ExecutorCore(
        ExecutorConfig(checks=checks, start_engaged=False, joint_state_timeout_s=None, chunk_min_lead_s=0.0),
        yam,
        kinematics=kin,
    )
    handed.set_measured_joints(q0, 0.5)
    assert handed.tick(0.0) is None and handed.status.activity == "disengaged"
    seen.add(handed.status.activity)
    handed.engage()
    assert handed.tick(0.01) is not None and handed.status.activity == "idle"
    s = handed.status_snapshot()
    assert diagnostic_summary(s, diagnostic_summary(s, None)[2])[0] == OK

    # With the confidence supervisor: a very uncertain chunk -> hold_uncertain (WARN) -> a confident one -> tracking.
    from dataclasses import replace

    from para_ros.execution.confidence_supervisor import SupervisorConfig

    unsure = SupervisorConfig(
        enabled=True, peak_mass_slow_below=0.2, peak_mass_hold_below=0.1, hold_after_s=0.0, resume_after_chunks=1
    )
    judged = ExecutorCore(
        ExecutorConfig(
            checks=checks, supervisor=unsure, start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0
        ),
        yam,
        kinematics=kin,
    )
    judged.set_measured_joints(q0, 0.5)
    assert judged.add_chunk(_chunk(0.0, [0.3, 0.0, 0.1], R), 0.0)[0]
    assert judged.tick(0.01) is not None and judged.status.activity == "tracking"
    doubtful = _chunk(0.02, [0.3, 0.0, 0.1], R)
    judged.add_chunk(replace(doubtful, confidence=np.full(len(doubtful.confidence), 0.03)), 0.02)
    judged.tick(0.03)
    assert judged.status.activity == "hold_uncertain"
    seen.add(judged.status.activity)
    assert judged.add_chunk(_chunk(0.04, [0.3, 0.0, 0.1], R), 0.04)[0]
    assert judged.tick(0.05) is not None and judged.status.activity == "tracking"
    assert seen == set(WARN_ACTIVITIES), f"WARN activities not exercised here: {set(WARN_ACTIVITIES) - seen}"


def _module_constants(tree) -> dict[str, str]:
    return {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)
    }


def test_every_executor_problem_key_is_removed_somewhere():
    """The executor core's keyed problems (``status.problems[KEY] = ...``) each have a ``problems.pop(KEY)``."""
    path = REPO / "para_ros" / "execution" / "executor_core.py"
    tree = ast.parse(path.read_text())
    constants = _module_constants(tree)

    def key(arg):
        return constants.get(arg.id) if isinstance(arg, ast.Name) else _key_of(arg)

    keys_set, removed = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "problems":
                    keys_set.add(key(t.slice))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "problems"
        ):
            removed.add(key(node.args[0]))
    assert keys_set == {"joint_state"}, keys_set  # the walk works (and sees every key: none is None)
    assert not keys_set - removed, f"executor problems set but never removed: {sorted(keys_set - removed)}"


# ---- the inference node, in process: each problem, then clean input -> OK -----------------------------------------

IMG = 64
K = np.array([[60.0, 0, 32.0], [0, 60.0, 32.0], [0, 0, 1.0]])


def _look_at(eye, target):
    eye = np.asarray(eye, float)
    z = np.asarray(target, float) - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, [0, 0, 1.0])
    if np.linalg.norm(x) < 1e-6:
        x = np.array([0.0, -1.0, 0.0])
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    T[:3, 3] = eye
    return T


T_SCENE = _look_at([0.3, 0.0, 1.0], [0.3, 0.0, 0.0])
T_WRIST = _look_at([0.35, 0.05, 0.22], [0.36, 0.05, 0.0])
T_EE = np.eye(4)
T_EE[:3, 3] = [0.35, 0.05, 0.12]


class InProcessRig:
    """Feeds an in-process InferenceNode through its own callbacks (no DDS peer) and runs its inference step."""

    def __init__(self, node):
        from para_ros.ros_io.synthetic_rig import synthetic_images

        self.n = node
        self.images = synthetic_images(3, IMG)

    def now_ns(self) -> int:
        return self.n.get_clock().now().nanoseconds

    @staticmethod
    def _stamp(msg, stamp_ns):
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        return msg

    def transform(self, parent, child, T, stamp_ns):
        from geometry_msgs.msg import TransformStamped

        from para_ros.adapters.transforms import matrix_to_transform

        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = parent, child
        t.transform = matrix_to_transform(T)
        return self._stamp(t, stamp_ns)

    def info(self, view, stamp_ns, k=None, d=None):
        from sensor_msgs.msg import CameraInfo

        from para_ros.observation.camera_model import camera_info_fields

        info = CameraInfo(width=IMG, height=IMG, **camera_info_fields(K))
        if k is not None:
            info.k = [float(v) for v in np.ravel(k)]
        if d is not None:
            info.d = list(d)
        info.header.frame_id = f"{view}_cam_optical_frame"
        return self._stamp(info, stamp_ns)

    def image(self, view, stamp_ns, rgb=None, encoding="rgb8"):
        from sensor_msgs.msg import Image

        rgb = self.images[view] if rgb is None else rgb
        msg = Image(
            height=rgb.shape[0],
            width=rgb.shape[1],
            encoding=encoding,
            is_bigendian=0,
            step=rgb.shape[1] * (rgb.shape[2] if rgb.ndim == 3 else 1),
            data=rgb.tobytes(),
        )
        msg.header.frame_id = f"{view}_cam_optical_frame"
        return self._stamp(msg, stamp_ns)

    def observe(self, stamp_ns=None, *, tf=True, views=("scene", "wrist"), infos=None, images=None, infer=True):
        """TF history + joint state + CameraInfo + images at ``stamp_ns`` (now by default), then one inference step."""
        from sensor_msgs.msg import JointState

        stamp_ns = self.now_ns() if stamp_ns is None else stamp_ns
        if tf:
            for k in range(4, -1, -1):
                t_ns = stamp_ns - k * 50_000_000
                self.n.tf_buffer.set_transform(self.transform("base", "wrist_cam_optical_frame", T_WRIST, t_ns), "t")
                self.n.tf_buffer.set_transform(self.transform("base", "grasp_site", T_EE, t_ns), "t")
        self.n._on_joint_states(self._stamp(JointState(name=["gripper"], position=[0.8]), stamp_ns))
        for view in views:
            self.n._on_info(view, (infos or {}).get(view) or self.info(view, stamp_ns))
            self.n._on_image(view, (images or {}).get(view) or self.image(view, stamp_ns))
        if infer:
            self.n.try_infer()
        return stamp_ns

    def status(self):
        """(level, active problem keys, chunks published) of the node's diagnostics status right now."""
        s = self.n.health.status()
        values = {kv.key: kv.value for kv in s.values}
        return (
            s.level,
            sorted(k[len("problem.") :] for k in values if k.startswith("problem.")),
            int(values.get("chunks_out", 0)),
        )


@pytest.fixture(scope="module")
def inference():
    from ros_helpers import in_process_inference_node

    for node in in_process_inference_node("inference_faults_test", random_seed=3, publish_pointcloud=False):
        rig = InProcessRig(node)
        node.tf_buffer.set_transform_static(rig.transform("base", "scene_cam_optical_frame", T_SCENE, 0), "t")
        yield rig


def _assert_recovers(rig, key):
    """``key`` is active now (WARN or worse); after one clean observation the node is OK and publishes again."""
    from para_ros.nodes.health import OK

    level, keys, _ = rig.status()
    assert key in keys and level > OK, (key, level, keys)
    _, _, before = rig.status()
    rig.observe()
    level, keys, after = rig.status()
    assert (level, keys) == (OK, []), f"after clean input: level {level!r}, problems still active {keys}"
    assert after == before + 1, "no chunk from the clean observation"


EXERCISED = set()


def exercises(*keys):
    def mark(fn):
        EXERCISED.update(keys)
        return fn

    return mark


@exercises("image_stamp.{}")
def test_image_stamped_in_the_past_then_clean_input_is_ok_again(inference):
    """The reported bug: a wrist image older than the last one kept /diagnostics WARN forever."""
    s = inference.observe()
    inference.n._on_image("wrist", inference.image("wrist", s - 500_000_000))
    level, keys, _ = inference.status()
    assert keys == ["image_stamp.wrist"]
    problem = {kv.key: kv.value for kv in inference.n.health.status().values}["problem.image_stamp.wrist"]
    assert "is not newer than the last wrist image" in problem
    _assert_recovers(inference, "image_stamp.wrist")


@exercises("image_stamp.{}")
def test_image_stamped_in_the_future_then_clean_input_is_ok_again(inference):
    inference.observe()
    inference.n._on_image("scene", inference.image("scene", inference.now_ns() + 5_000_000_000))
    _assert_recovers(inference, "image_stamp.scene")


def test_a_camera_with_a_bad_clock_does_not_clear_the_other_cameras_problem(inference):
    inference.observe()
    inference.n._on_image("wrist", inference.image("wrist", inference.now_ns() + 5_000_000_000))
    inference.observe(views=("scene",), infer=False)  # a good scene frame: the wrist is still wrong
    assert inference.status()[1] == ["image_stamp.wrist"]
    _assert_recovers(inference, "image_stamp.wrist")


@exercises("pairing")
def test_silent_camera_then_clean_input_is_ok_again(inference):
    s = inference.observe()
    inference.observe(s + 100_000_000, views=("scene",), infer=False)  # no wrist frame within the slop (0.05 s)
    time.sleep(0.35)  # ... and its partner is overdue (slop + grace 0.1 s)
    inference.n.try_infer()
    _assert_recovers(inference, "pairing")


@exercises("camera_info")
def test_bad_intrinsics_then_clean_input_is_ok_again(inference):
    s = inference.now_ns()
    inference.observe(s, infos={"scene": inference.info("scene", s, k=np.zeros(9))})
    _assert_recovers(inference, "camera_info")


@exercises("image")
def test_unsupported_encoding_then_clean_input_is_ok_again(inference):
    s = inference.now_ns()
    depth = np.zeros((IMG, IMG), np.uint16)
    inference.observe(s, images={"wrist": inference.image("wrist", s, depth, encoding="16UC1")})
    _assert_recovers(inference, "image")


@exercises("camera.{}")
def test_a_covered_camera_then_clean_input_is_ok_again(inference):
    """A black scene image: refused (no chunk), ``camera.scene`` named; the next clean pair clears it."""
    s = inference.now_ns()
    _, _, before = inference.status()
    inference.observe(s, images={"scene": inference.image("scene", s, np.zeros((IMG, IMG, 3), np.uint8))})
    level, keys, after = inference.status()
    assert "camera.scene" in keys and after == before  # no chunk from the covered camera's pair
    _assert_recovers(inference, "camera.scene")


@exercises("familiarity")
def test_an_unfamiliar_scene_then_a_familiar_one_is_ok_again(inference):
    """A familiarity memory by whose limit every view is novel: the observation gets no chunk and ``familiarity``
    names the camera; with the memory gone (every view familiar) the next clean pair clears it."""
    import torch

    from para_core.model.familiarity import Familiarity, FamiliaritySettings

    policy = inference.n.policy
    memory = {v: torch.zeros(4, policy.config.feat_dim) for v in policy.view_names}
    settings = FamiliaritySettings(memory_size=16, candidates=16, window_frames=1)
    policy.set_familiarity(Familiarity(policy.view_names, memory, dict.fromkeys(policy.view_names, 1e-9), settings))
    try:
        _, _, before = inference.status()
        inference.observe()
        _, keys, after = inference.status()
        assert "familiarity" in keys and after == before  # no chunk from the unfamiliar observation
    finally:
        policy.set_familiarity(None)
    _assert_recovers(inference, "familiarity")


@exercises("tf")
def test_missing_tf_then_clean_input_is_ok_again(inference):
    inference.observe(inference.now_ns() + 100_000_000, tf=False)  # no TF that new yet
    _assert_recovers(inference, "tf")


@exercises("distortion.{}")
def test_distortion_warning_clears_when_the_camera_info_has_none(inference):
    s = inference.now_ns()
    inference.observe(s, infos={"wrist": inference.info("wrist", s, d=[0.1, 0, 0, 0, 0])})
    _assert_recovers(inference, "distortion.wrist")


@exercises("gripper")
def test_unknown_gripper_then_a_joint_state_is_ok_again(inference):
    inference.observe(infer=False)
    inference.n.pipeline.gripper_history.clear()  # as before the first /joint_states
    inference.n.try_infer()  # an observation with no gripper known: a chunk (gripper assumed open) and a warning
    _assert_recovers(inference, "gripper")


@exercises("policy", "internal_error")
@pytest.mark.parametrize(
    "error, key", [(ValueError("bad input"), "policy"), (RuntimeError("CUDA OOM"), "internal_error")]
)
def test_policy_refusal_or_unexpected_error_then_a_good_step_is_ok_again(inference, monkeypatch, error, key):
    def refuse(*_args, **_kw):
        raise error

    with monkeypatch.context() as m:
        m.setattr(inference.n.policy, "predict", refuse)
        inference.observe()
    _assert_recovers(inference, key)


# Keys whose clearing path is covered otherwise: ``joint_states`` (only with ee_source joint_states) is cleared by the
# same statement as ``tf``/``image``/``camera_info`` when an observation is built (the static walk checks it).
COVERED_STATICALLY = {"joint_states"}


def test_every_problem_key_found_in_the_code_is_exercised_here():
    keys_set, _, _ = problem_keys(INFERENCE_NODE, INFERENCE_PIPELINE, OBSERVATION_BUILDER)
    missing = sorted(keys_set - EXERCISED - COVERED_STATICALLY)
    assert not missing, f"problem keys with no recovery test in this file: {missing}"


def test_latency_stages_on_diagnostics_are_measured_and_add_up(inference):
    """The per-chunk latency breakdown (stage_median_ms.*): an image stamped 80 ms before it is received shows up as
    >= 80 ms in ``receive``; the policy's own stage times are reported as measured; the stages add up to the
    stamp -> publish latency (``other`` is the remainder, small)."""
    n = inference.n
    n.health.clear_samples()
    before = len(n.pipeline.latencies_s)
    # The stamp below must be newer than every frame an earlier test of this module sent (some are stamped up to
    # 100 ms ahead): the pairer rightly drops a frame older than its camera's newest.
    newest = max(n.pipeline.pairer.newest_stamp_ns(v) or 0 for v in n.views)
    deadline = time.monotonic() + 5.0
    while inference.now_ns() - 80_000_000 <= newest + 1_000_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    inference.observe(inference.now_ns() - 80_000_000)
    assert len(n.pipeline.latencies_s) == before + 1, "no chunk"
    values = {kv.key: kv.value for kv in n.health.status().values}
    stages = {k[len("stage_median_ms.") :]: float(v) for k, v in values.items() if k.startswith("stage_median_ms.")}
    assert set(stages) == {
        "receive",
        "wait",
        "observation_decode",
        "observation_tf",
        "preprocess",
        "model",
        "decode",
        "publish",
        "other",
    }
    assert stages["receive"] >= 80.0
    assert stages["model"] == pytest.approx(1e3 * n.policy.last_timing_s["model"], abs=1e-3)
    assert all(v >= 0.0 for k, v in stages.items() if k != "other")
    # the stages add up to the latency (each reported with 3 decimals: 9 roundings of at most 0.5 us)
    assert sum(stages.values()) == pytest.approx(1e3 * n.pipeline.latencies_s[-1], abs=9 * 0.0005 + 1e-6)
    assert abs(stages["other"]) < 0.5 * 1e3 * n.pipeline.latencies_s[-1]
    # the rviz outputs go out after the chunk: timed on their own, outside the camera -> chunk latency
    assert float(values["viz_publish_median_ms"]) >= 0.0


def test_rolling_medians_are_numpy_medians_of_each_keys_last_window():
    """The figures reported as medians (latency stages, publish delays): per key, over its last ``window`` samples
    only, as np.median computes it (an even count averages the middle two)."""
    from para_ros.nodes.health import RollingMedians

    rng = np.random.default_rng(3)
    medians = RollingMedians(window=7)
    samples = {"a": rng.normal(size=20), "b": rng.exponential(size=4)}
    for i in range(20):
        for key, values in samples.items():
            if i < len(values):
                medians.add(key, float(values[i]))
                got = medians.medians()[key]
                assert got == pytest.approx(float(np.median(values[max(0, i - 6) : i + 1])), abs=1e-12), (key, i)


def test_per_frame_endpoints_have_no_event_handlers_to_poll(inference):
    """The inference node's camera, CameraInfo and joint-state subscriptions and its outputs carry no default QoS
    event handlers (para_ros.ros_io.event_handlers: each is polled at every wake of the executor); the TF ones keep
    theirs (a volatile /tf_static publisher is a real mistake)."""
    n = inference.n
    by_topic = {sub.topic_name: sub for sub in n.subscriptions}
    per_frame = [by_topic[n.params[f"{view}_{kind}_topic"]] for view in n.views for kind in ("image", "info")]
    per_frame.append(by_topic[n.params["joint_states_topic"]])
    assert all(sub.event_handlers == [] for sub in per_frame)
    assert all(pub.event_handlers == [] for pub in (n.chunk_pub, n.marker_pub, n.cloud_pub))
    tf_subs = [sub for topic, sub in by_topic.items() if topic in ("/tf", "/tf_static")]
    assert tf_subs and all(sub.event_handlers for sub in tf_subs)


def test_the_executor_reports_a_hold_the_tick_it_begins_and_ends(kin):
    """The executor core's own transitions into and out of a hold are the ones the node publishes at once (the
    evaluator times holds from /diagnostics: a periodic report would add up to a period to every hold time)."""
    from para_ros.execution.chunk import ChunkChecks
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.execution.executor_diagnostics import reported_at_once
    from para_ros.robot.yam import load_yam_config

    yam = load_yam_config()
    checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
    core = ExecutorCore(
        ExecutorConfig(
            checks=checks, stale_timeout_s=0.3, start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0
        ),
        yam,
        kinematics=kin,
    )
    q0, R = _top_down(kin)
    core.set_measured_joints(q0, 0.5)
    core.tick(0.0)
    assert core.add_chunk(_chunk(0.01, [0.3, 0.0, 0.1], R), 0.01)[0]
    activities = []
    for t in (0.02, 0.2, 0.4, 0.5):  # tracking, tracking, then no chunk for > 0.3 s: hold_stale, hold_stale
        core.tick(t)
        activities.append(core.status.activity)
    assert core.add_chunk(_chunk(0.51, [0.3, 0.0, 0.1], R), 0.51)[0]
    core.tick(0.52)
    activities.append(core.status.activity)  # a fresh chunk: tracking again
    assert activities == ["tracking", "tracking", "hold_stale", "hold_stale", "tracking"]
    at_once = [reported_at_once(a, b) for a, b in zip(activities, activities[1:])]
    assert at_once == [False, True, False, True]
    # the feedback watchdog's states and the confidence hold too; normal operation between itself never
    assert reported_at_once("tracking", "joint_state_lost") and reported_at_once(
        "joint_state_lost", "waiting_for_chunk"
    )
    assert reported_at_once("tracking", "hold_uncertain") and reported_at_once("hold_unreachable", "tracking")
    assert not reported_at_once("idle", "tracking") and not reported_at_once("tracking", "idle")


def test_the_executor_headline_names_the_state_then_its_activity_and_feedback_changes_are_logged_once():
    """``/diagnostics``' message starts with the state and its activity (the state alone where the activity repeats
    it); the end of a feedback loss is logged once, at the change, with where the state comes from."""
    from para_ros.execution.executor_core import ExecutorStatus
    from para_ros.execution.executor_diagnostics import ActivityChanges, headline, status_values
    from para_ros.execution.executor_state import ExecutorState, TickActivity

    held = ExecutorStatus(state=ExecutorState.FOLLOWING, activity=TickActivity.HOLD_STALE)
    assert headline(held, []) == "following (hold_stale)"
    assert headline(held, ["chunk rejected: old"]) == "following (hold_stale); chunk rejected: old"
    stopped = ExecutorStatus(state=ExecutorState.STOPPED, activity=TickActivity.STOPPED)
    assert headline(stopped, []) == "stopped"
    from para_ros.execution.executor_core import ExecutorConfig

    values = status_values(stopped, ExecutorConfig())
    assert (values["state"], values["activity"], values["engaged"]) == ("stopped", "stopped", False)
    assert "mode" not in values

    changes = ActivityChanges("/joint_states")
    lines = [
        changes.update(TickActivity(a))
        for a in ("tracking", "joint_state_lost", "joint_state_lost", "waiting_for_chunk", "tracking", "tracking")
    ]
    assert [at_once for _, at_once in lines] == [False, True, False, True, True, False]
    notes = [note for note, _ in lines if note]
    assert notes == [
        "joint state from /joint_states is fresh again: sending nothing until a new chunk is accepted",
        "new chunk after the joint state loss: commanding again (tracking) from the measured joints",
    ]


def test_an_unreadable_chunk_message_is_a_rejected_chunk_on_diagnostics(kin):
    """The node hands the core a chunk message it could not read; the core counts it as rejected, and the next report
    names it at WARN."""
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
    from para_ros.execution.executor_diagnostics import WARN, diagnostic_summary
    from para_ros.robot.yam import load_yam_config

    core = ExecutorCore(ExecutorConfig(start_engaged=True, joint_state_timeout_s=None), load_yam_config(), kin)
    core.set_measured_joints(_top_down(kin)[0], 0.5)
    core.tick(0.0)
    counters = diagnostic_summary(core.status_snapshot(), None)[2]
    core.reject_unreadable_chunk("chunk could not be read: ValueError: bad")
    level, problems, _ = diagnostic_summary(core.status_snapshot(), counters)
    assert core.status.chunks_rejected == 1 and level == WARN
    assert problems == ["chunk rejected: chunk could not be read: ValueError: bad"]
