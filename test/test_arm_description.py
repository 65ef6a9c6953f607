"""The arm description (``para_ros.robot.arm``): the YAM's and a 5-joint arm's load, their kinematics match
independent references (hand-computed poses of the 5-joint arm, MuJoCo's own forward kinematics for both), and a bad
description (joint counts that disagree, limits outside the model's range, a missing joint, site or body) is refused
with a message naming the field, by the loader or by the executor before it starts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from arm_rigs import ARM5_XML, ARM5_YAML, ARM_NAMES, REPO, TOP_DOWN_R, MujocoFk, load_rig

from para_ros.execution.chunk import ChunkChecks
from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
from para_ros.robot.arm import ArmDescription, ArmLimits, ArmModel, WristCameraMount, load_arm_description
from para_ros.robot.arm_kinematics import ArmKinematics
from para_ros.robot.yam import load_yam_config

# ---- loading and kinematics -----------------------------------------------------------------------------------------


def test_the_yam_description_is_config_yam_yaml():
    raw = yaml.safe_load((REPO / "config" / "yam.yaml").read_text())  # read here with plain yaml
    yam = load_yam_config()
    assert isinstance(yam, ArmDescription) and yam.name == "yam"
    assert yam.n_joints == len(raw["model"]["joint_names"]) == 6
    assert yam.joint_names == tuple(raw["model"]["joint_names"])
    np.testing.assert_array_equal(yam.limits.joint_upper_rad, raw["limits"]["joint_upper_rad"])
    assert yam.model.tool_site == raw["model"]["tool_site"] and yam.wrist_camera.frame_id == "wrist_cam_optical_frame"


def test_the_five_joint_arm_forward_kinematics_by_hand():
    """Hand-computed poses of test/fixtures/arm5: shoulder 0.1 m up, links 0.2 + 0.2 + 0.05 + 0.05 m along x."""
    arm = load_arm_description(ARM5_YAML)
    assert arm.n_joints == 5 and arm.name == "arm5" and arm.model.mjcf == str(ARM5_XML.resolve())
    kin = ArmKinematics(arm.model)
    np.testing.assert_allclose(kin.fk(np.zeros(5))[:3, 3], [0.5, 0.0, 0.1], atol=1e-12)
    np.testing.assert_allclose(kin.fk([np.pi / 2, 0, 0, 0, 0])[:3, 3], [0.0, 0.5, 0.1], atol=1e-12)
    # wrist pitched +90 deg: the last 0.1 m points straight down, the tool frame is the top-down one
    T = kin.fk([0, 0, 0, np.pi / 2, 0])
    np.testing.assert_allclose(T[:3, 3], [0.4, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(T[:3, :3], TOP_DOWN_R, atol=1e-12)
    # elbow at -90 deg (up), wrist +180 deg (back down): forearm up 0.2, then 0.1 down from (0.2, 0, 0.3)
    np.testing.assert_allclose(kin.fk([0, 0, -np.pi / 2, np.pi, 0])[:3, 3], [0.2, 0.0, 0.2], atol=1e-12)


@pytest.mark.parametrize("name", ARM_NAMES)
def test_ik_round_trip_against_mujoco_forward_kinematics(name):
    rig, ref = load_rig(name), MujocoFk(name)
    rng = np.random.default_rng(3)
    for _ in range(10):
        p = rng.uniform([0.25, -0.1, 0.05], [0.35, 0.1, 0.15])
        q = rig.top_down_q(p)
        assert q.shape == (rig.n,)
        T = ref(q)  # the IK's answer checked by MuJoCo itself
        assert np.linalg.norm(T[:3, 3] - p) < 5e-4
        assert np.linalg.norm(T[:3, :3] - TOP_DOWN_R) < 1e-2
        np.testing.assert_allclose(rig.kin.fk(q), T, atol=1e-9)


# ---- bad descriptions ----------------------------------------------------------------------------------------------


def _arm5_file(tmp_path: Path, edit) -> Path:
    """A copy of the 5-joint arm's description (with its MJCF beside it) changed by ``edit(dict)``."""
    shutil.copy(ARM5_XML, tmp_path / "arm5.xml")
    data = yaml.safe_load(ARM5_YAML.read_text())
    edit(data)
    path = tmp_path / "bad_arm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _start_executor(arm: ArmDescription, kinematics=None) -> ExecutorCore:
    checks = ChunkChecks(tool_frames=(arm.model.tool_site,))
    return ExecutorCore(ExecutorConfig(checks=checks), arm, kinematics=kinematics)


def _set(section, key, value):
    return lambda d: d[section].__setitem__(key, value)


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            _set("limits", "joint_lower_rad", [-1.0] * 6),
            "limits.joint_lower_rad has 6 values but model.joint_names has 5",
        ),
        (
            _set("limits", "joint_upper_rad", [1.0] * 4),
            "limits.joint_upper_rad has 4 values but model.joint_names has 5",
        ),
        (_set("limits", "max_joint_speed_rad_s", [1.0] * 6), "limits.max_joint_speed_rad_s has 6 values"),
        (_set("limits", "joint_upper_rad", [1.0, 1.0, -3.0, 1.0, 1.0]), "must be < joint_upper_rad"),
        (_set("model", "joint_names", ["yaw", "yaw", "elbow_pitch", "wrist_pitch", "wrist_roll"]), "each name once"),
        (_set("model", "tool_site", ""), "ArmModel.tool_site=''"),
        (lambda d: d.pop("wrist_camera"), "no 'wrist_camera' section"),
        (lambda d: d["model"].pop("mjcf"), "give exactly one source of the model"),
        (_set("model", "mjcf", "missing.xml"), "no such file"),
        (lambda d: d.update(limit={}), "unknown sections ['limit']"),
    ],
)
def test_a_bad_description_is_refused_naming_the_field(tmp_path, edit, words):
    path = _arm5_file(tmp_path, edit)
    with pytest.raises(ValueError) as err:
        arm = load_arm_description(path)
        _start_executor(arm)  # reached only by what needs the model to see (the missing MJCF file)
    assert words in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "edit, words",
    [
        # a limit beyond the model's joint range: the IK could never honour it
        (
            lambda d: d["limits"].__setitem__("joint_upper_rad", [2.8, 2.1, 2.5, 2.5, 2.8]),
            "limits.joint_upper_rad[1]=2.1 (shoulder_pitch) is outside the model's joint range [-2, 2]",
        ),
        (
            lambda d: d["limits"].__setitem__("joint_lower_rad", [-2.8, -1.9, -2.5, -2.5, -3.0]),
            "limits.joint_lower_rad[4]=-3 (wrist_roll) is outside the model's joint range [-2.9, 2.9]",
        ),
        # frames the model does not have
        (_set("model", "tool_site", "tcp"), "model.tool_site='tcp' is not a site of the model"),
        (_set("model", "world_frame", "world_base"), "model.world_frame='world_base' is not a body of the model"),
        (_set("wrist_camera", "parent_frame", "hand"), "wrist_camera.parent_frame='hand' is not a body of the model"),
        (
            _set("model", "joint_names", ["yaw", "shoulder_pitch", "elbow", "wrist_pitch", "wrist_roll"]),
            "model.joint_names: ['elbow'] are not joints of the model",
        ),
    ],
)
def test_the_executor_refuses_to_start_on_a_description_its_model_contradicts(tmp_path, edit, words):
    arm = load_arm_description(_arm5_file(tmp_path, edit))  # consistent on its own ...
    with pytest.raises(ValueError) as err:  # ... but not with its model: no executor
        _start_executor(arm)
    assert words in str(err.value), str(err.value)


def test_the_executor_refuses_kinematics_of_another_arm():
    yam = load_yam_config()
    arm5 = load_rig("arm5")
    with pytest.raises(ValueError, match=r"model.joint_names=\['joint1'.*but the kinematics drives \['yaw'"):
        _start_executor(yam, kinematics=arm5.kin)
    with pytest.raises(ValueError, match="need an ArmDescription"):
        ExecutorCore(ExecutorConfig(), {"limits": yam.limits})


def test_dataclass_checks_name_the_field():
    good = dict(
        joint_lower_rad=[-1] * 7,
        joint_upper_rad=[1] * 7,
        max_joint_speed_rad_s=2.0,  # one value: every joint
        max_ee_speed_m_s=0.5,
        workspace_min_m=[0, -1, 0],
        workspace_max_m=[1, 1, 1],
    )
    lim = ArmLimits(**good)
    assert lim.n_joints == 7 and lim.max_joint_speed_rad_s.tolist() == [2.0] * 7
    with pytest.raises(ValueError, match=r"joint_lower_rad=.* must be < joint_upper_rad"):
        ArmLimits(**{**good, "joint_lower_rad": [2] * 7})
    with pytest.raises(ValueError, match="workspace_min_m"):
        ArmLimits(**{**good, "workspace_min_m": [0, 0]})
    with pytest.raises(ValueError, match="joint_names"):
        ArmModel(joint_names="joint1", tool_site="tool", world_frame="base", mjcf="a.xml")
    with pytest.raises(ValueError, match="gripper_type"):
        ArmModel(joint_names=["a"], tool_site="tool", world_frame="base", arm_type="yam")
    model = ArmModel(joint_names=[f"j{i}" for i in range(6)], tool_site="tool", world_frame="base", mjcf="a.xml")
    with pytest.raises(ValueError, match="limits.joint_lower_rad has 7 values but model.joint_names has 6 joints"):
        ArmDescription(model, lim, WristCameraMount())


# ---- the safe defaults ----------------------------------------------------------------------------------------------


def test_a_bare_executor_config_has_the_nodes_safe_defaults():
    """``ExecutorConfig()`` equals config/executor.yaml (read here with plain yaml): disengaged at the start, the
    joint-state watchdog on, the chunk lead on."""
    shipped = yaml.safe_load((REPO / "config" / "executor.yaml").read_text())["chunk_executor"]["ros__parameters"]
    cfg = ExecutorConfig()
    assert cfg.start_engaged is shipped["auto_engage"] is False
    assert cfg.joint_state_timeout_s == shipped["joint_state_timeout_s"] == 0.2
    for name in ("control_rate_hz", "command_lookahead_s", "chunk_min_lead_s", "stale_timeout_s", "unreachable"):
        assert getattr(cfg, name) == shipped[name], name
    assert (cfg.smoothing, cfg.ik_max_iters) == (shipped["smoothing"], shipped["ik_max_iters"])


def test_a_bare_executor_sends_nothing_until_engaged_and_stops_on_a_silent_arm():
    """With the defaults and no other setting: nothing is sent before ~/engage; after it, a state older than 0.2 s
    stops the commands."""
    rig = load_rig("arm5")
    core = ExecutorCore(ExecutorConfig(checks=ChunkChecks(tool_frames=("tool",))), rig.arm, kinematics=rig.kin)
    q0 = rig.top_down_q([0.3, 0.0, 0.1])
    with pytest.raises(ValueError, match="measured_s"):  # the watchdog needs measurement times
        core.set_measured_joints(q0, 0.5)
    core.set_measured_joints(q0, 0.5, measured_s=0.0)
    assert core.tick(0.01) is None and core.status.activity == "disengaged"
    core.engage()
    np.testing.assert_array_equal(core.tick(0.02).q_rad, q0)
    assert core.tick(0.21) is None and core.status.activity == "joint_state_lost"


def test_an_unlimited_model_joint_takes_any_limits(tmp_path):
    """A continuous joint (no range in the MJCF) has no model range to stay inside: the description's limits are the
    only ones, and the executor starts."""
    xml = ARM5_XML.read_text()
    roll = '<joint name="wrist_roll" type="hinge" axis="1 0 0" range="-2.9 2.9"/>'
    assert roll in xml
    (tmp_path / "arm5.xml").write_text(xml.replace(roll, '<joint name="wrist_roll" type="hinge" axis="1 0 0"/>'))
    data = yaml.safe_load(ARM5_YAML.read_text())
    data["limits"]["joint_lower_rad"][4], data["limits"]["joint_upper_rad"][4] = -6.0, 6.0
    path = tmp_path / "continuous_roll.yaml"
    path.write_text(yaml.safe_dump(data))
    arm = load_arm_description(path)
    core = _start_executor(arm)
    assert core.kin.joint_range_rad[4].tolist() == [-np.inf, np.inf]
    # the other joints keep the ranges written in arm5.xml
    np.testing.assert_array_equal(core.kin.joint_range_rad[:4], [[-2.9, 2.9], [-2.0, 2.0], [-2.6, 2.6], [-2.6, 2.6]])
