"""``sim_node``: the embedded simulated I2RT YAM rig, publishing exactly what the real rig publishes.

Publishes
  ``<scene_cam_namespace>/image_raw`` + ``/camera_info``, ``<wrist_cam_namespace>/image_raw`` + ``/camera_info``
      ``sensor_msgs/Image`` (rgb8) and ``CameraInfo`` (K/P exactly those of the render in the ROS/OpenCV pixel convention, no distortion);
      ``header.frame_id`` = the camera's OpenCV optical frame; stamp = the time of the state the frame shows.
  ``/tf``         arm chain ``base`` -> ``link1`` .. ``link5`` -> ``gripper``, plus ``grasp_site`` and the wrist
                  camera's optical frame under ``gripper`` (``tf2_msgs/TFMessage``).
  ``/tf_static``  ``base`` -> scene camera optical frame (TRANSIENT_LOCAL), pose from the parameters (or the
                  rendered one, a calibration file's, or none: ``scene_cam_tf``, :mod:`para_ros.sim.told_frames`).
  ``/joint_states`` joint1..joint6 (rad) and ``gripper`` (0 closed .. 1 open).
  ``/clock``      when ``publish_clock`` is true.
Subscribes
  ``/joint_trajectory`` (``trajectory_msgs/JointTrajectory``), followed like a ros2_control joint trajectory
  controller (see :mod:`para_ros.sim.joint_trajectory` for the exact semantics; bad messages are rejected with a
  throttled warning and the arm keeps what it was doing).
  ``~/task_state`` (``std_msgs/String``, JSON) at ``task_state_rate_hz``: the pick-and-place task as the simulator
                  sees it (seed, cube pose, target, :func:`para_ros.sim.pick_place.judge`'s state and place error),
                  for evaluators; a policy never reads it.
Services
  ``~/reset_objects`` (``std_srvs/Trigger``): drop the cubes at fresh random places.
  ``~/reset_task`` (``std_srvs/Trigger``): arm back to ``initial_joint_positions`` at rest, cube and target pad at the
      layout of parameter ``task_seed`` (set it first, e.g. ``ros2 param set /sim_node task_seed 7``), simulated
      time restarts; for ``reset_hold_off_s`` afterwards incoming trajectories are ignored (commands a controller
      sent for the old scene must not drag the arm back). The response message is the layout as JSON.

Time: one steady-clock timer at ``state_rate_hz`` advances physics by the elapsed wall time times
``real_time_factor`` (at most 0.1 s a tick, so a stall never makes it race), then publishes. Stamps: with
``publish_clock`` they are the sim's clock (start wall time + simulated seconds), also published on ``/clock`` (run
consumers with ``use_sim_time``); otherwise the node clock's now at the tick (which honours ``use_sim_time``), i.e.
real time; use ``publish_clock`` with a ``real_time_factor`` other than 1. Everything (physics, rendering, which
creates the EGL context, callbacks) runs on the executor's one thread. With ``lockstep`` the timer no longer steps by
the wall clock: physics advances by ``lockstep_step_s`` once the graph has answered for the current instant
(:mod:`para_ros.sim.lockstep`, :class:`para_ros.nodes.lockstep_hooks.SimLockstep`); with ``lockstep_batch`` (the default) the executor answers the instants
up to the next camera frame or chunk at once (rule 7), and ``/clock`` and ``/joint_states`` go out only at the instant
after each such batch, ``/tf`` of every instant (or of those on ``lockstep_tf_period_s``'s grid) with them.

The world frame of everything published is ``base``: the SDK model puts the arm's base at the MuJoCo origin.
"""

from __future__ import annotations

import array
import json
import os
import time

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import TransformStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from para_core.model.rotations import matrix_to_quaternion
from para_ros.adapters.tf import StaticTransformBroadcaster, TransformBroadcaster
from para_ros.adapters.transforms import matrix_to_transform
from para_ros.nodes.health import ERROR, HealthReporter
from para_ros.nodes.lockstep_hooks import LOCKSTEP_EPOCH_NS, SimLockstep
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.nodes.runtime import run_node
from para_ros.nodes.sim_calibration_params import CALIBRATION_PARAMS, sim_config_fields, told_frames_from_params
from para_ros.nodes.sim_disturbance_params import (
    DISTURBANCE_PARAMS,
    MARKER_PARAMS,
    disturbance_config_from_params,
    marker_mount_from_params,
)
from para_ros.observation.camera_model import camera_info_fields
from para_ros.ros_io.event_handlers import publisher_without_default_events, subscription_without_default_events
from para_ros.sim.disturbances import Disturbances
from para_ros.sim.joint_trajectory import TrajectoryFollower, TrajectoryRejected, plan_trajectory
from para_ros.sim.lockstep import ACK_TOPIC, BATCH_TOPIC, DEFAULT_REASK_S, DEFAULT_TIMEOUT_S, HORIZON_TOPIC
from para_ros.sim.pick_place import apply_layout, check_seed, judge, sample_layout
from para_ros.sim.rig_randomisation import distractors_for_layout, place_distractors
from para_ros.sim.yam_scene import (
    COMMAND_JOINT_NAMES,
    GRASP_SITE,
    GRIPPER_INDEX,
    WRIST_CAM_BODY,
    SimConfig,
    YamSim,
)
from para_ros.stamps import ns_to_fields, stamp_to_ns, stamp_to_s

NODE_NAME = "sim_node"
MAX_TICK_SIM_S = 0.1  # most simulated time one tick may advance (after a stall the sim falls behind, not races)
SUBSTEP_S = 0.005  # servo setpoints are refreshed from the trajectory every this many simulated seconds

LOCKSTEP_PARAMS = [
    Param(
        "lockstep",
        False,
        "Lockstep evaluation (para_ros.sim.lockstep): step physics by lockstep_step_s of "
        "simulated time only once the executor has ticked on the current instant (and its command arrived) and "
        "the chunk predicted from each camera frame is with the executor; stamps and /clock from a fixed epoch "
        "(needs publish_clock; run the graph with use_sim_time). Results then do not depend on the machine's load.",
        section="lockstep evaluation (para_ros/sim/lockstep.py)",
    ),
    Param(
        "lockstep_step_s",
        0.01,
        "Simulated seconds per lockstep step: the executor ticks once per step, so this "
        "is its control period (0.01 s = config/executor.yaml's 100 Hz).",
        range=(1e-4, 0.1),
    ),
    Param(
        "lockstep_timeout_s",
        DEFAULT_TIMEOUT_S,
        "Wall seconds the simulator waits for any one answer (a tick, a "
        "command, a chunk) before it is a fault: the simulator then holds until ~/reset_task and ~/task_state "
        "names what was missing (lockstep_fault).",
        range=(0.1, 3600.0),
    ),
    Param(
        "lockstep_resend_s",
        2.0,
        "While an answer for the first instant after a reset (or the start) is awaited: "
        "after this many wall seconds, then twice as long each time, /clock hops forward and back (every node "
        "clears as after a reset) and that instant's state and frames go out again, for a node that was not up "
        "yet or saw them before the reset; the episode's physics has not started.",
        range=(0.05, 600.0),
    ),
    Param(
        "lockstep_reask_s",
        DEFAULT_REASK_S,
        "Wall seconds after which the camera frames whose chunk has not come, or the horizon whose batch has not "
        "come, are published again (the same images, stamps and horizon; then twice as long each time, up to 60 s): "
        "a message lost by a busy or briefly stopped process is asked for again instead of ending the episode as a "
        "fault.",
        range=(0.05, 60.0),
    ),
    Param(
        "lockstep_chunk_latency_s",
        0.0,
        "Simulated seconds after a camera frame by which its chunk must be with the executor: the simulator steps on "
        "meanwhile (capped at the camera period), so the model and the physics share the cores; 0 holds at the "
        "frame. Set it to the executor's lockstep_latency_s (para-sim eval and para-deploy --lockstep do), never "
        "above: the chunk would come after the tick it acts at.",
        range=(0.0, 10.0),
    ),
    Param(
        "lockstep_hop_hold_s",
        0.3,
        "Wall seconds /clock stays at its forward hop (a reset right after the start or early in an episode, a "
        "resend) before it goes back: nodes keep only the newest /clock message, so a busy node needs the hop to last "
        "to see the jump back; a resend's hold doubles with its interval.",
        range=(0.0, 60.0),
    ),
    Param(
        "lockstep_run_until_s",
        1e9,
        "Lockstep: do not step beyond this simulated time (s since the last reset; "
        "an evaluator holds the simulator here while it hands the arm over, nothing times out meanwhile).",
        range=(0.0, 1e9),
        dynamic=True,
    ),
    Param(
        "lockstep_ack_topic",
        ACK_TOPIC,
        "The executor's acknowledgements (std_msgs/Int64MultiArray, para_ros.sim.lockstep).",
    ),
    Param(
        "lockstep_batch",
        True,
        "Lockstep in batches (para_ros.sim.lockstep rule 7): with each state a horizon goes out, the executor ticks "
        "every instant up to it (the next camera frame, the next chunk it does not hold yet, lockstep_run_until_s) "
        "and sends those ticks' commands in one message; /clock and /joint_states go out only at the instants after "
        "a batch, /tf of every instant with them. The same outcome as false (one round trip per step), in a "
        "fraction of the wall time. false also for an inference node with ee_source: joint_states.",
    ),
    Param(
        "lockstep_tf_period_s",
        0.0,
        "Lockstep batches: /tf of the instants inside a batch only every this many simulated seconds (a whole number "
        "of lockstep_step_s; the instants whose state goes out, every camera frame among them, always carry it); 0: "
        "every instant. para-sim eval and para-deploy --lockstep set it to the coarsest grid holding every camera "
        "frame and every one of the policy's steps (para_ros.sim.lockstep.tf_grid_steps), the only instants the graph "
        "looks up: the rest is neither built, sent nor parsed. Set 0 for a bag of every instant.",
        range=(0.0, 10.0),
    ),
    Param(
        "lockstep_horizon_topic",
        HORIZON_TOPIC,
        "Lockstep batches: the horizons to the executor (std_msgs/Int64MultiArray [t_ns, until_ns]).",
    ),
    Param(
        "lockstep_batch_topic",
        BATCH_TOPIC,
        "Lockstep batches: the executor's commands of a batch (trajectory_msgs/JointTrajectory, one point a tick).",
    ),
]

PARAMETERS = ParameterTable(
    NODE_NAME,
    [
        Param(
            "base_frame_id",
            "base",
            "World frame of everything published (the arm's base, z up, table top at z = 0).",
            section="frames",
        ),
        Param(
            "scene_cam_frame_id",
            "scene_cam_optical_frame",
            "Scene camera OpenCV optical frame id (x right, y down, z forward).",
        ),
        Param(
            "wrist_cam_frame_id",
            "wrist_cam_optical_frame",
            "Wrist camera optical frame id (under gripper on /tf, at the D405 mount).",
        ),
        Param("grasp_site_frame_id", "grasp_site", "Tool-centre frame id between the finger tips (under gripper)."),
        Param("image_width", 256, "Rendered image width, pixels (both cameras).", range=(1, 4096), section="cameras"),
        Param("image_height", 256, "Rendered image height, pixels (both cameras).", range=(1, 4096)),
        Param("scene_cam_rate_hz", 10.0, "Scene camera frame rate in sim time (Hz).", range=(0.01, 1000.0)),
        Param("wrist_cam_rate_hz", 10.0, "Wrist camera frame rate in sim time (Hz).", range=(0.01, 1000.0)),
        Param("scene_cam_fovy_deg", 38.0, "Scene camera vertical field of view (degrees).", range=(1.0, 179.0)),
        Param("wrist_cam_fovy_deg", 58.0, "Wrist camera vertical field of view (degrees).", range=(1.0, 179.0)),
        Param(
            "scene_cam_position_m",
            [0.33, -0.5, 0.6],
            "Scene camera centre in base (m): beside the workspace, looking across the table.",
            length=3,
        ),
        Param("scene_cam_look_at_m", [0.33, 0.0, 0.03], "Point in base the scene camera looks at (m).", length=3),
        Param("scene_cam_up_hint", [0.0, 0.0, 1.0], "Base direction shown upwards in the scene image.", length=3),
        Param(
            "scene_cam_T_world_cam",
            None,
            "Optional scene camera pose: 16 numbers, row-major 4x4 OpenCV-optical "
            "T_world_cam in base; when set it wins over position + look-at.",
            optional=True,
            length=16,
            kind_override="float_list",
        ),
        Param(
            "scene_cam_namespace",
            "/scene_cam",
            "Scene camera topics: <ns>/image_raw and <ns>/camera_info.",
            section="topics",
        ),
        Param("wrist_cam_namespace", "/wrist_cam", "Wrist camera topics: <ns>/image_raw and <ns>/camera_info."),
        Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState output topic."),
        Param("joint_trajectory_topic", "/joint_trajectory", "trajectory_msgs/JointTrajectory command topic."),
        Param(
            "state_rate_hz",
            50.0,
            "Physics tick rate (Hz); /joint_states, /tf (and /clock) go out every tick.",
            range=(1.0, 1000.0),
            section="simulation",
        ),
        Param("real_time_factor", 1.0, "Simulated seconds per wall-clock second.", range=(0.01, 100.0)),
        Param(
            "publish_clock",
            False,
            "Publish /clock (rosgraph_msgs/Clock) from the sim and stamp everything with the "
            "sim clock (run the consumers with use_sim_time).",
        ),
        Param("timestep_s", 0.002, "MuJoCo physics timestep (s).", range=(1e-5, 0.1)),
        Param("n_cubes", 1, "Free cubes on the table (cube_0 is the pick-and-place task's cube).", range=(0, 16)),
        Param("seed", 0, "Seed of the initial object layout; ~/reset_objects draws fresh ones.", range=(0, 2**31 - 1)),
        Param(
            "initial_joint_positions",
            [0.0, 1.7, 1.55, -1.4, 0.0, 0.0, 1.0],
            "Start pose: joint1..joint6 (rad), gripper (0 closed .. 1 open).",
            length=7,
        ),
        Param(
            "task_seed",
            0,
            "Layout that ~/reset_task applies (set it, then call the service).",
            range=(0, 2**31 - 1),
            dynamic=True,
            section="pick-and-place task (para_ros/sim/pick_place.py)",
        ),
        Param(
            "task_state_rate_hz",
            10.0,
            "Rate of ~/task_state (std_msgs/String, JSON) for evaluators (Hz; 0 = off).",
            range=(0.0, 1000.0),
        ),
        Param(
            "reset_hold_off_s",
            0.5,
            "After ~/reset_task, incoming trajectories are ignored this long (s).",
            range=(0.0, 60.0),
            dynamic=True,
        ),
        Param(
            "cube_rgba",
            [0.85, 0.15, 0.15, 1.0],
            "Colour of the task's cube (r, g, b, a in 0..1).",
            range=(0.0, 1.0),
            length=4,
        ),
        Param("light_scale", 1.0, "Scale of the lamps' diffuse light (1 = the training scene).", range=(0.0, 10.0)),
        Param(
            "target_rgba",
            [0.1, 0.7, 0.25, 1.0],
            "Colour of the target pad (r, g, b, a in 0..1).",
            range=(0.0, 1.0),
            length=4,
        ),
        Param(
            "n_distractors",
            0,
            "Visual-only distractor objects on the table, placed anew from each task layout's seed (0 = none).",
            range=(0, 8),
        ),
        *CALIBRATION_PARAMS,
        *MARKER_PARAMS,
        *DISTURBANCE_PARAMS,
        *LOCKSTEP_PARAMS,
    ],
    header="""sim_node: the embedded simulated I2RT YAM (MuJoCo) with a scene and a wrist camera. It publishes what the
real rig publishes (images + CameraInfo, /tf, /tf_static, /joint_states) and follows trajectory_msgs/JointTrajectory
like a ros2_control joint trajectory controller. Units: metres, radians, seconds, Hz.""",
)


def to_time_msg(ns: int) -> TimeMsg:
    sec, nanosec = ns_to_fields(ns)
    return TimeMsg(sec=sec, nanosec=nanosec)


class SimNode(Node):
    """The simulated rig as a ROS node (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.params = p = PARAMETERS.declare(self)
        T = p["scene_cam_T_world_cam"]
        config = SimConfig(
            scene_cam_pos_m=p["scene_cam_position_m"],
            scene_cam_look_at_m=p["scene_cam_look_at_m"],
            scene_cam_up_hint=p["scene_cam_up_hint"],
            scene_T_world_cam=None if T is None or len(T) == 0 else np.asarray(T, dtype=np.float64),
            scene_cam_fovy_deg=p["scene_cam_fovy_deg"],
            wrist_cam_fovy_deg=p["wrist_cam_fovy_deg"],
            n_cubes=p["n_cubes"],
            timestep_s=p["timestep_s"],
            home_q7=p["initial_joint_positions"],
            seed=p["seed"],
            cube_rgba=p["cube_rgba"],
            target_rgba=p["target_rgba"],
            n_distractor_slots=p["n_distractors"],
            light_scale=p["light_scale"],
            max_render_size=max(1024, p["image_width"], p["image_height"]),
            **sim_config_fields(p),
            scene_extras=self._scene_extras(p),
        )
        self.told = told_frames_from_params(p, config)  # camera poses published (rendered ones may differ)
        self.sim = YamSim(config)  # cube 0 and the target pad start in the task layout of `seed`
        # Run-time OOD conditions (off by default): the scene camera knocked from where it is rendered.
        self.disturbances = Disturbances(self._disturbance_config, config.scene_cam_true_T_world_cam())
        self.disturbances.reset(self.sim)
        self.width, self.height = p["image_width"], p["image_height"]
        self.follower = TrajectoryFollower(self.sim.joint_targets())
        self._seed_rng = np.random.default_rng(p["seed"] + 1)
        self.frame_of_link = {
            WRIST_CAM_BODY: p["wrist_cam_frame_id"],
            GRASP_SITE: p["grasp_site_frame_id"],
            "base": p["base_frame_id"],
        }

        # In lockstep the node wakes for every answer of the graph (several per camera frame), and rclpy polls every
        # QoS event handler of the node at each wake: its own endpoints go without the default ones there
        # (para_ros.ros_io.event_handlers says why nothing is lost). In real time they keep them.
        quiet_pub = publisher_without_default_events() if p["lockstep"] else {}
        quiet_sub = subscription_without_default_events() if p["lockstep"] else {}
        # Publishers. Cameras publish RELIABLE (depth 5): that matches both reliable and best-effort
        # (sensor-data) subscribers, like a camera driver's default, while a best-effort publisher would not.
        camera_qos = QoSProfile(depth=5)
        self.cameras = {}
        for cam, ns_key, rate_key, frame_key in (
            ("scene", "scene_cam_namespace", "scene_cam_rate_hz", "scene_cam_frame_id"),
            ("wrist", "wrist_cam_namespace", "wrist_cam_rate_hz", "wrist_cam_frame_id"),
        ):
            ns = p[ns_key].rstrip("/")
            self.cameras[cam] = {
                "image_pub": self.create_publisher(Image, f"{ns}/image_raw", camera_qos, **quiet_pub),
                "info_pub": self.create_publisher(CameraInfo, f"{ns}/camera_info", camera_qos, **quiet_pub),
                "period_s": 1.0 / p[rate_key],
                "next_due_s": 0.0,
                "frame_id": p[frame_key],
                "info": self._camera_info(cam, p[frame_key]),
            }
        self.joint_state_pub = self.create_publisher(
            JointState, p["joint_states_topic"], QoSProfile(depth=10), **quiet_pub
        )
        self.tf_broadcaster = TransformBroadcaster(self)
        self.static_broadcaster = StaticTransformBroadcaster(self)
        self.clock_pub = (
            self.create_publisher(ClockMsg, "/clock", QoSProfile(depth=10), **quiet_pub) if p["publish_clock"] else None
        )
        self.lockstep = None
        if p["lockstep"]:
            if not p["publish_clock"]:
                raise ValueError("sim_node lockstep:=true needs publish_clock:=true (the graph runs on /clock)")
            self.lockstep = SimLockstep(self, p)
        on_trajectory = (
            self._on_trajectory if self.lockstep is None else self.lockstep.wrap_command(self._on_trajectory)
        )
        self.create_subscription(
            JointTrajectory, p["joint_trajectory_topic"], on_trajectory, QoSProfile(depth=10), **quiet_sub
        )
        self.create_service(Trigger, "~/reset_objects", self._on_reset_objects)
        self.create_service(Trigger, "~/reset_task", self._on_reset_task)
        self.task_state_pub = self.create_publisher(String, "~/task_state", QoSProfile(depth=10), **quiet_pub)
        self._task_seed: int | None = None
        self._hold_off_until_s = -1.0
        self._task_state_period_s = 1.0 / p["task_state_rate_hz"] if p["task_state_rate_hz"] > 0 else None
        self._next_task_state_s = 0.0

        self.health = HealthReporter(self, f"{NODE_NAME}: {self.get_name()}", hardware_id="mujoco yam")
        PARAMETERS.on_set(self, self._apply_parameters)
        self._epoch_ns = Clock(clock_type=ClockType.SYSTEM_TIME).now().nanoseconds
        if self.lockstep is not None:
            self._epoch_ns = LOCKSTEP_EPOCH_NS
        self._sim_goal_s = self.sim.time_s
        self._last_wall = time.monotonic()
        self._publish_static()
        self._timer = self.create_timer(
            1.0 / p["state_rate_hz"], self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        self.get_logger().info(
            f"simulated YAM up: cameras {self.width}x{self.height} at {p['scene_cam_rate_hz']}/"
            f"{p['wrist_cam_rate_hz']} Hz, physics tick {p['state_rate_hz']} Hz, real_time_factor "
            f"{p['real_time_factor']}, publish_clock {p['publish_clock']}"
        )

    def _scene_extras(self, p: dict) -> tuple:
        """What the model needs beyond the training scene: the OOD occluder and the calibration marker, each only
        when configured (:mod:`para_ros.nodes.sim_disturbance_params`)."""
        self._disturbance_config = disturbance_config_from_params(p)
        marker = marker_mount_from_params(p)
        return self._disturbance_config.scene_extras() + (() if marker is None else (marker,))

    # ---- parameters -------------------------------------------------------------------------------------
    def _apply_parameters(self, changes: dict) -> None:
        """On-set callback (after the table's checks): task_seed and reset_hold_off_s apply at the next reset."""
        self.params = {**self.params, **changes}
        self.get_logger().info("parameters changed: " + ", ".join(f"{k}={v!r}" for k, v in changes.items()))

    # ---- time -------------------------------------------------------------------------------------------
    def now_ns(self) -> int:
        """Current time in the stamps' time base (sim clock with publish_clock, else the node clock)."""
        if self.clock_pub is not None:
            return self._epoch_ns + int(round(self.sim.time_s * 1e9))
        return self.get_clock().now().nanoseconds

    # ---- periodic work ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        try:
            self._tick_inner()
        except Exception as exc:  # noqa: BLE001 - never let one bad tick kill the node
            self.health.count("tick_errors")
            self.health.problem("tick", f"sim tick failed: {type(exc).__name__}: {exc}", level=ERROR)
        else:
            self.health.clear("tick")

    def _tick_inner(self) -> None:
        if self.lockstep is not None:
            self.lockstep.poll()
            return
        wall = time.monotonic()
        dt_wall, self._last_wall = wall - self._last_wall, wall
        self._sim_goal_s += min(dt_wall * self.params["real_time_factor"], MAX_TICK_SIM_S)
        self.step_and_publish(wall)

    def step_and_publish(self, wall: float, frames: bool = True, tf_before: list | None = None) -> list[int]:
        """Step physics up to the goal time, publish the state (and, with ``frames``, the frames due); the frames'
        stamps (ns). ``tf_before``: transforms of earlier instants to send in the same ``/tf`` message."""
        tick_now_ns = None if self.clock_pub is not None else self.get_clock().now().nanoseconds
        self._advance(tick_now_ns)
        stamp_ns = self._stamp_for(self.sim.time_s, tick_now_ns)
        stamp = to_time_msg(stamp_ns)
        if self.clock_pub is not None:
            self.clock_pub.publish(ClockMsg(clock=stamp))
        self._publish_state(stamp, tf_before)
        self._publish_task_state_if_due(stamp_ns)
        return self.publish_due_frames(stamp_ns, wall, tick_now_ns) if frames else []

    def _advance(self, tick_now_ns: int | None) -> None:
        """Step physics up to the goal time, the servo setpoints refreshed from the trajectory every substep."""
        ts = self.sim.model.opt.timestep
        while self.sim.time_s + 0.5 * ts < self._sim_goal_s:
            chunk = min(SUBSTEP_S, self._sim_goal_s - self.sim.time_s)
            t_ns = self._stamp_for(self.sim.time_s, tick_now_ns)
            self.sim.set_joint_targets(self.follower.setpoint_at(t_ns))
            if self.sim.step(chunk) == 0:
                break

    def _publish_task_state_if_due(self, stamp_ns: int) -> None:
        if self._task_state_period_s is not None and self.sim.time_s + 1e-9 >= self._next_task_state_s:
            self._publish_task_state(stamp_ns)
            self._next_task_state_s = max(self._next_task_state_s + self._task_state_period_s, self.sim.time_s)

    def frames_due_now(self) -> list[str]:
        """The cameras whose frame is due at the current instant (:meth:`publish_due_frames` publishes them)."""
        return [cam for cam, c in self.cameras.items() if self.sim.time_s + 1e-9 >= c["next_due_s"]]

    def step_into_batch(self, command, step_s: float, tf_period_steps: int = 1) -> list[TransformStamped]:
        """Lockstep rule 7 (:mod:`para_ros.sim.lockstep`): one step to an instant inside a batch, whose state is not
        published: follow that instant's tick's command (a one-point ``JointTrajectory``, or None: the tick sent
        nothing) exactly as if it had arrived then, publish the task state when due; the instant's ``/tf``, to go out
        with the next published state, when the instant lies on the ``/tf`` grid (every ``tf_period_steps`` steps;
        else nothing). RuntimeError when a camera frame or ``lockstep_run_until_s`` falls at that instant (the
        horizon ends before either: :class:`para_ros.nodes.lockstep_hooks.SimLockstep`)."""
        self._sim_goal_s += step_s
        self._advance(None)
        stamp_ns = self._stamp_for(self.sim.time_s, None)
        if self.frames_due_now() or self.sim.time_s + 0.5 * step_s > self.params["lockstep_run_until_s"]:
            raise RuntimeError(
                f"lockstep batch: a camera frame or lockstep_run_until_s falls at t={self.sim.time_s:.3f} s, "
                "inside the batch"
            )
        on_grid = tf_period_steps <= 1 or round(self.sim.time_s / step_s) % tf_period_steps == 0
        tf = self._link_transform_msgs(to_time_msg(stamp_ns)) if on_grid else []
        self._publish_task_state_if_due(stamp_ns)
        if command is not None:
            self._on_trajectory(command)
        return tf

    def publish_due_frames(self, stamp_ns: int, wall: float, tick_now_ns: int | None = None) -> list[int]:
        """Render and publish the camera frames due at the current instant (stamped ``stamp_ns``); their stamps."""
        frames_ns = []
        stamp = to_time_msg(stamp_ns)
        for cam, c in self.cameras.items():
            if self.sim.time_s + 1e-9 >= c["next_due_s"]:
                self._publish_camera(cam, c, stamp)
                frames_ns.append(stamp_ns)
                self._report_publish_delay(cam, stamp_ns, tick_now_ns, wall)
                c["next_due_s"] += c["period_s"]
                if c["next_due_s"] < self.sim.time_s:  # fell behind: skip, do not burst
                    c["next_due_s"] = self.sim.time_s + c["period_s"]
        return frames_ns

    def _report_publish_delay(self, cam: str, stamp_ns: int, tick_now_ns: int | None, tick_wall_s: float) -> None:
        """How long after its stamp (the simulated exposure) an image left this node: ``publish_delay_median_ms.<cam>``
        on /diagnostics, the simulator's own share of the inference node's ``receive`` stage (stepping, rendering,
        serialising; a real driver's share is its readout and transfer). On the node clock it is now minus the stamp;
        with ``publish_clock`` (stamps in sim time) it is the wall time since the tick began (stepping + rendering)."""
        if tick_now_ns is not None:
            delay_ms = (self.get_clock().now().nanoseconds - stamp_ns) / 1e6
        else:
            delay_ms = (time.monotonic() - tick_wall_s) * 1e3
        self.health.add_sample(f"publish_delay_median_ms.{cam}", delay_ms)

    def _stamp_for(self, sim_time_s: float, tick_now_ns: int | None) -> int:
        """Stamp of the state at ``sim_time_s``: the sim clock, or the tick's now minus what is still to run."""
        if tick_now_ns is None:
            return self._epoch_ns + int(round(sim_time_s * 1e9))
        return tick_now_ns - int(round((self._sim_goal_s - sim_time_s) * 1e9))

    # ---- publishing -------------------------------------------------------------------------------------
    def _camera_info(self, cam: str, frame_id: str) -> CameraInfo:
        K = self.sim.intrinsics(cam, self.width, self.height)  # (3, 3), para_core pixel-centre convention
        info = CameraInfo(**camera_info_fields(K))  # ROS/OpenCV convention: cx, cy 0.5 px lower
        info.header.frame_id = frame_id
        info.width, info.height = self.width, self.height
        return info

    def _publish_camera(self, cam: str, c: dict, stamp) -> None:
        self.disturbances.update(self.sim)
        rgb = self.sim.render(cam, self.width, self.height)  # (H, W, 3) uint8
        rgb = self.disturbances.filter_image(cam, rgb, self.sim.time_s)  # covered / frozen
        img = Image()
        img.header.stamp = stamp
        img.header.frame_id = c["frame_id"]
        img.height, img.width = rgb.shape[:2]
        img.encoding = "rgb8"
        img.is_bigendian = 0
        img.step = 3 * rgb.shape[1]
        img.data = array.array("B", rgb.tobytes())
        info = c["info"]
        info.header.stamp = stamp
        c["image_pub"].publish(img)
        c["info_pub"].publish(info)
        c["last_image"] = img  # for a lockstep ask again (republish_frames)

    def republish_frames(self, stamps_ns) -> None:
        """Publish again each camera's last frame whose stamp is in ``stamps_ns`` (the same image and stamp; lockstep
        asks again for a frame whose chunk has not come, para_ros.sim.lockstep rule 5)."""
        wanted = {int(t) for t in stamps_ns}
        for c in self.cameras.values():
            img = c.get("last_image")
            if img is not None and stamp_to_ns(img.header.stamp) in wanted:
                c["info"].header.stamp = img.header.stamp
                c["image_pub"].publish(img)
                c["info_pub"].publish(c["info"])

    def _transform(self, parent: str, child: str, T: np.ndarray, stamp) -> TransformStamped:
        msg = TransformStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_of_link.get(parent, parent)
        msg.child_frame_id = self.frame_of_link.get(child, child)
        msg.transform = matrix_to_transform(T)
        return msg

    def _publish_state(self, stamp, tf_before: list | None = None) -> None:
        js = JointState()
        js.header.stamp = stamp
        js.name = list(COMMAND_JOINT_NAMES)
        js.position = [float(v) for v in self.sim.joint_positions()]
        js.velocity = [float(v) for v in self.sim.joint_velocities()]
        self.joint_state_pub.publish(js)
        self.tf_broadcaster.sendTransform(list(tf_before or []) + self._link_transform_msgs(stamp))

    def _link_transform_msgs(self, stamp) -> list[TransformStamped]:
        """The arm's moving frames at the current state, stamped ``stamp``: what :meth:`_transform` gives, without
        its rigidity check (the simulator's poses are rigid by construction; the check was a third of the cost of
        publishing the state, which lockstep's batches do for every instant)."""
        out = []
        frame_of_link = self.frame_of_link
        for parent, child, T in self.sim.link_transforms():
            if child == WRIST_CAM_BODY:
                T = self.told.T_gripper_wrist_cam
            msg = TransformStamped()
            header = msg.header
            header.stamp = stamp
            header.frame_id = frame_of_link.get(parent, parent)
            msg.child_frame_id = frame_of_link.get(child, child)
            transform = msg.transform
            t, r = transform.translation, transform.rotation
            t.x, t.y, t.z = T[:3, 3].tolist()  # Python floats, as float(v) of each
            r.x, r.y, r.z, r.w = matrix_to_quaternion(T[:3, :3]).tolist()
            out.append(msg)
        return out

    def _publish_static(self) -> None:
        if self.told.T_base_scene_cam is None:
            return  # scene_cam_tf: none
        stamp = to_time_msg(self.now_ns())
        self.static_broadcaster.sendTransform(
            self._transform("base", self.params["scene_cam_frame_id"], self.told.T_base_scene_cam, stamp)
        )

    # ---- commands ---------------------------------------------------------------------------------------
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if self.sim.time_s < self._hold_off_until_s:
            return  # just reset: commands sent for the previous scene are not followed
        now_ns = self.now_ns()
        start_ns = stamp_to_ns(msg.header.stamp)
        try:
            plan, warnings = plan_trajectory(
                list(msg.joint_names),
                [stamp_to_s(p.time_from_start) for p in msg.points],
                [list(p.positions) for p in msg.points],
                command_joint_names=COMMAND_JOINT_NAMES,
                q_lower=self.sim.q_lower,
                q_upper=self.sim.q_upper,
                setpoint_now=self.follower.setpoint_at(now_ns),
                now_ns=now_ns,
                start_ns=start_ns,
            )
        except TrajectoryRejected as exc:
            self.health.count("trajectories_rejected")
            self.health.problem("trajectory", f"rejected JointTrajectory: {exc}")
            return
        for text in warnings:
            self.get_logger().warning(f"JointTrajectory: {text}", throttle_duration_sec=1.0)
        self.follower.replace(plan, now_ns)
        self.health.count("trajectories_followed")
        self.health.clear("trajectory")  # a trajectory was followed: the rejection is over

    def _on_reset_objects(self, request, response):
        seed = int(self._seed_rng.integers(0, 2**31 - 1))
        positions = self.sim.reset_objects(seed)
        response.success = True
        response.message = f"objects reset (seed {seed}): " + "; ".join(
            f"({x:.3f}, {y:.3f}, {z:.3f})" for x, y, z in positions
        )
        return response

    def _on_reset_task(self, request, response):
        try:
            seed = check_seed(self.params["task_seed"])
        except ValueError as exc:
            response.success = False
            response.message = str(exc)
            return response
        layout = sample_layout(seed)
        self.sim.reset()
        apply_layout(self.sim, layout)
        if self.params["n_distractors"]:
            place_distractors(self.sim, distractors_for_layout(layout, self.params["n_distractors"]))
        self.disturbances.reset(self.sim)
        self.follower = TrajectoryFollower(self.sim.joint_targets())
        self._sim_goal_s = self.sim.time_s
        self._last_wall = time.monotonic()
        self._hold_off_until_s = self.sim.time_s + self.params["reset_hold_off_s"]
        self._next_task_state_s = 0.0
        for c in self.cameras.values():
            c["next_due_s"] = 0.0
        self._task_seed = seed
        if self.lockstep is not None:
            self.lockstep.reset()
        self.health.count("task_resets")
        self.health.set_value("task_seed", seed)
        response.success = True
        response.message = json.dumps(layout.to_dict())
        self.get_logger().info(f"task reset: {response.message}")
        return response

    def _publish_task_state(self, stamp_ns: int) -> None:
        if not self.sim.has_target_pad() or self.sim.config.n_cubes < 1:
            return
        j = judge(self.sim)
        T = self.sim.cube_pose(0)
        state = {
            "stamp_ns": int(stamp_ns),
            "sim_time_s": self.sim.time_s,
            "seed": self._task_seed,
            "cube_xyz_m": T[:3, 3].tolist(),
            "target_xyz_m": self.sim.target_position().tolist(),
            "state": j.state,
            "success": j.success,
            "held": j.held,
            "place_error_m": j.place_error_m,
            "cube_height_m": j.cube_height_m,
            "tool_xyz_m": self.sim.site_pose()[:3, 3].tolist(),
            "gripper": float(self.sim.joint_positions()[GRIPPER_INDEX]),
        }
        if self.lockstep is not None:
            state.update(self.lockstep.task_state_fields())
        self.task_state_pub.publish(String(data=json.dumps(state)))

    def destroy_node(self):
        self.sim.close()
        return super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    """Run the node until Ctrl-C / SIGINT / SIGTERM."""

    os.environ.setdefault("MUJOCO_GL", "egl")

    return run_node(
        SimNode,
        prog="sim_node",
        description="Simulated I2RT YAM (MuJoCo) with a scene and a wrist camera, on ROS 2.",
        default_params_file="sim.yaml",
        argv=argv,
        epilog=PARAMETERS.help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
