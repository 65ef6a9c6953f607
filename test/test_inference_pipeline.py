"""InferencePipeline without ROS (no rclpy, no DDS: plain message objects, poses from a dict): pairing, the chunk of
an observation against the policy on the same observation, clock jumps, fused decoding's memory, refusals and the
latency stages."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from sensor_msgs.msg import CameraInfo, Image

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.model.policy import Policy
from para_ros.inference.pipeline import InferencePipeline, PairingSettings
from para_ros.observation.builder import ObservationProblem, ObservationSettings
from para_ros.observation.camera_model import camera_info_fields
from para_ros.ros_io.synthetic_rig import synthetic_images

torch.set_num_threads(1)
IMG = 64
K = syn.intrinsics_from_fovy(IMG, IMG, 60.0)
EE = np.array([0.3, 0.0, 0.2])
T_EE = np.eye(4)
T_EE[:3, :3] = syn.top_down_rotation()
T_EE[:3, 3] = EE
POSES = {
    "scene_cam_optical_frame": syn.scene_camera_pose(),
    "wrist_cam_optical_frame": syn.wrist_camera_pose(EE),
    "grasp_site": T_EE,
}
S = 1_000_000_000


class RecordingReport:
    """The pipeline's diagnostics, recorded: counters, active problems (key -> (message, fault)), figures, samples."""

    def __init__(self):
        self.counts, self.problems, self.values, self.samples = {}, {}, {}, {}

    def count(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def problem(self, key, message):
        self.problems[key] = (message, False)

    def fault(self, key, message):
        self.problems[key] = (message, True)

    def clear(self, key):
        self.problems.pop(key, None)

    def set_value(self, key, value):
        self.values[key] = value

    def add_sample(self, key, sample):
        self.samples.setdefault(key, []).append(sample)


def lookup(frame, stamp_ns, wait=True, what=None):
    if frame not in POSES:
        raise ObservationProblem("tf", f"no TF base <- {frame}")
    return POSES[frame]


def ee_pose(stamp_ns, wait=True):
    return lookup("grasp_site", stamp_ns, wait)


IMAGES = synthetic_images(3, IMG)


def image(view, stamp_ns):
    rgb = IMAGES[view]
    msg = Image(height=IMG, width=IMG, encoding="rgb8", is_bigendian=0, step=3 * IMG, data=rgb.tobytes())
    msg.header.frame_id = f"{view}_cam_optical_frame"
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, S)
    return msg


def info(view):
    msg = CameraInfo(width=IMG, height=IMG, **camera_info_fields(K))
    msg.header.frame_id = f"{view}_cam_optical_frame"
    return msg


def make(decoding="argmax", seed=3):
    cfg = V4Config.tiny()
    policy = Policy.random_init(cfg, device="cpu", seed=seed, decoding=decoding)
    settings = ObservationSettings(
        view_names=policy.view_names,
        camera_matrix="k",
        gripper_joint="gripper",
        gripper_open_position=1.0,
        past_n=cfg.mv_past_n,
        step_dt_s=cfg.step_dt_s,
    )
    report = RecordingReport()
    pipe = InferencePipeline(policy, settings, report, PairingSettings(pair_slop_s=0.05, max_observation_age_s=1.0))
    for view in pipe.views:
        pipe.add_camera_info(view, info(view))
    return pipe, report


def feed(pipe, stamp_ns, received_ns=None, views=None):
    pipe.add_joint_states(stamp_ns, ["gripper"], [0.8])
    for view in views or pipe.views:
        assert pipe.add_image(view, stamp_ns, image(view, stamp_ns), received_ns or stamp_ns)


def test_the_pipeline_imports_no_ros_client_library():
    code = "import sys, para_ros.inference.pipeline; print(sorted(m for m in sys.modules if m.startswith('rclpy')))"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_step_is_the_policy_on_the_same_observation():
    """The chunk of a step equals the same policy's (another instance, same weights) prediction on the observation
    built from the same frames, and the latency stages so far are the receipt times."""
    pipe, report = make()
    stamp = 100 * S
    feed(pipe, stamp, received_ns=stamp + 30_000_000)
    prediction = pipe.step(stamp + 50_000_000, lookup, ee_pose)
    assert prediction is not None and prediction.stamp_ns == stamp and not report.problems
    assert prediction.stages_ms["receive"] == pytest.approx(30.0) and prediction.stages_ms["wait"] == pytest.approx(
        20.0
    )
    assert prediction.state.gripper == pytest.approx(0.8)
    twin = Policy.random_init(V4Config.tiny(), device="cpu", seed=3)
    expected = twin.predict(prediction.cameras, prediction.state)
    np.testing.assert_array_equal(prediction.output.positions_world, expected.positions_world)
    np.testing.assert_array_equal(prediction.output.confidence, expected.confidence)
    assert pipe.step(stamp + 60_000_000, lookup, ee_pose) is None  # nothing new: the pair was used
    assert prediction.pair_gap_ns == 0  # both views of this instant
    pipe.add_image("scene", stamp + 100_000_000, image("scene", stamp + 100_000_000), stamp + 100_000_000)
    pipe.add_image("wrist", stamp + 110_500_000, image("wrist", stamp + 110_500_000), stamp + 110_500_000)
    later = pipe.step(stamp + 120_000_000, lookup, ee_pose)
    assert later.pair_gap_ns == 10_500_000 and report.samples["pair_gap_median_ms"][-1] == pytest.approx(10.5)
    viz = pipe.visualisation(prediction)
    np.testing.assert_array_equal(viz.ee_xyz, EE)
    assert 0.004 <= viz.voxel_size_m <= 0.05
    assert pipe.overlay_rgb(prediction).shape == (IMG, IMG, 3)


def test_finish_records_the_latency_and_the_stages_add_up_to_it():
    pipe, report = make()
    feed(pipe, 5 * S)
    prediction = pipe.step(5 * S + 10_000_000, lookup, ee_pose)
    t_published = prediction.t_predicted + 0.003
    pipe.finish(prediction, 0.25, t_published)
    assert list(pipe.latencies_s) == [0.25] and report.counts["chunks_out"] == 1
    assert report.values["latency_median_s"] == "0.2500"
    stages = {k[len("stage_median_ms.") :]: v[-1] for k, v in report.samples.items() if k.startswith("stage_")}
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
    assert sum(stages.values()) == pytest.approx(250.0)
    assert stages["publish"] == pytest.approx(3.0)
    assert stages["decode"] == pytest.approx(1e3 * pipe.policy.last_timing_s["decode"])


def test_a_clock_jump_voids_the_observation_in_flight_and_forgets_the_frames_and_fused_chunks():
    pipe, report = make(decoding="fused")
    dt_ns = int(pipe.policy.config.step_dt_s * 1e9)
    feed(pipe, 50 * S)
    first = pipe.step(50 * S, lookup, ee_pose)
    feed(pipe, 50 * S + dt_ns)
    second = pipe.step(50 * S + dt_ns, lookup, ee_pose)
    assert pipe.is_current(second) and len(pipe.fusion.chunks) == 2  # both chunks kept, the first still in force
    pipe.clock_jumped_back()
    assert not pipe.is_current(first) and report.counts["dropped.time_jump"] == 1
    assert len(pipe.fusion.chunks) == 0 and len(pipe.gripper_history) == 0
    assert all(pipe.pairer.newest_stamp_ns(v) is None for v in pipe.views)
    feed(pipe, 1 * S)  # the new clock's earlier stamps pair at once
    assert pipe.is_current(pipe.step(1 * S, lookup, ee_pose))


def test_fused_decoding_keeps_each_chunk_and_fuses_the_next_with_it():
    """The pipeline's fused policy keeps each chunk's most probable voxels, in order, stamped with the observation
    time; a candidate of the next chunk one step later scores its own log-probability plus the aged log of the
    first chunk's mass near it (summed here with plain loops)."""
    pipe, _ = make(decoding="fused")
    feed(pipe, 10 * S)
    pipe.step(10 * S, lookup, ee_pose)
    stored = pipe.fusion.chunks[0]
    dt = pipe.policy.config.step_dt_s
    assert stored.stamp_s == 10.0 and stored.prob.shape[0] == pipe.policy.config.n_window
    assert np.all(np.diff(stored.prob, axis=1) <= 0) and stored.prob.sum(1).max() <= 1.0 + 1e-9
    candidates = stored.xyz[1:2, :3] + [0.005, 0.0, 0.0]  # (1, 3, 3): near old step 1's best voxels
    own = np.log([[0.5, 0.3, 0.2]])
    fused = pipe.fusion.fused_scores(own, candidates, 10.0 + dt, dt)
    w = math.exp(-dt / pipe.fusion.tau_s)
    for j in range(3):
        mass = sum(
            p for p, x in zip(stored.prob[1], stored.xyz[1]) if math.dist(x, candidates[0, j]) <= pipe.fusion.radius_m
        )
        expected = own[0, j] + w * math.log(max(mass, stored.prob[1].min()))
        assert fused[0, j] == pytest.approx(expected, abs=1e-9)
    feed(pipe, 10 * S + int(dt * 1e9))
    assert pipe.step(10 * S + int(dt * 1e9), lookup, ee_pose) is not None and len(pipe.fusion.chunks) == 2


def test_a_silent_camera_is_named_and_a_refused_observation_reported():
    pipe, report = make()
    feed(pipe, 20 * S, views=["scene"])
    feed(pipe, 22 * S, views=["scene"])  # the wrist sent nothing for 2 s; then only once, long ago
    pipe.add_image("wrist", 19 * S, image("wrist", 19 * S), 19 * S)
    assert pipe.step(22 * S, lookup, ee_pose) is None
    assert "pairing" in report.problems and report.counts["dropped.no_pair"] >= 1
    # a pose that TF does not hold: the observation is dropped, the problem named
    pipe2, report2 = make()
    feed(pipe2, 30 * S)
    assert pipe2.step(30 * S, lambda *a, **k: (_ for _ in ()).throw(ObservationProblem("tf", "no TF")), ee_pose) is None
    assert "tf" in report2.problems and report2.counts["dropped.tf"] == 1


def test_a_policy_refusal_and_a_non_finite_output_drop_the_chunk():
    pipe, report = make()
    feed(pipe, 40 * S)
    prediction = pipe.step(40 * S, lookup, ee_pose)
    real_predict = pipe.policy.predict

    def refuse(*args, **kwargs):
        raise ValueError("bad input")

    pipe.policy.predict = refuse
    assert pipe.predict(41 * S, prediction.cameras, prediction.state) is None
    assert report.problems["policy"] == ("policy refused the observation: bad input", False)

    def nan_chunk(*args, **kwargs):
        out = real_predict(*args, **kwargs)
        out.positions_world[2, 0] = float("nan")
        return out

    pipe.policy.predict = nan_chunk
    assert pipe.predict(42 * S, prediction.cameras, prediction.state) is None
    assert report.problems["policy"][1] is True and report.counts["dropped.policy"] == 2
    pipe.policy.predict = real_predict
    assert pipe.predict(43 * S, prediction.cameras, prediction.state) is not None and "policy" not in report.problems


def test_frames_that_came_before_their_camera_info_are_kept_for_the_next_step():
    """Frames that arrive before a camera's first CameraInfo give no chunk (the problem is reported); once the
    CameraInfo has come, the next step predicts from those same frames (a lockstep simulator cannot send them again:
    a re-sent frame with the same stamp is refused as not newer)."""
    pipe, report = make()
    pipe.camera_info.pop("wrist")
    stamp = 100 * S
    feed(pipe, stamp)
    assert pipe.step(stamp + 10_000_000, lookup, ee_pose) is None
    assert "camera_info" in report.problems
    assert not pipe.add_image("wrist", stamp, image("wrist", stamp), stamp)  # a re-send of the instant is refused
    pipe.add_camera_info("wrist", info("wrist"))
    prediction = pipe.step(stamp + 20_000_000, lookup, ee_pose)
    assert prediction is not None and prediction.stamp_ns == stamp
    assert pipe.step(stamp + 30_000_000, lookup, ee_pose) is None  # and then it is used


def test_a_pair_whose_tf_had_not_come_is_tried_again_until_a_newer_pair_comes():
    """After a simulator reset the first frame's TF can be cleared with the old clock's history: that step drops the
    observation (reported), the next step tries the same pair again and predicts once TF answers; a newer pair then
    wins, and a later failure of the older pair is never retried over it. Catches a pair used up by a failed step
    (a lockstep simulator waiting for that instant's chunk stalled until its timeout, a fault)."""
    pipe, report = make()
    stamp = 200 * S
    feed(pipe, stamp)
    no_tf = lambda *a, **k: (_ for _ in ()).throw(ObservationProblem("tf", "no TF at that instant"))  # noqa: E731
    assert pipe.step(stamp + 10_000_000, no_tf, ee_pose) is None
    assert pipe.step(stamp + 20_000_000, no_tf, ee_pose) is None  # tried again, still no TF
    assert report.counts["dropped.tf"] == 2 and "tf" in report.problems
    prediction = pipe.step(stamp + 30_000_000, lookup, ee_pose)
    assert prediction is not None and prediction.stamp_ns == stamp and "tf" not in report.problems
    assert pipe.step(stamp + 40_000_000, lookup, ee_pose) is None  # used now
    feed(pipe, stamp + 100_000_000)
    assert pipe.step(stamp + 110_000_000, no_tf, ee_pose) is None
    feed(pipe, stamp + 200_000_000)
    assert pipe.step(stamp + 210_000_000, lookup, ee_pose).stamp_ns == stamp + 200_000_000
    assert pipe.step(stamp + 220_000_000, lookup, ee_pose) is None  # the failed older pair does not come back


def test_a_covered_camera_is_refused_named_and_its_stamp_kept_for_lockstep():
    """A black wrist image: no chunk, ``camera.wrist`` names it, ``dropped.camera`` counts it and the stamp is handed
    out once (the node answers a lockstep simulator with it); the camera uncovered, the next pair gives a chunk and
    the problem is gone."""
    pipe, report = make()
    stamp = 3 * S
    pipe.add_joint_states(stamp, ["gripper"], [0.8])
    pipe.add_image("scene", stamp, image("scene", stamp), stamp)
    black = image("wrist", stamp)
    black.data = bytes(len(black.data))
    pipe.add_image("wrist", stamp, black, stamp)
    assert pipe.step(stamp + 50_000_000, lookup, ee_pose) is None
    assert "wrist camera shows one flat colour" in report.problems["camera.wrist"][0]
    assert report.counts["dropped.camera"] == 1 and "camera.scene" not in report.problems
    assert pipe.take_refused() == [stamp] and pipe.take_refused() == []
    later = stamp + 100_000_000
    feed(pipe, later)
    prediction = pipe.step(later + 50_000_000, lookup, ee_pose)
    assert prediction is not None and prediction.stamp_ns == later and "camera.wrist" not in report.problems
    assert pipe.take_refused() == []


class RecordingOutputs:
    """The node's publishers, recorded: what was called, in order, with what."""

    def __init__(self, fail_on=None):
        self.calls, self.fail_on = [], fail_on

    def _call(self, name, *args):
        self.calls.append((name, *args))
        if name == self.fail_on:
            raise RuntimeError(f"{name} broke")

    def chunk_message(self, prediction):
        message = {"stamp_ns": prediction.stamp_ns}
        self._call("chunk_message", prediction.stamp_ns)
        return message

    def send_chunk(self, message):
        self._call("send_chunk", message["stamp_ns"])

    def send_visualisation(self, message, visualisation):
        self._call("send_visualisation", message["stamp_ns"], visualisation)

    def send_no_chunk(self, stamp_ns):
        self._call("send_no_chunk", stamp_ns)


def test_one_call_publishes_the_chunk_then_its_visualisation_then_answers_the_refused():
    """``infer_newest`` owns the order: the chunk's message built and sent before its visualisation, the latency
    figures after both (chunks_out), refused stamps answered last; nothing new: no output at all."""
    pipe, report = make()
    pipe.draw_overlay = True
    stamp = 7 * S
    feed(pipe, stamp)
    clock = iter([stamp + 10_000_000, stamp + 40_000_000])  # the step's time, then the chunk's publication
    out = RecordingOutputs()
    pipe.infer_newest(lambda: next(clock), lookup, ee_pose, out)
    assert [c[0] for c in out.calls] == ["chunk_message", "send_chunk", "send_visualisation"]
    assert out.calls[1][1] == stamp and report.counts["chunks_out"] == 1
    assert list(pipe.latencies_s) == [pytest.approx(0.04)]  # stamp -> published, on the same clock
    viz = out.calls[2][2]
    np.testing.assert_array_equal(viz.ee_xyz, EE)  # the tool of the observation, not of another instant
    assert viz.overlay_rgb.shape == (IMG, IMG, 3) and viz.overlay_frame == "scene_cam_optical_frame"
    out.calls.clear()
    pipe.infer_newest(lambda: stamp + 50_000_000, lookup, ee_pose, out)
    assert out.calls == []  # the pair was used
    # a covered wrist camera: no chunk, the simulator told so
    later = stamp + 100_000_000
    pipe.add_joint_states(later, ["gripper"], [0.8])
    pipe.add_image("scene", later, image("scene", later), later)
    black = image("wrist", later)
    black.data = bytes(len(black.data))
    pipe.add_image("wrist", later, black, later)
    pipe.infer_newest(lambda: later + 10_000_000, lookup, ee_pose, out)
    assert out.calls == [("send_no_chunk", later)] and report.counts["chunks_out"] == 1


def test_a_clock_jump_while_the_model_runs_sends_no_chunk_and_an_error_in_an_output_is_reported():
    pipe, report = make()
    stamp = 9 * S
    feed(pipe, stamp)

    class JumpWhileBuilding(RecordingOutputs):
        def chunk_message(self, prediction):
            pipe.clock_jumped_back()  # the executor thread's pre-jump callback, while this thread publishes
            return super().chunk_message(prediction)

    out = JumpWhileBuilding()
    pipe.infer_newest(lambda: stamp + 10_000_000, lookup, ee_pose, out)
    assert [c[0] for c in out.calls] == ["chunk_message"] and report.counts["dropped.time_jump"] == 1
    assert "chunks_out" not in report.counts
    pipe.report_clock_jump("clock jumped back by 3.000 s to t=6.000 s")
    assert report.counts["time_jumps_back"] == 1 and report.values["last_time_jump"].startswith("clock jumped back")
    feed(pipe, 1 * S)  # the new clock's frames; the marker publisher fails
    broken = RecordingOutputs(fail_on="send_visualisation")
    pipe.infer_newest(lambda: 1 * S + 10_000_000, lookup, ee_pose, broken)  # never raises
    assert [c[0] for c in broken.calls] == ["chunk_message", "send_chunk", "send_visualisation"]
    assert (
        report.counts["dropped.internal_error"] == 1
        and "send_visualisation broke" in report.problems["internal_error"][0]
    )
    feed(pipe, 1 * S + 100_000_000)
    pipe.infer_newest(lambda: 1 * S + 110_000_000, lookup, ee_pose, RecordingOutputs())
    assert "internal_error" not in report.problems and report.counts["chunks_out"] == 1  # a whole chunk: gone
