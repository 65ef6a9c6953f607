"""The simulator describes one instant from one state: after ``YamSim.step`` the joints (what ``/joint_states``
carries), the link transforms (``/tf``) and the camera poses (what the renderer draws from) agree, at full speed.

The reference is independent of the simulator's frames: the I2RT SDK's forward kinematics (``YamKinematics``, its own
model) of the published joint positions."""

import mujoco
import numpy as np
import pytest

from para_ros.robot.yam_ik import YamKinematics
from para_ros.sim.yam_scene import GRASP_SITE, WRIST_CAM_BODY, SimConfig, YamSim

SUBSTEP_S = 0.005  # the sim node's servo-setpoint period (para_ros.nodes.sim_node.SUBSTEP_S)


@pytest.fixture(scope="module")
def sim():
    s = YamSim(SimConfig())
    yield s
    s.close()


def tool_pose_from_tf(sim: YamSim) -> np.ndarray:
    """base -> grasp_site by composing the published /tf chain (base -> link1 ... -> gripper -> grasp_site)."""
    T = np.eye(4)
    for _parent, child, T_parent_child in sim.link_transforms():
        if child == GRASP_SITE:
            return T @ T_parent_child
        if child != WRIST_CAM_BODY:
            T = T @ T_parent_child
    raise AssertionError("no grasp_site in the link transforms")


def test_joints_tf_and_cameras_come_from_one_state_at_full_speed(sim):
    kin = YamKinematics()
    sim.reset()
    T_tool_wristcam = np.linalg.inv(sim.site_pose()) @ sim.T_world_cam("wrist")  # fixed mount, at rest
    target = sim.joint_positions()
    target[:6] += [1.2, 0.8, -0.9, 1.2, 0.8, 1.2]  # far away: the servos run at full speed
    sim.set_joint_targets(target)
    tool_speeds, errors_m, cam_errors_m = [], [], []
    previous = sim.site_pose()[:3, 3]
    for _ in range(150):
        assert sim.step(SUBSTEP_S) > 0
        q = sim.joint_positions()  # what /joint_states carries
        T_fk = kin.fk(q[:6])
        errors_m.append(np.linalg.norm(T_fk[:3, 3] - tool_pose_from_tf(sim)[:3, 3]))
        cam_errors_m.append(np.linalg.norm((T_fk @ T_tool_wristcam)[:3, 3] - sim.T_world_cam("wrist")[:3, 3]))
        tool_speeds.append(np.linalg.norm(T_fk[:3, 3] - previous) / SUBSTEP_S)
        previous = T_fk[:3, 3]
    assert max(tool_speeds) > 1.0  # m/s: one physics step (2 ms) of staleness would be > 2 mm here
    assert max(errors_m) < 1e-6
    assert max(cam_errors_m) < 1e-6


def test_recomputing_the_kinematics_leaves_the_trajectory_unchanged(sim):
    sim.reset()
    target = sim.joint_positions()
    target[:6] += [0.5, 0.4, -0.3, 0.2, 0.1, 0.3]
    sim.set_joint_targets(target)
    data = mujoco.MjData(sim.model)  # the same start state, stepped by plain mj_step only
    mujoco.mj_copyData(data, sim.model, sim.data)
    for _ in range(40):
        sim.step(SUBSTEP_S)
        mujoco.mj_step(sim.model, data, nstep=int(round(SUBSTEP_S / sim.model.opt.timestep)))
    np.testing.assert_array_equal(sim.data.qpos, data.qpos)
    np.testing.assert_array_equal(sim.data.qvel, data.qvel)
