"""``inference_node``: scene + wrist camera images and TF in, ``para_msgs/ActionChunk`` and rviz markers out.

A thin node over :class:`para_ros.inference.pipeline.InferencePipeline` (pairing, the observation, the policy and its
chunk decoding, clock jumps, latency stages and diagnostics, free of ROS), the policy choice
(:mod:`para_ros.inference.policy_choice`) and the world poses (:mod:`para_ros.observation.world_poses`): the node
declares its parameters, subscribes, answers pose look-ups from its TF buffer, runs the pipeline in its inference
thread and publishes what comes back.

Timing rules (what belongs together):

* Images are paired by stamp within ``pair_slop_s``, each with the other camera's nearest frame
  (:func:`para_ros.observation.pairing.nearest_pair`; the pair's time difference is ``pair_gap_median_ms`` on
  ``/diagnostics``); only the newest pair is used (frames are never queued), and a pair older than
  ``max_observation_age_s`` is stale and skipped (one camera silent).
* Each camera's pose is looked up in TF (``world_frame`` <- the frame id of that camera's CameraInfo header) at THAT
  image's stamp, so a moving wrist camera is placed where it was when the frame was taken.
* The observation time is the newer stamp of the pair; the chunk is stamped with it. The end-effector pose comes from
  TF (``world_frame`` <- ``ee_frame``) at that time (``ee_source: tf``, the default: the simulator, the executor's
  i2rt backend and robot_state_publisher publish ``grasp_site``), or from ``/joint_states`` interpolated at that time
  and the YAM's forward kinematics (``ee_source: joint_states``, for drivers without a tool frame in TF); the past
  ``mv_past_n`` EE positions come from the same source at ``stamp - k * frame_stride / dataset_fps``; where it no
  longer (or not yet) holds them, the oldest available position is repeated.
* The gripper opening comes from ``/joint_states`` (``gripper_joint``), scaled by ``gripper_open_position``.

Time jumps (``use_sim_time`` and a ``/clock`` that goes back: a simulator reset, a bag loop): the node registers an
rclpy clock jump callback (a backward jump of :data:`TIME_JUMP_BACK_MIN_S` = 0.5 s or more, and a switch of time
source) BEFORE its TF buffer, so it runs first. Smaller steps back are a clock publisher's jitter (``para-bag play``
steps back by milliseconds; clearing on each dropped the TF history of the past EE positions), as in the executor.
Before the new time is set it clears the TF buffer's history (dynamic transforms; static ones stay, as in tf2), the
camera pairer (frames and the last pair used), the gripper and joint-state histories and the chunks kept for fused
decoding, and marks every observation in flight as void: a chunk of an observation taken before the jump is dropped (``dropped.time_jump``), never published.
Without this the new, earlier stamps would be refused as out of order by the pairer and as too old by TF for as long
as the old history lasts (30 s), and old frames could still pair. After the jump it counts ``time_jumps_back``, says
what happened in ``last_time_jump`` on ``/diagnostics`` and logs a warning. A callback rather than comparing
consecutive ``now()`` values: the node reads its clock in several threads (image callbacks, the inference thread),
whose reads interleave, so a comparison needs a tolerance and catches a jump only at its next read, after an image on
the new clock may already have met the old frames; rcl compares each ``/clock`` with the previous one and calls the
pre-jump callback in the executor thread before any callback sees the new time.

Latency stages: for every chunk the node measures where its time went and reports the medians on ``/diagnostics``
(``stage_median_ms.<stage>``): ``receive`` (image stamp -> the newest frame of the pair received), ``wait`` (received
-> the inference thread took the pair), ``observation_decode`` and ``observation_tf`` (the shared observation builder:
images decoded; TF look-ups, EE history and intrinsics), ``preprocess``, ``model`` and ``decode`` (the policy),
``publish`` (the chunk) and ``other`` (the rest of the stamp -> chunk latency). Markers, voxel cloud and overlay go
out after the chunk and never delay it (their time: ``viz_publish_median_ms``). ``bench/bench_inference_node.py``
prints them.

Bad input never crashes the node and never yields a chunk: every problem (unsupported encoding, size mismatch with
CameraInfo, bad K, missing/extrapolated/refused TF, silent camera, out-of-order frames, missing CameraInfo, a policy
error) is logged (throttled, per problem) and reported on ``/diagnostics``, and that observation is dropped. Every
problem also clears once its condition is gone (``para_ros.nodes.health``): a bad image stamp (``image_stamp.<view>``) at
that camera's next frame with a valid stamp, the pairing problem at the next pair, the observation problems
(``image``, ``camera_info``, ``tf``, ``joint_states``) and ``distortion.<view>`` at the next observation built without
them, ``policy`` and ``internal_error`` at the next chunk published; ``test/test_faults_diagnostics.py`` checks that
every key set has such a path.

Chunk decoding (``decoding``, ``para_core.model.decoding``): ``argmax`` (each step's most probable voxel, the
reference), ``joint`` (the chunk's voxels chosen together within ``decoding_max_speed_m_s``, which should match the
executor's ``max_implied_speed_m_s``) or ``fused`` (``joint`` over the product of the new chunk's distributions with
those of the earlier chunks still in force at the same times, weighted by ``exp(-age / fusion_tau_s)``; the chunk
time base is the observation stamp, step i at ``stamp + i * frame_stride / dataset_fps``; forgotten at a clock jump).
"""

from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState, PointCloud2
from std_msgs.msg import Int64MultiArray
from visualization_msgs.msg import MarkerArray

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES, PRESET_NAMES
from para_core.model.decoding import DECODING_MODES, DecodingConfig
from para_core.model.hardware import configure_cpu_threads, describe_precision
from para_msgs.msg import ActionChunk
from para_ros.adapters.tf import Buffer, TransformException, TransformListener
from para_ros.execution.chunk import ChunkChecks
from para_ros.inference.familiarity_check import FamiliarityCheckSettings
from para_ros.inference.pipeline import InferencePipeline, PairingSettings
from para_ros.inference.policy_choice import PolicyChoice
from para_ros.nodes.health import HealthReporter
from para_ros.nodes.lockstep_hooks import ACK_QOS
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.nodes.runtime import run_node, time_jump_text
from para_ros.observation.builder import ObservationSettings
from para_ros.observation.camera_check import CameraCheckSettings
from para_ros.observation.ee_from_joints import EeFromJoints
from para_ros.observation.world_poses import PoseLookupError, WorldPoses
from para_ros.ros_io.chunk_msg import action_chunk_msg
from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
from para_ros.ros_io.rviz import chunk_markers, rgb_image, voxel_cloud
from para_ros.sim.lockstep import no_chunk_ack
from para_ros.stamps import stamp_to_ns

# The clock stepping back at least this far is a jump (reset, loop) that clears the node's history; less is a clock
# publisher's jitter. The executor's value (para_ros.execution.executor_core.TIME_JUMP_BACK_MIN_S, reasons there).
TIME_JUMP_BACK_MIN_S = 0.5
VIEW_TOPIC_DEFAULTS = {
    "scene": ("/scene_cam/image_raw", "/scene_cam/camera_info"),
    "wrist": ("/wrist_cam/image_raw", "/wrist_cam/camera_info"),
}


PARAMETERS = ParameterTable(
    "inference_node",
    [
        Param(
            "checkpoint",
            "",
            "Checkpoint directory (model.safetensors + config.json); empty: an UNTRAINED model with "
            "random weights (demos, tests).",
            section="policy",
        ),
        Param(
            "random_preset", "tiny", "Config preset of the random model when checkpoint is empty.", choices=PRESET_NAMES
        ),
        Param("random_seed", 0, "Seed of the random model when checkpoint is empty.", range=(0, 2**31 - 1)),
        Param("device", "auto", "Torch device: auto (cuda if available, else cpu) | cpu | cuda | cuda:N."),
        Param(
            "threads",
            0,
            "Torch CPU threads; 0 = auto (OMP_NUM_THREADS if set, else the cores this process may use). "
            "OpenMP's wait policy is fixed before torch loads: OMP_WAIT_POLICY of the environment, else passive "
            "(para_ros.nodes sets it; para_core.model.hardware.configure_cpu_threads).",
            range=(0, 4096),
        ),
        Param(
            "dtype",
            "fp32",
            "Inference precision (the geometry stays fp32); auto: the fastest the device computes "
            "natively (bf16 on a CPU with AVX512_BF16 / AMX or a GPU with bf16, fp16 on older GPUs, else fp32).",
            choices=INFERENCE_DTYPES,
        ),
        Param(
            "keep_freed_memory",
            True,
            "On a CPU device: make this process's allocator keep freed memory for the next "
            "forward (para_core.model.hardware.keep_freed_memory; otherwise page faults cost 10-45 % of a CPU "
            "forward). The process then keeps its peak footprint.",
        ),
        Param(
            "fast_path",
            False,
            "The model's fast inference path (v4: para_core.model.v4_fast; the same argmax voxels "
            "and logits within float tolerance, tested against the reference path) instead of the reference path.",
        ),
        Param(
            "compile_mode",
            "off",
            "torch.compile the backbone: off | default | reduce-overhead (CUDA graphs) | "
            "max-autotune. The first inference compiles (tens of seconds; a C++ compiler on CPU).",
            choices=COMPILE_MODES,
        ),
        Param(
            "decoding",
            "argmax",
            "How the chunk's voxels are chosen: argmax (each step's most probable voxel, the "
            "reference) | joint (the best path through each step's decoding_top_k most probable voxels within "
            "decoding_max_speed_m_s) | fused (joint over the product with the earlier chunks' distributions at the same "
            "times, weighted exp(-age / fusion_tau_s)).",
            choices=DECODING_MODES,
        ),
        Param(
            "decoding_top_k",
            DecodingConfig.top_k,
            "Candidate voxels per step of joint / fused decoding.",
            range=(1, 4096),
        ),
        Param(
            "decoding_max_speed_m_s",
            ChunkChecks.max_implied_speed_m_s,
            "The fastest tool motion two consecutive steps "
            "of a joint / fused chunk may imply (m/s); match the chunk_executor's max_implied_speed_m_s.",
            range=(1e-3, 1e3),
        ),
        Param(
            "decoding_motion_cost_per_m",
            DecodingConfig.motion_cost_per_m,
            "Score (nats) a joint / fused path loses per metre of motion (0: only the speed limit).",
            range=(0.0, 1e6),
        ),
        Param(
            "fusion_tau_s",
            DecodingConfig.fusion_tau_s,
            "Fused decoding: an earlier chunk of age a (s) weighs exp(-a / fusion_tau_s).",
            range=(1e-3, 3600.0),
        ),
        Param("world_frame", "base", "Frame of the chunk poses (the policy's world).", section="frames and state"),
        Param("ee_frame", "grasp_site", "TF frame of the end-effector (tool) point."),
        Param(
            "ee_source",
            "tf",
            "Where the EE pose comes from: tf (world <- ee_frame) | joint_states (/joint_states + "
            "the YAM's forward kinematics).",
            choices=("tf", "joint_states"),
        ),
        Param(
            "yam_config",
            "",
            "YAM model YAML for ee_source joint_states (joint names, tool site); empty = the shipped config/yam.yaml.",
        ),
        Param(
            "image_transport",
            "raw",
            "raw (sensor_msgs/Image) | compressed (sensor_msgs/CompressedImage on <image_topic>/compressed).",
            choices=("raw", "compressed"),
            section="observations",
        ),
        Param(
            "pair_slop_s", 0.05, "Largest stamp difference of a scene/wrist pair (s).", range=(0.0, 10.0), dynamic=True
        ),
        Param(
            "max_observation_age_s",
            1.0,
            "Pairs older than this are stale (one camera silent) (s).",
            range=(0.001, 3600.0),
            dynamic=True,
        ),
        Param("tf_timeout_s", 0.1, "How long a TF lookup may wait for data (s).", range=(0.0, 10.0), dynamic=True),
        Param(
            "max_rate_hz",
            30.0,
            "Most inferences per second (Hz): the inference thread wakes on every image, at most this often.",
            range=(0.1, 1000.0),
            dynamic=True,
        ),
        Param("gripper_joint", "gripper", "Joint in /joint_states that holds the gripper."),
        Param(
            "gripper_open_position",
            1.0,
            "Gripper joint position that means fully open (closed = 0); the opening is "
            "position / this, clipped to 0..1.",
            range=(1e-9, 1e9),
        ),
        Param(
            "camera_matrix",
            "k",
            "Intrinsics from CameraInfo: k (raw images; distortion is not corrected and is "
            "reported) | p (rectified images).",
            choices=("k", "p"),
        ),
        Param(
            "publish_pointcloud",
            True,
            "Publish the most probable voxels (PointCloud2).",
            dynamic=True,
            section="outputs",
        ),
        Param("marker_color_by", "step", "Colour of the step markers.", choices=("step", "confidence"), dynamic=True),
        Param("chunk_topic", "/para/action_chunk", "para_msgs/ActionChunk output topic."),
        Param("markers_topic", "/para/markers", "visualization_msgs/MarkerArray output topic."),
        Param("pointcloud_topic", "/para/voxels", "sensor_msgs/PointCloud2 output topic."),
        Param(
            "overlay_topic",
            "",
            "Optional sensor_msgs/Image of the first view with the tool frame (TF) and the "
            "predicted path drawn, for rviz (e.g. /para/overlay); empty = off.",
        ),
        Param(
            "camera_check",
            True,
            "Refuse an observation whose camera is covered (one flat colour) or frozen (the same image while the tool "
            "moves): no chunk, the camera and why on /diagnostics (camera.<view>); false = the policy sees whatever "
            "comes.",
            dynamic=True,
            section="camera check (docs/confidence.md)",
        ),
        Param(
            "camera_min_contrast_levels",
            2.0,
            "An image whose grey levels (0..255) spread (standard deviation) this little or less is covered.",
            range=(0.0, 127.0),
            dynamic=True,
        ),
        Param(
            "camera_frozen_after_s",
            0.5,
            "An image unchanged this long (image stamps) while the tool moved camera_frozen_tool_motion_m is frozen.",
            range=(0.01, 60.0),
            dynamic=True,
        ),
        Param(
            "camera_frozen_tool_motion_m",
            0.02,
            "How far the tool must have moved since a camera's image last changed for the camera to count as frozen.",
            range=(0.001, 1.0),
            dynamic=True,
        ),
        Param(
            "familiarity_check",
            True,
            "Withhold the chunks while a camera sees what the policy never saw (an unseen object, a hand in the "
            "workspace): a view's novelty against the checkpoint's memory of its training features "
            "(familiarity.safetensors, built by `para-train familiarity`) above its limit, as the median of the last "
            "familiarity_window_frames observations; the view and how far on /diagnostics (familiarity). Does nothing "
            "for a checkpoint without a memory; false = chunks whatever the scene.",
            dynamic=True,
            section="familiarity check (docs/confidence.md)",
        ),
        Param(
            "familiarity_memory",
            "",
            "A directory holding a familiarity memory of the checkpoint (familiarity.safetensors + .json) to use "
            "instead of the checkpoint's own, e.g. checkpoints/pick_place_robust/familiarity; empty = the "
            "checkpoint's, if it has one. A memory built for another checkpoint or other views is refused at start.",
        ),
        Param(
            "familiarity_window_frames",
            0,
            "Observations whose median novelty is judged; 0 = the memory's own window (what its limits were fitted "
            "for).",
            range=(0, 100),
            dynamic=True,
        ),
        Param(
            "lockstep_ack_topic",
            "",
            "Lockstep evaluation only (para-sim eval --lockstep sets it): where to say that a frame gets no chunk "
            "(a refused camera, an unfamiliar scene), so the simulator does not wait for one; empty = off.",
        ),
        Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState input topic.", section="inputs"),
        *(
            Param(f"{view}_{kind}_topic", topic, f"{view} camera {what} topic.")
            for view, (image, info) in VIEW_TOPIC_DEFAULTS.items()
            for kind, topic, what in (("image", image, "image"), ("info", info, "CameraInfo"))
        ),
    ],
    header="""Parameters of para_ros inference_node (`ros2 param describe /inference_node <name>` says the same).
A policy with other view names gets <view>_image_topic / <view>_info_topic parameters for each of its views.""",
)


def view_topic_params(views) -> list[Param]:
    """The image / CameraInfo topic parameters of the views that the table does not hold already."""
    extra = []
    for view in views:
        image, info = VIEW_TOPIC_DEFAULTS.get(view, (f"/{view}_cam/image_raw", f"/{view}_cam/camera_info"))
        for name, topic, what in ((f"{view}_image_topic", image, "image"), (f"{view}_info_topic", info, "CameraInfo")):
            if name not in PARAMETERS.by_name:
                extra.append(Param(name, topic, f"{view} camera {what} topic."))
    return extra


class InferenceNode(Node):
    """See the module docstring. The policy loads in ``__init__``, before any callback can run."""

    def __init__(self, node_name: str = "inference_node", parameter_overrides=None, **kwargs):
        super().__init__(node_name, parameter_overrides=parameter_overrides or [], **kwargs)
        self.params = p = PARAMETERS.declare(self)
        if p["ee_source"] not in ("tf", "joint_states"):
            raise ValueError(
                f"ee_source={p['ee_source']!r}: use 'tf' (the EE frame is in TF) or 'joint_states' "
                "(forward kinematics of /joint_states)"
            )
        self.ee_from_joints = None
        if p["ee_source"] == "joint_states":
            self.ee_from_joints = EeFromJoints(p["yam_config"] or None)
        self.cpu_threads = configure_cpu_threads(p["threads"] or "auto")  # before the policy's first forward
        self.policy = PolicyChoice.from_parameters(p).load(warn=self.get_logger().warning)
        self.views = tuple(self.policy.view_names)
        extra = view_topic_params(self.views)
        p.update(PARAMETERS.declare(self, extra))
        PARAMETERS.on_set(self, self._apply_parameters, extra)

        self.health = HealthReporter(self, f"para: {self.get_name()}", hardware_id=self.policy.model_id)
        cfg = self.policy.config
        self.step_dt_s = cfg.step_dt_s
        self.pipeline = InferencePipeline(
            self.policy,
            ObservationSettings(
                view_names=self.views,
                camera_matrix=p["camera_matrix"],
                gripper_joint=p["gripper_joint"],
                gripper_open_position=float(p["gripper_open_position"]),
                past_n=cfg.mv_past_n,
                step_dt_s=self.step_dt_s,
            ),
            self.health,
            pairing=self._pairing_settings(p),
            info_sources=[p[f"{view}_info_topic"] for view in self.views],
            gripper_source=p["joint_states_topic"],
            ee_from_joints=self.ee_from_joints,
            camera_check=self._camera_check_settings(p),
            familiarity_check=self._familiarity_check_settings(p),
        )
        # Before the TF buffer, so this runs first (an upstream tf2_ros Buffer registers a jump callback of its own,
        # and rcl calls no callback registered after one that raised).
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(seconds=-TIME_JUMP_BACK_MIN_S), on_clock_change=True),
            pre_callback=self._before_time_jump,
            post_callback=self._after_time_jump,
        )
        self.tf_buffer = Buffer(cache_time=Duration(seconds=30.0), node=self)
        self.tf_listener = TransformListener(self.tf_buffer, self)
        self.poses = WorldPoses(
            self._tf_lookup,
            p["world_frame"],
            p["ee_frame"],
            p["tf_timeout_s"],
            ee_from_joints=self.ee_from_joints,
            joint_states_topic=p["joint_states_topic"],
            rejections=lambda: getattr(self.tf_buffer, "rejections_by_child", {}),
        )

        quiet_sub, quiet_pub = subscription_without_default_events(), publisher_without_default_events()
        # Every frame wakes the executor: endpoints without per-wake event polling. CameraInfo and joint states first:
        # rclpy runs the ready callbacks of one wake in creation order, so the image callbacks (which wake the
        # inference thread) come last, and the executor goes back to waiting right after them.
        self.create_subscription(
            JointState, p["joint_states_topic"], self._on_joint_states, qos_profile_sensor_data, **quiet_sub
        )
        for view in self.views:
            self.create_subscription(
                CameraInfo,
                p[f"{view}_info_topic"],
                lambda m, v=view: self._on_info(v, m),
                qos_profile_sensor_data,
                **quiet_sub,
            )
        for view in self.views:
            if p["image_transport"] == "compressed":
                self.create_subscription(
                    CompressedImage,
                    p[f"{view}_image_topic"] + "/compressed",
                    lambda m, v=view: self._on_image(v, m),
                    qos_profile_sensor_data,
                    **quiet_sub,
                )
            else:
                self.create_subscription(
                    Image,
                    p[f"{view}_image_topic"],
                    lambda m, v=view: self._on_image(v, m),
                    qos_profile_sensor_data,
                    **quiet_sub,
                )
        self.chunk_pub = self.create_publisher(ActionChunk, p["chunk_topic"], QoSProfile(depth=10), **quiet_pub)
        self.ack_pub = (  # lockstep: a refused frame is answered with "no chunk" (para_ros.sim.lockstep, rule 4)
            self.create_publisher(Int64MultiArray, p["lockstep_ack_topic"], ACK_QOS, **quiet_pub)
            if p["lockstep_ack_topic"]
            else None
        )
        if self.ack_pub is not None:  # lockstep: each frame's gripper opening is the one of its own instant
            self.pipeline.gripper_wait_s = float(p["tf_timeout_s"])
        self._chunk_msg = ActionChunk()  # refilled for every chunk (inference thread only): no T pose constructors
        self.marker_pub = self.create_publisher(MarkerArray, p["markers_topic"], QoSProfile(depth=10), **quiet_pub)
        self.cloud_pub = self.create_publisher(PointCloud2, p["pointcloud_topic"], QoSProfile(depth=2), **quiet_pub)
        self.overlay_pub = (
            self.create_publisher(Image, p["overlay_topic"], QoSProfile(depth=2), **quiet_pub)
            if p["overlay_topic"]
            else None
        )
        # Inference runs in its own thread, not in an executor callback: the executor (one thread) only moves
        # messages, so images, CameraInfo and TF keep flowing while the model runs, and a TF lookup that waits for
        # data (tf_timeout_s) is served by the executor meanwhile. (A MultiThreadedExecutor whose busy callback
        # group blocks a ready timer spins hot on the GIL and starves both.)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._inference_loop, name="para_inference", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"ready: model {self.policy.model_id} on {self.policy.device} "
            f"({describe_precision(p['dtype'], self.policy.device)[1]}, "
            f"attention {self.policy.attention}, allocator: {self.policy.allocator}, decoding "
            f"{self.policy.decoding.mode}), views {self.views}, world frame '{p['world_frame']}'; "
            f"familiarity check: {self._familiarity_summary(p)}; {self.cpu_threads.describe()}"
        )

    # -------------------------------------------------------------------------------- the pipeline's state
    @property
    def pairer(self):
        """The pipeline's camera pairer."""
        return self.pipeline.pairer

    @property
    def latencies_s(self):
        """The recent camera -> chunk latencies (s)."""
        return self.pipeline.latencies_s

    # ------------------------------------------------------------------------------------------------ set-up
    @staticmethod
    def _pairing_settings(p) -> PairingSettings:
        return PairingSettings(pair_slop_s=p["pair_slop_s"], max_observation_age_s=p["max_observation_age_s"])

    @staticmethod
    def _camera_check_settings(p) -> CameraCheckSettings:
        return CameraCheckSettings(
            enabled=bool(p["camera_check"]),
            min_contrast_levels=float(p["camera_min_contrast_levels"]),
            frozen_after_s=float(p["camera_frozen_after_s"]),
            frozen_tool_motion_m=float(p["camera_frozen_tool_motion_m"]),
        )

    def _familiarity_summary(self, p) -> str:
        """What the familiarity check will do, for the ready line."""
        memory = self.policy.familiarity
        if memory is None:
            return "off (the checkpoint has no familiarity memory; para-train familiarity builds one)"
        if not p["familiarity_check"]:
            return "off (familiarity_check false)"
        limits = ", ".join(f"{v} {memory.limits[v]:.2f}" for v in memory.view_names)
        window = self.pipeline.familiarity_check.window_frames(memory.settings.window_frames)
        return f"on (limits {limits}, window {window} frames)"

    @staticmethod
    def _familiarity_check_settings(p) -> FamiliarityCheckSettings:
        return FamiliarityCheckSettings(
            enabled=bool(p["familiarity_check"]), window_frames=int(p["familiarity_window_frames"])
        )

    def _apply_parameters(self, changes: dict) -> None:
        """On-set callback (after the table's checks): the dynamic parameters take effect from the next frame."""
        self.params = {**self.params, **changes}
        if "pair_slop_s" in changes or "max_observation_age_s" in changes:
            self.pipeline.set_pairing(self._pairing_settings(self.params))  # pairing starts afresh
        if "tf_timeout_s" in changes:
            self.poses.tf_timeout_s = float(changes["tf_timeout_s"])
        if any(name.startswith("camera_") for name in changes):
            self.pipeline.camera_check.settings = self._camera_check_settings(self.params)
        if any(name.startswith("familiarity_") for name in changes):
            self.pipeline.familiarity_check.settings = self._familiarity_check_settings(self.params)
            self.pipeline.familiarity_check.reset()
        self._wake.set()  # the inference loop re-reads max_rate_hz
        self.get_logger().info("parameters changed: " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # --------------------------------------------------------------------------------------------- callbacks
    def _before_time_jump(self) -> None:
        """rclpy pre-jump callback (executor thread, before the new time is set): forget everything on the old clock
        (module docstring). Never raises: an exception here would escape from the /clock subscription's callback."""
        try:
            self.pipeline.clock_jumped_back()
            self.tf_buffer.clear()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f"clearing after a clock jump failed: {type(exc).__name__}: {exc}")

    def _after_time_jump(self, jump) -> None:
        """rclpy post-jump callback: count it and say what happened (diagnostics, log)."""
        try:
            what = time_jump_text(jump, self.get_clock().now().nanoseconds / 1e9)
            self.health.count("time_jumps_back")
            self.health.set_value("last_time_jump", what)
            self.get_logger().warning(
                f"{what}: TF history, camera frames and joint-state history cleared; "
                "observations from before the jump are dropped"
            )
            self.health.publish()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f"reporting a clock jump failed: {type(exc).__name__}: {exc}")

    def _on_info(self, view: str, msg) -> None:
        self.pipeline.add_camera_info(view, msg)

    def _on_joint_states(self, msg) -> None:
        self.pipeline.add_joint_states(stamp_to_ns(msg.header.stamp), msg.name, msg.position)

    def _on_image(self, view: str, msg) -> None:
        if self.pipeline.add_image(view, stamp_to_ns(msg.header.stamp), msg, self.get_clock().now().nanoseconds):
            self._wake.set()

    def _inference_loop(self) -> None:
        """Infer on the newest pair whenever images arrived (at most ``max_rate_hz``); check pairing twice a second
        even without images, so a silent camera is reported."""
        while not self._stop.is_set():
            min_period_s = 1.0 / self.params["max_rate_hz"]
            t0 = time.monotonic()
            self._wake.wait(timeout=0.5)
            self._wake.clear()
            if self._stop.is_set():
                break
            self.try_infer()
            spare = min_period_s - (time.monotonic() - t0)
            if spare > 0:
                self._stop.wait(spare)

    def shutdown(self) -> None:
        """Stop the inference thread (``run_node`` calls this before the node and context go away)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5.0)

    # ------------------------------------------------------------------------------------------ inference
    def try_infer(self) -> None:
        """Infer on the newest unused pair and publish its chunk, or report why there is none. Never raises."""
        try:
            prediction = self.pipeline.step(
                self.get_clock().now().nanoseconds, self.poses.frame_pose, self.poses.ee_pose
            )
            if prediction is not None:
                self._publish(prediction)
            for stamp_ns in self.pipeline.take_refused():
                if self.ack_pub is not None:
                    self.ack_pub.publish(Int64MultiArray(data=no_chunk_ack(stamp_ns)))
        except Exception as exc:  # noqa: BLE001 - an unexpected error (CUDA OOM, a driver bug) must not kill the node
            self.pipeline.internal_error(exc)

    def _build_observation(self, pair, infos):
        """(cameras, state) of ``pair`` (the pipeline's builder with this node's TF look-ups); raises
        ``ObservationProblem``."""
        return self.pipeline.build_observation(pair, infos, self.poses.frame_pose, self.poses.ee_pose)

    def _publish(self, prediction) -> None:
        """The chunk, then its markers, voxels and overlay (they never delay the chunk)."""
        msg = action_chunk_msg(
            prediction.output,
            prediction.stamp_ns,
            self.params["world_frame"],
            self.params["ee_frame"],
            self.policy.model_id,
            into=self._chunk_msg,
        )
        header = msg.header  # one message, refilled per chunk
        if not self.pipeline.is_current(prediction):
            return  # the clock jumped back while the model ran: an old observation
        self.chunk_pub.publish(msg)
        # camera -> chunk ends here: rviz outputs go out after the chunk, so they never delay the executor
        latency_s = (self.get_clock().now().nanoseconds - prediction.stamp_ns) / 1e9
        t_chunk_published = time.perf_counter()
        viz = self.pipeline.visualisation(prediction)
        self.marker_pub.publish(
            chunk_markers(
                header,
                viz.positions_world,
                viz.confidence,
                viz.ee_xyz,
                voxel_size_m=viz.voxel_size_m,
                color_by=self.params["marker_color_by"],
            )
        )
        if self.params["publish_pointcloud"]:
            self.cloud_pub.publish(voxel_cloud(header, viz.top_voxels_world, viz.top_voxels_prob))
        if self.overlay_pub is not None:
            frame_id = self.pipeline.camera_frames.get(self.views[0], "")
            self.overlay_pub.publish(rgb_image(header.stamp, frame_id, self.pipeline.overlay_rgb(prediction)))
        self.pipeline.finish(prediction, latency_s, t_chunk_published)

    def _tf_lookup(self, target: str, source: str, stamp_ns: int, timeout_ns: int) -> np.ndarray:
        """(4, 4) ``T_target_source`` from the TF buffer (the look-up of ``WorldPoses``)."""
        try:
            return self.tf_buffer.lookup_matrix(
                target, source, Time(nanoseconds=stamp_ns), Duration(nanoseconds=timeout_ns)
            )
        except TransformException as exc:
            raise PoseLookupError(f"{type(exc).__name__}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """Run the inference node (``ros2 run para_ros inference_node --ros-args -p checkpoint:=DIR``)."""
    return run_node(
        InferenceNode,
        prog="inference_node",
        description=__doc__.split("\n\n")[0],
        default_params_file="inference.yaml",
        argv=argv,
        epilog=PARAMETERS.help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
