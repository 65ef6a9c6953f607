"""The executor core under a random stream of chunks, on every test arm (the YAM and a 5-joint arm), without ROS:
good chunks near the arm, far chunks anywhere in the box, NaN / inf, garbage positions, shuffled time bases, wild
grippers, a stop and a resume in the middle, and a perfect arm echoing every command as its measured state.

Asserted over EVERY command, against limits read here with plain yaml from the arm's description file and FK by
MuJoCo's own ``mj_kinematics`` (not the code under test): joints inside their range, joint and tool steps below their
speed limits per tick, the tool inside the workspace box, the gripper in range and rate-limited; and the limits were
reached (so the checks could fail), and the arm moved.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from arm_rigs import ARM5_YAML, ARM_NAMES, REPO, TOP_DOWN_R, MujocoFk, load_rig
from scipy.spatial.transform import Rotation

from para_ros.execution.chunk import Chunk, ChunkChecks
from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore

DT_S = 0.01
N_TICKS = 800


def _raw_limits(name: str) -> dict:
    path = REPO / "config" / "yam.yaml" if name == "yam" else ARM5_YAML
    return yaml.safe_load(path.read_text())["limits"]


@pytest.mark.parametrize("name", ARM_NAMES)
def test_random_chunks_never_break_the_limits(name):
    rig, fk, lim = load_rig(name), MujocoFk(name), _raw_limits(name)
    arm = rig.arm
    checks = ChunkChecks(
        tool_frames=(arm.model.tool_site,),
        workspace_min_m=arm.limits.workspace_min_m,
        workspace_max_m=arm.limits.workspace_max_m,
    )
    config = ExecutorConfig(
        checks=checks, stale_timeout_s=0.5, start_engaged=True, joint_state_timeout_s=0.2, chunk_min_lead_s=0.0
    )
    core = ExecutorCore(config, arm, kinematics=rig.kin)
    rng = np.random.default_rng(7)
    quat_down = Rotation.from_matrix(TOP_DOWN_R).as_quat()
    q = rig.top_down_q([0.3, 0.0, 0.1])
    g = 0.5
    commands = []
    n_steps = 10
    for k in range(N_TICKS):
        now = k * DT_S
        core.set_measured_joints(q, g, measured_s=now)  # a perfect arm: it is where it was commanded
        if k % 5 == 0:
            kind = rng.integers(0, 7)
            t = np.arange(n_steps) * 0.1
            p_tool = fk(q)[:3, 3]
            pos = p_tool + np.outer(t, rng.normal(0.0, 0.1, 3))  # near the arm, up to ~0.2 m/s
            quats = np.tile(quat_down, (n_steps, 1))
            grip = np.full(n_steps, rng.choice([0.0, 1.0]))  # open or close: the gripper rate limit acts
            if kind == 1:  # far, anywhere in (and beyond) the box: the speed limits clip it
                pos = np.tile(rng.uniform([0.0, -0.5, -0.1], [0.7, 0.5, 0.6]), (n_steps, 1))
            elif kind == 2:  # non-finite
                pos[rng.integers(0, n_steps), rng.integers(0, 3)] = rng.choice([np.nan, np.inf, -np.inf])
            elif kind == 3:  # garbage
                pos = rng.uniform(-2.0, 2.0, (n_steps, 3))
            elif kind == 4:  # a shuffled time base
                t = np.sort(rng.uniform(-0.5, 1.0, n_steps))
            elif kind == 5:  # random orientations
                quats = Rotation.random(n_steps, random_state=int(rng.integers(1 << 30))).as_quat()
            elif kind == 6:  # a gripper out of its range
                grip = rng.uniform(-0.5, 1.5, n_steps)
            chunk = Chunk(
                now - rng.uniform(0.0, 0.1), t, pos, quats, grip, np.ones(n_steps), "base", arm.model.tool_site, "m"
            )
            core.add_chunk(chunk, now)
        if k == 400:
            core.stop()
        if k == 460:
            core.resume()
        command = core.tick(now)
        assert command is not None, core.status.activity
        assert command.q_rad.shape == (rig.n,)
        commands.append((command.q_rad.copy(), command.gripper))
        q, g = command.q_rad.copy(), command.gripper

    Q = np.array([c[0] for c in commands])  # (N, n)
    G = np.array([c[1] for c in commands])  # (N,)
    assert np.all(np.isfinite(Q)) and np.all(np.isfinite(G))
    lower, upper = np.array(lim["joint_lower_rad"]), np.array(lim["joint_upper_rad"])
    assert np.all(Q >= lower - 1e-9) and np.all(Q <= upper + 1e-9), "joint range broken"
    dq = np.abs(np.diff(Q, axis=0)).max(axis=0)
    speed = np.broadcast_to(np.asarray(lim["max_joint_speed_rad_s"], dtype=float), (rig.n,))
    assert np.all(dq <= speed * DT_S * (1 + 1e-6)), f"joint step {dq}"
    P = np.array([fk(qi)[:3, 3] for qi in Q])  # (N, 3) by MuJoCo
    lo, hi = np.array(lim["workspace_min_m"]), np.array(lim["workspace_max_m"])
    assert np.all(P >= lo - 1e-6) and np.all(P <= hi + 1e-6), "tool left the workspace box"
    ee_step = np.linalg.norm(np.diff(P, axis=0), axis=1)
    assert ee_step.max() <= lim["max_ee_speed_m_s"] * DT_S * (1 + 1e-6), f"tool step {ee_step.max()}"
    assert np.all(G >= lim["gripper_min"] - 1e-12) and np.all(G <= lim["gripper_max"] + 1e-12)
    assert np.abs(np.diff(G)).max() <= lim["max_gripper_speed_per_s"] * DT_S * (1 + 1e-6)
    # The limits were reached, so the checks above could fail; the arm moved; every kind of chunk was met.
    assert ee_step.max() > 0.8 * lim["max_ee_speed_m_s"] * DT_S
    assert np.abs(np.diff(G)).max() > 0.99 * lim["max_gripper_speed_per_s"] * DT_S
    assert np.ptp(P, axis=0).max() > 0.05
    s = core.status
    assert s.chunks_accepted > 20 and s.chunks_rejected > 20 and s.limit_events > 20 and s.check_failures == 0
