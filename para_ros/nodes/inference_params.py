"""The inference node's parameter table (docs/parameters.md, ``config/inference.yaml``): the policy, frames and state,
observations, outputs, the camera and familiarity checks, inputs; and the topic parameters of a policy's other views.

Kept out of ``inference_node`` (as generate_parameter_library keeps a ROS 2 node's parameters in their own file) so the
node only declares the table and applies its changes; the parameter registry and the tests read it without starting a
node.
"""

from __future__ import annotations

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES, PRESET_NAMES
from para_core.model.decoding import AUTO_DECODING, DECODING_CHOICES, DecodingConfig
from para_ros.execution.chunk import ChunkChecks
from para_ros.nodes.parameters import Param, ParameterTable

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
            AUTO_DECODING,
            "How the chunk's voxels are chosen: auto (fused for a model that predicts a voxel distribution, argmax "
            "for one that does not: the regression baseline) | argmax (each step's most probable voxel, the "
            "reference) | joint (the best path through each step's decoding_top_k most probable voxels within "
            "decoding_max_speed_m_s) | fused (joint over the product with the earlier chunks' distributions at the same "
            "times, weighted exp(-age / fusion_tau_s)).",
            choices=DECODING_CHOICES,
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
            0.01,
            "How far the tool must have moved since a camera's image last changed for the camera to count as frozen "
            "(a camera that watches the arm shows a new image once the tool has moved a centimetre).",
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
