"""The ONE place where the policy's observation is assembled from camera, TF and joint-state messages.

The live inference node and the bag tools (``para-bag extract`` / ``eval`` / ``play``) both call
:func:`build_observation`, so what a policy is trained on and what it sees on the robot cannot drift apart. Per
camera, in this order (the first failure names the camera and raises :class:`ObservationProblem` with the key the
node's diagnostics use):

1. a ``CameraInfo`` must be known (``camera_info``);
2. the image is decoded to RGB by the cv_bridge adapter (``image``);
3. the intrinsics come from the CameraInfo's ``k`` (raw images) or ``p`` (rectified) matrix, in ``para_core``'s
   pixel convention, and must describe an image of this size (``camera_info``); non-zero distortion with ``k`` is
   noted (``distortion.<view>``: PARA does not undistort);
4. the camera's frame is the CameraInfo's ``frame_id`` (the image's when that is empty), and its pose in the world
   is looked up at the IMAGE's stamp (``tf``).

Then the end-effector pose at the observation stamp (TF or forward kinematics of the joints: the caller's
``ee_pose``), the past positions by :func:`para_ros.observation.pairing.past_positions` (history only, no
waiting), and the gripper opening at the observation stamp by sample-and-hold over :class:`GripperHistory`; with no
gripper sample the gripper is taken as open and noted (``gripper``).

The module is ROS-free: messages are read by their fields (``rclpy`` or ``rosbags`` objects alike, images through
the adapter), TF and kinematics come in as functions.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from para_core.model.policy import CameraObservation, RobotState
from para_ros.observation.camera_model import CAMERA_MATRICES, distortion_ignored, intrinsics_from_camera_info
from para_ros.observation.pairing import past_positions, sample_and_hold


class ObservationProblem(ValueError):
    """Why an observation cannot be built; ``key`` is the diagnostics key (image, camera_info, tf, joint_states)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class ObservationSettings:
    """What both paths must agree on (the node's parameters, the bag tools' options)."""

    view_names: tuple[str, ...] = ("scene", "wrist")
    camera_matrix: str = "k"  # "k" raw images, "p" rectified
    gripper_joint: str = "gripper"
    gripper_open_position: float = 1.0  # joint position of the fully open gripper (opening = position / this)
    past_n: int = 0  # EE positions before the observation the policy takes
    step_dt_s: float = 0.1  # their spacing (the policy's chunk step)

    def __post_init__(self):
        if self.camera_matrix not in CAMERA_MATRICES:
            raise ValueError(f"camera_matrix={self.camera_matrix!r}: use 'k' (raw images) or 'p' (rectified images)")
        if not (math.isfinite(self.gripper_open_position) and self.gripper_open_position > 0):
            raise ValueError(
                f"gripper_open_position={self.gripper_open_position!r} must be a finite joint position "
                "> 0 (the opening is position / gripper_open_position)"
            )
        if self.past_n < 0 or not (math.isfinite(self.step_dt_s) and self.step_dt_s > 0):
            raise ValueError(f"past_n={self.past_n!r} must be >= 0 and step_dt_s={self.step_dt_s!r} > 0")
        if not self.view_names:
            raise ValueError("view_names is empty: name at least one camera")


@dataclass
class Observation:
    """One synchronised observation: what :class:`para_core.model.policy.Policy` takes, and where it came from."""

    stamp_ns: int  # observation time: the newest image stamp of the pair
    view_names: tuple[str, ...]
    image_stamps_ns: tuple[int, ...]  # each view's image stamp
    cameras: tuple[CameraObservation, ...]  # one per view, in view_names order
    state: RobotState
    camera_frames: tuple[str, ...]  # the TF frame of each camera
    notes: dict[str, str] = field(default_factory=dict)  # warnings that did not stop it (distortion.<view>, gripper)
    timing_s: dict[str, float] = field(default_factory=dict)  # "decode" (images), "tf" (every pose look-up), seconds

    @property
    def pair_gap_ns(self) -> int:
        """The pair's time difference: newest minus oldest image stamp, nanoseconds (0 for one camera)."""
        return max(self.image_stamps_ns) - min(self.image_stamps_ns)

    @property
    def T_world_ee(self) -> np.ndarray:  # noqa: N802 - T is the standard name
        return self.state.T_world_ee

    @property
    def gripper(self) -> float:
        return self.state.gripper


def gripper_opening(names: Sequence[str], positions: Sequence[float], settings: ObservationSettings) -> float | None:
    """The gripper opening (0 closed .. 1 open) in one ``JointState`` (names, positions), or None when the message
    has no finite position for ``settings.gripper_joint``."""
    names = list(names)
    if settings.gripper_joint not in names:
        return None
    i = names.index(settings.gripper_joint)
    if i >= len(positions) or not np.isfinite(positions[i]):
        return None
    return float(np.clip(float(positions[i]) / settings.gripper_open_position, 0.0, 1.0))


class GripperHistory:
    """Gripper openings by stamp; :meth:`at` is the sample-and-hold value at a stamp (None with no sample).

    ``on_time_back``: what a sample older than the newest does. ``"clear"`` (live: the clock jumped back, a sim reset
    or a replay loop; the old samples belong to another time line) or ``"insert"`` (a recording: messages logged
    slightly out of stamp order are put in place).
    """

    def __init__(self, on_time_back: str = "clear", max_len: int | None = None):
        if on_time_back not in ("clear", "insert"):
            raise ValueError(f"on_time_back={on_time_back!r}: use 'clear' or 'insert'")
        self.on_time_back, self.max_len = on_time_back, max_len
        self.stamps_ns: list[int] = []
        self.values: list[float] = []

    def add(self, stamp_ns: int, value: float) -> None:
        stamp_ns = int(stamp_ns)
        if self.stamps_ns and stamp_ns < self.stamps_ns[-1]:
            if self.on_time_back == "clear":
                self.clear()
            else:
                i = bisect.bisect_right(self.stamps_ns, stamp_ns)
                self.stamps_ns.insert(i, stamp_ns)
                self.values.insert(i, float(value))
                return
        self.stamps_ns.append(stamp_ns)
        self.values.append(float(value))
        if self.max_len is not None and len(self.stamps_ns) > self.max_len:
            del self.stamps_ns[0], self.values[0]

    def clear(self) -> None:
        self.stamps_ns.clear()
        self.values.clear()

    def at(self, stamp_ns: int) -> float | None:
        value = sample_and_hold(self.stamps_ns, self.values, stamp_ns)
        return None if value is None else float(value)

    def __len__(self) -> int:
        return len(self.stamps_ns)


LookupFn = Callable[[str, int, bool], np.ndarray]  # (frame, stamp_ns, wait) -> (4, 4) T_world_frame or raise
EePoseFn = Callable[[int, bool], np.ndarray]  # (stamp_ns, wait) -> (4, 4) T_world_ee or raise


def build_observation(
    settings: ObservationSettings,
    stamp_ns: int,
    images: Sequence[tuple[object, int]],
    infos: Sequence[object | None],
    lookup: LookupFn,
    ee_pose: EePoseFn,
    gripper: float | None,
    info_sources: Sequence[str] | None = None,
    gripper_source: str = "the joint states",
) -> Observation:
    """The observation at ``stamp_ns`` (module docstring for the rules).

    :param images: (image message, its stamp ns) per view, in ``settings.view_names`` order.
    :param infos: the CameraInfo per view (None: none received yet).
    :param lookup: ``T_world_frame`` at a stamp; raises :class:`ObservationProblem` (``tf``) when there is none.
    :param ee_pose: ``T_world_ee`` at a stamp; raises :class:`ObservationProblem` when there is none. With
        ``wait=False`` (the past positions) it uses what is known already.
    :param gripper: the opening at ``stamp_ns`` (e.g. :meth:`GripperHistory.at`), None when unknown.
    :param info_sources: per view, where its CameraInfo comes from (a topic), for the "no CameraInfo" message.
    :raises ObservationProblem: the first check that failed, naming the camera.
    """
    from para_ros.adapters.cv_bridge import CvBridgeError, image_msg_to_rgb  # rclpy: loaded on first use, not on import

    views = settings.view_names
    if len(images) != len(views) or len(infos) != len(views):
        raise ValueError(f"build_observation: {len(images)} images and {len(infos)} CameraInfos for views {views}")
    notes: dict[str, str] = {}
    cameras, frames = [], []
    decode_s = 0.0
    t_start = time.perf_counter()
    for k, (view, (image, image_stamp_ns), info) in enumerate(zip(views, images, infos)):
        if info is None:
            source = f" on {info_sources[k]}" if info_sources else ""
            raise ObservationProblem(
                "camera_info", f"no CameraInfo received{source} yet: cannot place the {view} camera"
            )
        t0 = time.perf_counter()
        try:
            rgb = image_msg_to_rgb(image)
            decode_s += time.perf_counter() - t0
        except (CvBridgeError, ValueError) as exc:
            raise ObservationProblem(
                "image", f"{view} image at t={image_stamp_ns / 1e9:.6f} s rejected: {exc}"
            ) from None
        try:
            K = intrinsics_from_camera_info(info, rgb.shape[1], rgb.shape[0], settings.camera_matrix)
        except ValueError as exc:
            raise ObservationProblem("camera_info", f"{view} camera: {exc}") from None
        warning = distortion_ignored(info, settings.camera_matrix)
        if warning:
            notes[f"distortion.{view}"] = f"{view} camera: {warning}"
        frame = str(info.header.frame_id) or str(image.header.frame_id)
        try:
            T_world_cam = lookup(frame, int(image_stamp_ns), True)
        except ObservationProblem as problem:
            raise ObservationProblem(problem.key, f"{view} camera pose: {problem}") from None
        cameras.append(CameraObservation(image_rgb=rgb, K=K, T_world_cam=T_world_cam))
        frames.append(frame)
    T_world_ee = ee_pose(int(stamp_ns), True)

    def ee_xyz_at(t_ns: int):
        try:
            return ee_pose(t_ns, False)[:3, 3]
        except ObservationProblem:
            return None

    past = past_positions(ee_xyz_at, int(stamp_ns), settings.past_n, settings.step_dt_s, T_world_ee[:3, 3])
    if gripper is None:
        notes["gripper"] = f"no '{settings.gripper_joint}' in {gripper_source} yet: assuming the gripper is open"
    state = RobotState(
        T_world_ee=T_world_ee, gripper=1.0 if gripper is None else float(gripper), past_positions_world=past
    )
    total_s = time.perf_counter() - t_start
    return Observation(
        stamp_ns=int(stamp_ns),
        view_names=tuple(views),
        image_stamps_ns=tuple(int(s) for _, s in images),
        cameras=tuple(cameras),
        state=state,
        camera_frames=tuple(frames),
        notes=notes,
        timing_s={"decode": decode_s, "tf": total_s - decode_s},
    )


def matrix_is_finite(T: np.ndarray, what: str) -> np.ndarray:
    """``T`` unchanged, or :class:`ObservationProblem` (``tf``) when it has a non-finite entry."""
    if not np.all(np.isfinite(T)):
        raise ObservationProblem("tf", f"{what} is not finite")
    return T
