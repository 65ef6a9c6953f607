"""A scripted pick-and-place expert for the simulated YAM. ROS-free.

The plan (:func:`plan_pick_place`) is a list of minimum-jerk segments of the tool (``grasp_site``) pose and the
gripper opening, top-down throughout (``R_TOP_DOWN``: tool x = -world x, y = world y, z = -world z, the YAM's
reachable top-down pose): from the start pose to above the cube, down to the grasp height, close, lift, above the
target, down to the place height, open, retreat, hold. Segment durations follow the distance at ``speed_m_s``
(never below ``min_segment_s``). :meth:`ExpertPlan.command_at` gives the pose and gripper at any time; the caller
turns poses into joints with the YAM's IK (seeded with the previous solution).

Measured on the project's scene (finger collision boxes): see ``test/test_sim_pick_place.py`` and the README's
pick-and-place section for the success rate over seeded layouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from para_ros.sim.pick_place import Layout

R_TOP_DOWN = np.diag([-1.0, 1.0, -1.0])


@dataclass
class ExpertConfig:
    """Heights (metres, of ``grasp_site`` above the table top), speeds and pauses of the scripted expert."""

    approach_height_m: float = 0.12
    grasp_height_m: float = 0.018
    place_height_m: float = 0.024
    speed_m_s: float = 0.2
    descend_speed_m_s: float = 0.12
    min_segment_s: float = 0.4
    close_s: float = 0.6
    open_s: float = 0.5
    settle_s: float = 0.3
    hold_end_s: float = 0.8
    gripper_open: float = 1.0
    gripper_closed: float = 0.0


@dataclass
class Segment:
    """Minimum-jerk move from ``start`` to ``end`` (positions (3,), metres; gripper 0..1) over ``duration_s``."""

    name: str
    start_xyz: np.ndarray
    end_xyz: np.ndarray
    start_gripper: float
    end_gripper: float
    duration_s: float


def min_jerk(s: float) -> float:
    """Minimum-jerk profile 10 s^3 - 15 s^4 + 6 s^5 on [0, 1] (zero velocity and acceleration at both ends)."""
    s = min(1.0, max(0.0, s))
    return s * s * s * (10.0 + s * (-15.0 + 6.0 * s))


@dataclass
class ExpertPlan:
    segments: list[Segment] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return float(sum(s.duration_s for s in self.segments))

    def phase_at(self, t_s: float) -> str:
        for seg in self.segments:
            if t_s < seg.duration_s:
                return seg.name
            t_s -= seg.duration_s
        return self.segments[-1].name

    def command_at(self, t_s: float) -> tuple[np.ndarray, float]:
        """(T_world_tool (4, 4), gripper 0..1) at ``t_s`` seconds after the plan's start (held after its end)."""
        seg = self.segments[-1]
        s = 1.0
        for candidate in self.segments:
            if t_s < candidate.duration_s:
                seg, s = candidate, t_s / candidate.duration_s
                break
            t_s -= candidate.duration_s
        a = min_jerk(s)
        T = np.eye(4)
        T[:3, :3] = R_TOP_DOWN
        T[:3, 3] = seg.start_xyz + a * (seg.end_xyz - seg.start_xyz)
        return T, float(seg.start_gripper + a * (seg.end_gripper - seg.start_gripper))


def plan_pick_place(
    start_xyz, layout: Layout, cube_half_size_m: float, config: ExpertConfig | None = None
) -> ExpertPlan:
    """The expert's plan from tool position ``start_xyz`` (3,) for ``layout``."""
    c = config or ExpertConfig()
    start = np.asarray(start_xyz, dtype=np.float64)
    cube = np.array([layout.cube_xy_m[0], layout.cube_xy_m[1], 0.0])
    target = np.array([layout.target_xy_m[0], layout.target_xy_m[1], 0.0])
    up = np.array([0.0, 0.0, c.approach_height_m])
    above_cube, above_target = cube + up, target + up
    grasp = cube + [0.0, 0.0, c.grasp_height_m]
    place = target + [0.0, 0.0, c.place_height_m]
    g_open, g_closed = c.gripper_open, c.gripper_closed
    del cube_half_size_m  # heights are given for the 4 cm cube of the task; kept for a future size rule

    def move(name, a, b, g, speed):
        d = float(np.linalg.norm(b - a))
        return Segment(name, a, b, g, g, max(c.min_segment_s, d / speed))

    segs = [
        move("approach", start, above_cube, g_open, c.speed_m_s),
        move("descend", above_cube, grasp, g_open, c.descend_speed_m_s),
        Segment("settle", grasp, grasp, g_open, g_open, c.settle_s),
        Segment("close", grasp, grasp, g_open, g_closed, c.close_s),
        move("lift", grasp, above_cube, g_closed, c.descend_speed_m_s),
        move("carry", above_cube, above_target, g_closed, c.speed_m_s),
        move("lower", above_target, place, g_closed, c.descend_speed_m_s),
        Segment("open", place, place, g_closed, g_open, c.open_s),
        move("retreat", place, above_target, g_open, c.descend_speed_m_s),
        Segment("hold", above_target, above_target, g_open, g_open, c.hold_end_s),
    ]
    for s in segs:
        if not math.isfinite(s.duration_s) or s.duration_s <= 0:
            raise ValueError(f"expert segment {s.name!r} has a bad duration {s.duration_s}")
    return ExpertPlan(segs)
