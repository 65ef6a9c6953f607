"""The inference node's logic, free of ROS: camera frames, CameraInfo and joint states in; chunks, visualisation data
and latency stages out, in the pipeline's order.

The node (``para_ros.nodes.inference_node``) only moves messages: its callbacks hand each message to the pipeline,
its inference thread calls :meth:`InferencePipeline.infer_newest` (one call per observation) with its clock, two
pose look-ups (TF) and its publishers (:class:`Outputs`), and its clock-jump callbacks call
:meth:`InferencePipeline.clock_jumped_back` and :meth:`InferencePipeline.report_clock_jump`. Everything else is here,
testable without DDS:

* pairing (``para_ros.observation.pairing``): images are paired by stamp within ``pair_slop_s``, each with the other
  camera's nearest frame (the pair's time difference on /diagnostics as ``pair_gap_median_ms``); only the newest
  pair is used (frames are never queued), a pair older than ``max_observation_age_s`` is stale and skipped, a silent
  camera named (:meth:`InferencePipeline.silent_camera`);
* the observation (``para_ros.observation.builder``): images, intrinsics, each camera's pose at THAT image's stamp
  (a moving wrist camera is placed where it was when the frame was taken); the observation time is the newer stamp
  of the pair, and the chunk is stamped with it; the end-effector pose at that time and the past ``mv_past_n`` EE
  positions at ``stamp - k * frame_stride / dataset_fps`` (where the look-up no longer, or not yet, holds them, the
  oldest available position is repeated); the gripper opening (``gripper_joint`` / ``gripper_open_position``)
  sampled and held at the observation time;
* the cameras' images checked (``para_ros.observation.camera_check``): an observation with a covered or frozen
  camera is refused (``camera.<view>``, ``dropped.camera``) and its stamp kept for :meth:`InferencePipeline.take_refused`
  (a lockstep simulator waits for an answer to every frame);
* the scene's familiarity (``para_ros.inference.familiarity_check``): while a view's novelty against the policy's
  training features stays above its limit, the chunks are withheld (``familiarity``, ``dropped.unfamiliar``) and
  their stamps kept for :meth:`InferencePipeline.take_refused` like a refused camera's;
* the prediction (``para_core.model.policy.Policy``) with the observation stamp as the chunk's time base (step i at
  ``stamp + i * frame_stride / dataset_fps``) and its chunk decoding (``decoding``, ``para_core.model.decoding``):
  ``argmax`` (each step's most probable voxel, the reference), ``joint`` (the chunk's voxels chosen together within
  ``decoding_max_speed_m_s``, which should match the executor's ``max_implied_speed_m_s``) or ``fused`` (``joint``
  over the product of the new chunk's distributions with those of the earlier chunks still in force at the same
  times, weighted by ``exp(-age / fusion_tau_s)``; the pipeline holds that memory,
  ``para_core.model.decoding.ChunkFusion``);
* the outputs' order: the chunk, then its markers, voxel cloud and overlay (``para_ros.viz.chunk_visualisation``;
  they never delay the chunk, their time is ``viz_publish_median_ms``), then the stamps of refused observations;
* clock jumps (a backward jump of :data:`TIME_JUMP_BACK_MIN_S` or more, or a switch of time source):
  :meth:`InferencePipeline.clock_jumped_back` voids every observation in flight (its chunk is dropped, never
  published: ``dropped.time_jump``) and forgets the frames and the last pair used, the gripper and joint-state
  histories and the chunks kept for fusion; without this the new, earlier stamps would be refused as out of order and
  old frames could still pair. :meth:`InferencePipeline.report_clock_jump` counts it (``time_jumps_back``) and names
  it (``last_time_jump``);
* latency stages: for every chunk, the medians of where its time went (``stage_median_ms.<stage>``): ``receive``
  (image stamp -> the newest frame of the pair received), ``wait`` (received -> the inference thread took the pair),
  ``observation_decode`` and ``observation_tf`` (the observation builder: images decoded; pose look-ups, EE history
  and intrinsics), ``preprocess``, ``model`` and ``decode`` (the policy), ``publish`` (the chunk) and ``other`` (the
  rest of the stamp -> chunk latency); ``bench/bench_inference_node.py`` prints them;
* every diagnostic the node reports, through a :class:`Report` (the node's ``HealthReporter``). Bad input never
  raises and never yields a chunk: every problem (unsupported encoding, size mismatch with CameraInfo, bad K, a
  missing, extrapolated or refused pose, a silent camera, out-of-order frames, missing CameraInfo, a policy error) is
  reported and that observation dropped, and every problem clears once its condition is gone: a bad image stamp
  (``image_stamp.<view>``) at that camera's next frame with a valid stamp, the pairing problem at the next pair, the
  observation problems (``image``, ``camera_info``, ``tf``, ``joint_states``) and ``distortion.<view>`` at the next
  observation built without them, ``policy`` and ``internal_error`` at the next chunk published
  (``test/test_faults_diagnostics.py`` checks that every key set has such a path).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from para_core.model.policy import CameraObservation, Policy, PolicyOutput, RobotState
from para_ros.inference.familiarity_check import FamiliarityCheck, FamiliarityCheckSettings
from para_ros.observation.builder import (
    GripperHistory,
    ObservationProblem,
    ObservationSettings,
    build_observation,
    gripper_opening,
)
from para_ros.observation.camera_check import CameraCheck, CameraCheckSettings
from para_ros.observation.pairing import ObservationPairer, PairResult
from para_ros.viz.chunk_visualisation import Visualisation, chunk_visualisation, overlay_rgb

# The clock stepping back at least this far is a jump (a simulator reset, a bag loop) that voids the observations in
# flight and clears the histories; less is a clock publisher's jitter (``para-bag play`` steps back by milliseconds;
# clearing on each dropped the TF history of the past EE positions). The executor's value
# (para_ros.execution.executor_core.TIME_JUMP_BACK_MIN_S, reasons there).
TIME_JUMP_BACK_MIN_S = 0.5
GRIPPER_HISTORY = 500  # joint-state samples kept for the gripper at an image stamp (10 s at 50 Hz)
LATENCY_HISTORY = 500  # camera -> chunk latencies kept for the median and p99


class Report(Protocol):
    """Where the pipeline's diagnostics go (``para_ros.nodes.health.HealthReporter`` in the node)."""

    def count(self, key: str, n: int = 1) -> None: ...
    def problem(self, key: str, message: str) -> None: ...
    def fault(self, key: str, message: str) -> None: ...
    def clear(self, key: str) -> None: ...
    def set_value(self, key: str, value) -> None: ...
    def add_sample(self, key: str, sample: float) -> None: ...


LookupFn = Callable[..., np.ndarray]  # (frame, stamp_ns, wait=True, what=None) -> (4, 4) T_world_frame
EePoseFn = Callable[..., np.ndarray]  # (stamp_ns, wait=True) -> (4, 4) T_world_ee
ClockFn = Callable[[], int]  # the node's clock now (ns)


@dataclass
class PairingSettings:
    """The pairing rule (dynamic parameters of the node)."""

    pair_slop_s: float = 0.05  # largest stamp difference of a pair (s)
    max_observation_age_s: float = 1.0  # older pairs are stale (s)


@dataclass
class Prediction:
    """One observation's chunk, with what the node needs to publish it and its visualisation."""

    stamp_ns: int  # the observation time: the chunk's time base
    output: PolicyOutput
    cameras: Sequence[CameraObservation]
    state: RobotState
    generation: int  # the clock-jump count when the observation was taken
    stages_ms: dict[str, float] = field(default_factory=dict)  # receive, wait, observation_*, so far
    t_predicted: float = 0.0  # time.perf_counter() when the policy returned
    pair_gap_ns: int = 0  # the camera pair's time difference (newest minus oldest image stamp), nanoseconds


class Outputs(Protocol):
    """Where one observation's results go (the node's publishers), called by :meth:`InferencePipeline.infer_newest`
    in this order: the chunk's message built, sent; its visualisation; the stamps refused."""

    def chunk_message(self, prediction: Prediction) -> object:
        """The chunk's message, built (not sent yet)."""

    def send_chunk(self, message) -> None: ...
    def send_visualisation(self, message, visualisation: Visualisation) -> None:
        """Markers, voxels and overlay of the chunk whose ``message`` went out."""

    def send_no_chunk(self, stamp_ns: int) -> None:
        """The observation at ``stamp_ns`` gets no chunk (a lockstep simulator waits for an answer to every frame)."""


class InferencePipeline:
    """Observation in, chunk out (module docstring). Thread-safe: message callbacks and the inference thread share
    it."""

    def __init__(
        self,
        policy: Policy,
        observation_settings: ObservationSettings,
        report: Report,
        pairing: PairingSettings | None = None,
        info_sources: Sequence[str] | None = None,
        gripper_source: str = "the joint states",
        ee_from_joints=None,
        camera_check: CameraCheckSettings | None = None,
        familiarity_check: FamiliarityCheckSettings | None = None,
        draw_overlay: bool = False,
    ):
        """:param info_sources: each view's CameraInfo topic (named in problems); ``gripper_source``: the joint-state
        topic; ``ee_from_joints``: the joint-state history behind an ``ee_source: joint_states`` node (its history is
        forgotten at a clock jump); ``camera_check``: how the images are checked (default: on, the defaults);
        ``familiarity_check``: how the policy's novelty ratios are judged (default: on where the policy has a
        familiarity memory); ``draw_overlay``: each chunk's visualisation holds the first view's image with the tool
        frame and the path drawn."""
        self.policy = policy
        self.views = tuple(policy.view_names)
        self.observation_settings = observation_settings
        self.report = report
        self.pairing = pairing or PairingSettings()
        self.info_sources = list(info_sources) if info_sources is not None else None
        self.gripper_source = gripper_source
        self.ee_from_joints = ee_from_joints
        self.fusion = policy.fusion  # the earlier chunks, for fused decoding (empty otherwise)
        self._lock = threading.Lock()
        self.pairer = self._new_pairer()
        self.camera_info: dict[str, object] = {}
        self.camera_frames: dict[str, str] = {}  # view -> the TF frame of its camera (the overlay's frame id)
        self.gripper_history = GripperHistory(on_time_back="clear", max_len=GRIPPER_HISTORY)  # openings by stamp
        self._gripper_came = threading.Condition(self._lock)  # a gripper opening was added
        # Wall seconds an observation waits for the gripper opening of its stamp while the history holds only older
        # ones (0: never). Lockstep sets it: the simulator publishes each frame's joint state before the frame, but
        # this node's ROS thread may take the frame first, and the opening of an earlier instant would change the
        # chunk with the machine's timing.
        self.gripper_wait_s = 0.0
        self._received_ns: dict[tuple[str, int], int] = {}  # (view, image stamp) -> receipt time, the newest few
        self.generation = 0  # +1 at every backward clock jump: observations from before it are void
        self.latencies_s: deque[float] = deque(maxlen=LATENCY_HISTORY)
        self.last_observation_timing_s: dict[str, float] = {}
        self.camera_check = CameraCheck(camera_check)
        self.familiarity_check = FamiliarityCheck(familiarity_check)
        self._refused_ns: list[int] = []  # observation stamps refused (a camera's images, an unfamiliar scene)
        self.draw_overlay = draw_overlay

    # ------------------------------------------------------------------------------------------------ inputs
    def _new_pairer(self) -> ObservationPairer:
        return ObservationPairer(
            self.views,
            slop_ns=int(self.pairing.pair_slop_s * 1e9),
            max_age_ns=int(self.pairing.max_observation_age_s * 1e9),
        )

    def set_pairing(self, pairing: PairingSettings) -> None:
        """A new pairing rule: pairing starts afresh."""
        with self._lock:
            self.pairing = pairing
            self.pairer = self._new_pairer()

    def add_camera_info(self, view: str, info) -> None:
        with self._lock:
            self.camera_info[view] = info

    def add_joint_states(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float]) -> None:
        """A joint-state sample: the arm's joints (``ee_from_joints``) and the gripper opening."""
        if self.ee_from_joints is not None:
            self.ee_from_joints.history.add(stamp_ns, list(names), list(positions))
        value = gripper_opening(names, positions, self.observation_settings)
        if value is not None:
            with self._lock:  # a stamp older than the newest: time went back (a replay loop, a sim reset): cleared
                self.gripper_history.add(stamp_ns, value)
                self._gripper_came.notify_all()

    def add_image(self, view: str, stamp_ns: int, message, now_ns: int) -> bool:
        """A camera frame; True when it was taken (the inference step has something new), False when its stamp was
        refused (``image_stamp.<view>``)."""
        self.report.count(f"frames_in.{view}")
        with self._lock:
            dropped = self.pairer.add(view, stamp_ns, message, now_ns=now_ns)
            self._received_ns[(view, stamp_ns)] = now_ns  # the receive stage of the latency breakdown
            while len(self._received_ns) > 8 * len(self.views):
                self._received_ns.pop(next(iter(self._received_ns)))
        if dropped:
            self.report.count("dropped.image_stamp")
            self.report.problem(f"image_stamp.{view}", dropped)
            return False
        # A frame of this camera that is newer than the last one and not from the future: the bad stamp (a clock jump,
        # a reordering) is over. One key per camera, so one camera with a wrong clock does not flap the problem of the
        # other on and off.
        self.report.clear(f"image_stamp.{view}")
        return True

    def clock_jumped_back(self) -> None:
        """Forget everything on the old clock: observations in flight void, pairing afresh, gripper, joint-state and
        fusion histories cleared (the node clears its TF buffer itself)."""
        with self._lock:
            self.generation += 1
            self.pairer = self._new_pairer()
            self.gripper_history.clear()
            if self.ee_from_joints is not None:
                old = self.ee_from_joints.history
                self.ee_from_joints.history = type(old)(old.joint_names, old.history_ns / 1e9)
            self.fusion.clear()
            self.camera_check.reset()
            self.familiarity_check.reset()
            self._refused_ns.clear()

    def report_clock_jump(self, what: str) -> None:
        """After a jump (``what``: what happened, e.g. "clock jumped back by 3.000 s to t=1.000 s"): counted
        (``time_jumps_back``) and named (``last_time_jump``)."""
        self.report.count("time_jumps_back")
        self.report.set_value("last_time_jump", what)

    # ------------------------------------------------------------------------------------------ inference
    def infer_newest(self, clock_ns: ClockFn, lookup: LookupFn, ee_pose: EePoseFn, outputs: Outputs) -> None:
        """One call of the inference thread: the newest unused pair's chunk (:meth:`step`) to ``outputs``, then the
        observations refused since the last call answered with "no chunk". Never raises: an unexpected error (CUDA
        OOM, a driver bug) is reported (``internal_error``) and the observation dropped."""
        try:
            prediction = self.step(clock_ns(), lookup, ee_pose)
            if prediction is not None:
                self.publish(prediction, clock_ns, outputs)
            for stamp_ns in self.take_refused():
                outputs.send_no_chunk(stamp_ns)
        except Exception as exc:  # noqa: BLE001 - an unexpected error must not end the inference thread
            self.internal_error(exc)

    def publish(self, prediction: Prediction, clock_ns: ClockFn, outputs: Outputs) -> None:
        """The chunk's message built, dropped if the clock jumped back while the model ran (:meth:`is_current`),
        else sent; camera -> chunk ends there. Then its visualisation (after the chunk, so it never delays the
        executor) and the latency figures (:meth:`finish`)."""
        message = outputs.chunk_message(prediction)
        if not self.is_current(prediction):
            return
        outputs.send_chunk(message)
        latency_s = (clock_ns() - prediction.stamp_ns) / 1e9
        t_chunk_published = time.perf_counter()
        outputs.send_visualisation(message, self.visualisation(prediction))
        self.finish(prediction, latency_s, t_chunk_published)

    def step(self, now_ns: int, lookup: LookupFn, ee_pose: EePoseFn) -> Prediction | None:
        """The newest unused pair -> its chunk, or None (nothing new, or a problem, reported). ``now_ns``: the node's
        clock; ``lookup`` / ``ee_pose``: poses at a stamp, raising ``ObservationProblem``."""
        with self._lock:
            generation = self.generation
            pair = self.pairer.newest_pair(now_ns)
            if pair.frames is not None:
                self.pairer.mark_used(pair)
            elif pair.problem is None:
                pair.problem = self.silent_camera(now_ns)
            infos = dict(self.camera_info)
        if pair.problem:
            self.report.count("dropped.no_pair")
            self.report.problem("pairing", pair.problem)
            return None
        if pair.frames is None:
            return None  # nothing new since the last chunk
        self.report.clear("pairing")
        with self._lock:
            received_ns = max(
                self._received_ns.get((view, f.stamp_ns), now_ns) for view, f in zip(self.views, pair.frames)
            )
        stages_ms = {"receive": (received_ns - pair.stamp_ns) / 1e6, "wait": (now_ns - received_ns) / 1e6}
        try:
            cameras, state = self.build_observation(pair, infos, lookup, ee_pose)
        except ObservationProblem as problem:
            # The pair goes back: the next step (the next frame, or the inference loop's wake-up) tries it again
            # while it is the newest and not stale, e.g. once its CameraInfo or TF has come. A simulator in lockstep
            # waits for this instant's chunk and can only re-send frames of the same stamp, which the pairer refuses
            # as not newer, so a pair used up by a failed attempt would stall it for good.
            with self._lock:
                self.pairer.release(pair)
            self.report.count(f"dropped.{problem.key}")
            self.report.problem(problem.key, str(problem))
            return None
        stages_ms.update({f"observation_{k}": 1e3 * v for k, v in self.last_observation_timing_s.items()})
        self.report.add_sample("pair_gap_median_ms", pair.gap_ns / 1e6)  # how far apart the paired images were
        if not self.cameras_usable(pair.stamp_ns, cameras, state):
            return None
        prediction = self.predict(pair.stamp_ns, cameras, state, generation=generation, stages_ms=stages_ms)
        if prediction is not None:
            prediction.pair_gap_ns = pair.gap_ns
        return prediction

    def cameras_usable(self, stamp_ns: int, cameras: Sequence[CameraObservation], state: RobotState) -> bool:
        """Whether every camera's image passes the camera check; a refused observation is reported per camera
        (``camera.<view>``, cleared once that camera is fine) and its stamp kept for :meth:`take_refused`."""
        tool_xyz_m = np.asarray(state.T_world_ee, dtype=np.float64)[:3, 3]  # (3,)
        problems = {
            view: self.camera_check.check(view, cam.image_rgb, stamp_ns / 1e9, tool_xyz_m)
            for view, cam in zip(self.views, cameras)
        }
        for view, problem in problems.items():
            if problem:
                self.report.problem(f"camera.{view}", problem)
            else:
                self.report.clear(f"camera.{view}")
        if not any(problems.values()):
            return True
        self.report.count("dropped.camera")
        with self._lock:
            self._refused_ns.append(stamp_ns)
        return False

    def take_refused(self) -> list[int]:
        """The observation stamps refused (a camera's images, an unfamiliar scene) since the last call (and forget
        them): a lockstep simulator is told that they get no chunk."""
        with self._lock:
            refused, self._refused_ns = self._refused_ns, []
        return refused

    def silent_camera(self, now_ns: int) -> str | None:
        """Under the lock: why no pair can come when the pairer saw no problem, or None. A camera whose newest frame
        is older than ``max_observation_age_s`` while another camera's is not lags or is silent.

        Why here: the pairer says "a partner is still on its way" whenever its short history (4 frames a camera) holds
        no pair and the newest frame's partner is not overdue yet at the time of asking. The node asks right after
        each frame, so while one camera streams faster than 1 / (slop + partner grace) (about 7 Hz) and the other is
        silent, that is all it would say once the last pair had left the history (test_faults_inference_restart). A
        frame older than max_observation_age_s could only make a stale pair, so this is the pairer's stale-pair rule
        applied to the pair that is no longer in its history."""
        newest = {view: self.pairer.newest_stamp_ns(view) for view in self.views}
        if len(newest) < 2 or any(t is None for t in newest.values()):
            return None  # the pairer reports a camera that never sent anything
        max_age_ns = int(self.pairing.max_observation_age_s * 1e9)
        old = {view: now_ns - t for view, t in newest.items() if now_ns - t > max_age_ns}
        if not old or len(old) == len(newest):
            return None  # every camera fresh (a partner on its way), or all silent (the pairer's stale pair)
        ages = ", ".join(f"{view} {(now_ns - t) / 1e9:.3f} s" for view, t in newest.items())
        silent = " and ".join(f"the {view}" for view in old)
        verb = "cameras lag or are silent" if len(old) > 1 else "camera lags or is silent"
        return (
            f"no matching pair: the newest frames are {ages} old (> max_age {max_age_ns / 1e9:.3f} s for "
            f"{', '.join(old)}); {silent} {verb}"
        )

    def build_observation(
        self, pair: PairResult, infos: dict, lookup: LookupFn, ee_pose: EePoseFn
    ) -> tuple[Sequence[CameraObservation], RobotState]:
        """(cameras, state) of ``pair`` by the shared builder (para_ros.observation.builder), its notes as
        diagnostics; raises ``ObservationProblem``."""
        with self._lock:  # the opening at the image stamp, by the bag tools' rule (sample and hold)
            if self.gripper_wait_s > 0 and len(self.gripper_history):
                history = self.gripper_history
                self._gripper_came.wait_for(
                    lambda: not len(history) or history.stamps_ns[-1] >= pair.stamp_ns, timeout=self.gripper_wait_s
                )
            gripper = self.gripper_history.at(pair.stamp_ns)
        obs = build_observation(
            self.observation_settings,
            pair.stamp_ns,
            [(f.message, f.stamp_ns) for f in pair.frames],
            [infos.get(view) for view in self.views],
            lookup=lookup,
            ee_pose=ee_pose,
            gripper=gripper,
            info_sources=self.info_sources,
            gripper_source=self.gripper_source,
        )
        self.last_observation_timing_s = obs.timing_s
        for view, frame in zip(self.views, obs.camera_frames):
            self.camera_frames[view] = frame  # the overlay image's frame id
        for view in self.views:  # notes: warnings that did not stop the observation, active while they last
            if f"distortion.{view}" in obs.notes:
                self.report.problem(f"distortion.{view}", obs.notes[f"distortion.{view}"])
            else:
                self.report.clear(f"distortion.{view}")
        if "gripper" in obs.notes:
            self.report.problem("gripper", obs.notes["gripper"])
        else:
            self.report.clear("gripper")
        for key in ("image", "camera_info", "tf", "joint_states"):  # every view and the EE made it: problems gone
            self.report.clear(key)
        return obs.cameras, obs.state

    def predict(
        self, stamp_ns: int, cameras, state, generation: int | None = None, stages_ms: dict[str, float] | None = None
    ) -> Prediction | None:
        """The policy's chunk of one observation, or None when the policy refused it or its output is not finite
        (``policy``, ``dropped.policy``). ``generation``: the clock-jump count when the observation was taken
        (default: now)."""
        try:
            out = self.policy.predict(cameras, state, stamp_s=stamp_ns / 1e9, fusion=self.fusion)
            t_predicted = time.perf_counter()
        except ValueError as exc:
            self.report.count("dropped.policy")
            self.report.problem("policy", f"policy refused the observation: {exc}")
            return None
        arrays = (out.positions_world, out.quaternions_xyzw, out.gripper, out.confidence, out.time_offsets_s)
        arrays += (out.entropy, out.chunk_agreement, out.view_agreement)  # the other confidence measures
        if not all(np.all(np.isfinite(a)) for a in arrays):
            self.report.count("dropped.policy")
            self.report.fault("policy", "policy output is not finite: chunk dropped")
            return None
        self.report.clear("policy")
        if not self.scene_familiar(stamp_ns, out):
            return None
        return Prediction(
            stamp_ns,
            out,
            cameras,
            state,
            self.generation if generation is None else generation,
            dict(stages_ms or {}),
            t_predicted,
        )

    def scene_familiar(self, stamp_ns: int, out: PolicyOutput) -> bool:
        """Whether the observation looks familiar to the policy (``para_ros.inference.familiarity_check``); an
        unfamiliar one is reported (``familiarity``, ``dropped.unfamiliar``) and its stamp kept for
        :meth:`take_refused`. The windowed ratios go to ``novelty_ratio.<view>``."""
        with self._lock:
            memory = self.policy.familiarity
            window = memory.settings.window_frames if memory is not None else None
            problem = self.familiarity_check.check(self.views, out.novelty_ratio, window)
            medians = self.familiarity_check.last_medians
        for view, value in zip(self.views, medians):
            self.report.set_value(f"novelty_ratio.{view}", round(float(value), 3))
        if problem is None:
            self.report.clear("familiarity")
            return True
        self.report.count("dropped.unfamiliar")
        self.report.problem("familiarity", problem)
        with self._lock:
            self._refused_ns.append(stamp_ns)
        return False

    def is_current(self, prediction: Prediction) -> bool:
        """False (counted ``dropped.time_jump``) when the clock jumped back while the model ran: the observation is
        from the old clock and its chunk must not be published."""
        if prediction.generation != self.generation:
            self.report.count("dropped.time_jump")
            return False
        return True

    # -------------------------------------------------------------------------------------------- outputs
    def visualisation(self, prediction: Prediction) -> Visualisation:
        """What rviz shows of ``prediction``'s chunk (``para_ros.viz.chunk_visualisation``), its overlay image when
        ``draw_overlay``."""
        camera = prediction.cameras[0] if self.draw_overlay else None
        return chunk_visualisation(
            prediction.output,
            prediction.state.T_world_ee,
            self.policy.config.pred_size,
            overlay_camera=camera,
            overlay_frame=self.camera_frames.get(self.views[0], ""),
        )

    def overlay_rgb(self, prediction: Prediction) -> np.ndarray:
        """(H, W, 3) uint8: the first view with the tool frame and the predicted path."""
        camera = prediction.cameras[0]
        return overlay_rgb(camera, prediction.state.T_world_ee, prediction.output.positions_world)

    def finish(self, prediction: Prediction, latency_s: float, t_chunk_published: float) -> None:
        """The chunk went out ``latency_s`` after its observation stamp (its visualisation after it): the latency
        figures and stages, ``chunks_out``; a whole observation went through, so an unexpected error is gone."""
        self.latencies_s.append(latency_s)
        self.report_stages(prediction, latency_s, t_chunk_published)
        self.report.count("chunks_out")
        self.report.clear("internal_error")
        self.report.set_value("latency_median_s", f"{np.median(self.latencies_s):.4f}")
        self.report.set_value("latency_p99_s", f"{np.percentile(self.latencies_s, 99):.4f}")
        self.report.set_value("policy_total_s", f"{self.policy.last_timing_s.get('total', float('nan')):.4f}")

    def report_stages(self, prediction: Prediction, latency_s: float, t_chunk_published: float) -> None:
        """Where the milliseconds of one chunk went, as medians (``stage_median_ms.<stage>``): receive (image stamp
        -> receipt), wait (receipt -> the inference thread took the pair), observation_decode / observation_tf (the
        builder), preprocess / model / decode (the policy), publish (the chunk message built and sent), and
        ``other`` (what the stages do not account for); they sum to the camera -> chunk latency. The rviz outputs
        after the chunk (markers, cloud, overlay) are not part of it: ``viz_publish_median_ms``."""
        timing = self.policy.last_timing_s
        stages = {
            **prediction.stages_ms,
            "preprocess": 1e3 * timing.get("preprocess", 0.0),
            "model": 1e3 * timing.get("model", 0.0),
            "decode": 1e3 * timing.get("decode", 0.0),
            "publish": 1e3 * (t_chunk_published - prediction.t_predicted),
        }
        stages["other"] = 1e3 * latency_s - sum(stages.values())
        stages_and_viz = {
            **{f"stage_median_ms.{k}": v for k, v in stages.items()},
            "viz_publish_median_ms": 1e3 * (time.perf_counter() - t_chunk_published),
        }
        for key, ms in stages_and_viz.items():
            self.report.add_sample(key, ms)

    def internal_error(self, exc: Exception) -> None:
        """An unexpected error (CUDA OOM, a driver bug) dropped the observation: counted and reported, never
        raised."""
        self.report.count("dropped.internal_error")
        self.report.fault("internal_error", f"observation dropped after an unexpected {type(exc).__name__}: {exc}")
