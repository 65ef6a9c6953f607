"""The chunk executor node on an arm that is not the YAM (``yam_config`` = the 5-joint test arm's description), over
real DDS: it reads the arm's 5 joints from /joint_states by their names, sends JointTrajectory commands naming those 5
joints (+ gripper) that follow a chunk (checked by MuJoCo's own FK) inside the description's limits; and a description
whose limits its model contradicts stops the node at start (exit status 2, the field named), nothing sent."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest
import yaml
from arm_rigs import ARM5_XML, ARM5_YAML, TOP_DOWN_R, MujocoFk, load_rig
from scipy.spatial.transform import Rotation

pytestmark = pytest.mark.ros

from executor_helpers import ExecutorDriver, command_arrays  # noqa: E402
from ros_helpers import start_python, stop_process  # noqa: E402

NODE = "chunk_executor_arm5"


def test_the_node_drives_a_five_joint_arm_from_its_description():
    rig, fk = load_rig("arm5"), MujocoFk("arm5")
    lim = yaml.safe_load(ARM5_YAML.read_text())["limits"]
    names = list(rig.arm.joint_names)
    q_init = rig.top_down_q([0.3, 0.0, 0.1])
    drv = ExecutorDriver("/exec_arm5", q_init, joint_names=names)
    drv.start_executor(NODE, yam_config=str(ARM5_YAML), joint_state_timeout_s=2.0, stale_timeout_s=0.5)
    try:
        drv.wait_for_commands(10, timeout_s=90.0)
        p0 = fk(q_init)[:3, 3]
        quat = Rotation.from_matrix(TOP_DOWN_R).as_quat()
        t_start = time.time()
        while time.time() - t_start < 1.0:  # +y at 0.05 m/s from where the tool is
            stamp = time.time() - 0.02
            t = np.arange(12) * 0.1
            p = p0 + np.outer(stamp + t - t_start, [0.0, 0.05, 0.0])
            drv.publish_chunk(stamp, t, p, np.tile(quat, (12, 1)), np.full(12, 0.8), tool_frame_id="tool")
            time.sleep(0.1)
        time.sleep(0.3)
        assert drv.proc.poll() is None, "the executor died"
        commands, _, _ = drv.snapshot()
    finally:
        log = drv.close()
    assert "Traceback" not in log
    assert list(commands[-1][1].joint_names) == names + ["gripper"]
    _, _, q, g = command_arrays(commands, names)
    assert q.shape[1] == 5
    assert np.all(q >= np.array(lim["joint_lower_rad"]) - 1e-9) and np.all(q <= np.array(lim["joint_upper_rad"]) + 1e-9)
    assert np.abs(np.diff(q, axis=0)).max() <= max(lim["max_joint_speed_rad_s"]) * 0.01 * (1 + 1e-6)
    P = np.array([fk(qi)[:3, 3] for qi in q])  # MuJoCo's FK of what the node sent
    assert P[-1, 1] - p0[1] > 0.02, "the tool did not follow the chunk along +y"
    assert np.abs(P[:, 0] - p0[0]).max() < 0.005 and np.abs(P[:, 2] - p0[2]).max() < 0.005
    assert g[-1] == pytest.approx(0.8, abs=1e-6)


def test_the_node_refuses_a_description_its_model_contradicts(tmp_path):
    shutil.copy(ARM5_XML, tmp_path / "arm5.xml")
    data = yaml.safe_load(ARM5_YAML.read_text())
    data["limits"]["joint_upper_rad"][1] = 2.1  # the model's shoulder_pitch stops at 2.0 rad
    bad = tmp_path / "bad_arm.yaml"
    bad.write_text(yaml.safe_dump(data))
    proc = start_python(
        [
            "para_ros.nodes.chunk_executor",
            "--ros-args",
            "-r",
            "__node:=chunk_executor_bad_arm",
            "-p",
            f"yam_config:={bad}",
        ],
        module=True,
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        rc, _ = stop_process(proc)
    assert proc.returncode == 2, out[-3000:]
    assert "limits.joint_upper_rad[1]=2.1 (shoulder_pitch) is outside the model's joint range" in out, out[-3000:]
