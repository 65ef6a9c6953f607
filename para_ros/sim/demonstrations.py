"""Expert demonstrations in the simulator, ROS-free: drive :class:`YamSim` with the scripted expert and record
``para_core`` episodes (the fast path next to the rosbag recorder of ``para-sim record``).

Timing is that of the sim node: physics advances in ``control_period_s`` steps; the expert's tool pose goes through
the YAM's IK (seeded with the previous solution) to joint servo targets at each step; camera frames are rendered every
``1 / fps`` simulated seconds from the state at that instant and stamped with it, like the sim node's images. Each
recorded frame holds both images, their intrinsics and camera poses, the ``grasp_site`` pose and the measured gripper
opening (0 closed .. 1 open) at that instant: exactly the fields ``para-bag extract`` writes from a bag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_core.data.dataset import Episode
from para_ros.sim.expert import ExpertConfig, plan_pick_place
from para_ros.sim.pick_place import EpisodeMonitor, Layout, PickPlaceConfig, apply_layout, judge
from para_ros.sim.yam_scene import CAMERA_NAMES, GRIPPER_INDEX, N_ARM_JOINTS, YamSim


@dataclass
class DemoResult:
    """One expert run: the outcome and, when recorded, the frames (dict of arrays) for ``para_core`` Episode."""

    layout: Layout
    outcome: str
    place_error_m: float
    duration_s: float
    frames: dict | None
    ik_failures: int


def run_expert(
    sim: YamSim,
    kinematics,
    layout: Layout,
    *,
    record: bool = True,
    fps: float = 10.0,
    image_size: int = 128,
    control_period_s: float = 0.02,
    task: PickPlaceConfig | None = None,
    expert: ExpertConfig | None = None,
    epoch_ns: int = 0,
) -> DemoResult:
    """Reset ``sim`` to the home pose with ``layout``, run the expert to its end and judge the result.

    :param kinematics: a ``para_ros.robot.yam_ik.YamKinematics`` (FK/IK of the same model).
    :param epoch_ns: stamp of simulated time 0 (frame stamps are ``epoch_ns + sim time``).
    """
    task = task or PickPlaceConfig()
    sim.reset()
    apply_layout(sim, layout)
    q = sim.joint_positions()
    start = sim.site_pose()[:3, 3]
    plan = plan_pick_place(start, layout, sim.config.cube_half_size_m, expert)
    monitor = EpisodeMonitor(task)
    frames = {"stamps_ns": [], "T_world_ee": [], "gripper": []}
    for cam in CAMERA_NAMES:
        frames[f"images.{cam}"], frames[f"K.{cam}"], frames[f"T_world_cam.{cam}"] = [], [], []
    frame_period = 1.0 / fps
    next_frame = 0.0
    ik_failures = 0
    n_steps = int(np.ceil(plan.duration_s / control_period_s))
    for _i in range(n_steps + 1):
        t = sim.time_s
        if record and t + 1e-9 >= next_frame:
            frames["stamps_ns"].append(epoch_ns + int(round(t * 1e9)))
            frames["T_world_ee"].append(sim.site_pose())
            frames["gripper"].append(
                float(np.clip(sim.joint_positions()[GRIPPER_INDEX], 0.0, 1.0))
            )  # as para-bag extract
            for cam in CAMERA_NAMES:
                frames[f"images.{cam}"].append(sim.render(cam, image_size, image_size))
                frames[f"K.{cam}"].append(sim.intrinsics(cam, image_size, image_size))
                frames[f"T_world_cam.{cam}"].append(sim.T_world_cam(cam))
            next_frame += frame_period
        T, g = plan.command_at(t + control_period_s)
        res = kinematics.ik(T, q[:N_ARM_JOINTS])
        ik_failures += int(not res.ok)
        q = np.concatenate([res.q_rad, [g]])
        sim.set_joint_targets(q)
        sim.step(control_period_s)
        monitor.update(judge(sim, task))
    if record:
        frames = {k: np.asarray(v) for k, v in frames.items()}
    j = monitor.last
    return DemoResult(layout, monitor.outcome(), j.place_error_m, sim.time_s, frames if record else None, ik_failures)


def frames_to_episode(frames: dict, fps: float, meta: dict):
    """The recorded frames as a ``para_core.data.dataset.Episode``."""

    return Episode(
        view_names=CAMERA_NAMES,
        stamps_ns=frames["stamps_ns"],
        images={c: frames[f"images.{c}"] for c in CAMERA_NAMES},
        K={c: frames[f"K.{c}"] for c in CAMERA_NAMES},
        T_world_cam={c: frames[f"T_world_cam.{c}"] for c in CAMERA_NAMES},
        T_world_ee=frames["T_world_ee"],
        gripper=frames["gripper"],
        fps=fps,
        meta=meta,
    )
