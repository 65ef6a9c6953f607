"""``WorldPoses`` (the inference node's camera / end-effector poses) without ROS: a look-up over a table of transforms
with tf2's failure, the TF wait only when asked, the end effector from TF or from joint states and the YAM's forward
kinematics (composed with the arm base's pose when the base is not the world), and each failure an
``ObservationProblem`` naming the frames and the stamp. Then ``PolicyChoice`` from the node's parameter values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from para_ros.observation.builder import ObservationProblem
from para_ros.observation.ee_from_joints import EeFromJoints
from para_ros.observation.world_poses import PoseLookupError, WorldPoses
from para_ros.robot.arm_kinematics import ArmKinematics
from para_ros.robot.yam import load_yam_config

STAMP_NS = 1_700_000_000_250_000_000


def pose(rotvec, xyz) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = xyz
    return T


class TableLookup:
    """Transforms by (target, source), recording each call's timeout; a missing pair fails as tf2's does."""

    def __init__(self, table: dict[tuple[str, str], np.ndarray]):
        self.table = table
        self.timeouts_ns: list[int] = []

    def __call__(self, target: str, source: str, stamp_ns: int, timeout_ns: int) -> np.ndarray:
        self.timeouts_ns.append(timeout_ns)
        if (target, source) not in self.table:
            raise PoseLookupError(f'LookupException: "{source}" passed to lookupTransform does not exist')
        return self.table[(target, source)]


def test_a_frame_pose_waits_only_when_asked_and_names_what_is_missing():
    T_cam = pose([0.1, -0.2, 0.3], [0.4, 0.0, 0.5])
    lookup = TableLookup({("base", "scene_cam"): T_cam})
    poses = WorldPoses(lookup, "base", "grasp_site", tf_timeout_s=0.25, rejections=lambda: {"wrist_cam": "NaN"})
    assert np.array_equal(poses.frame_pose("scene_cam", STAMP_NS), T_cam)
    assert np.array_equal(poses.frame_pose("scene_cam", STAMP_NS, wait=False), T_cam)
    assert lookup.timeouts_ns == [250_000_000, 0]
    poses.tf_timeout_s = 0.0  # the dynamic parameter changed
    poses.frame_pose("scene_cam", STAMP_NS)
    assert lookup.timeouts_ns[-1] == 0
    with pytest.raises(ObservationProblem) as err:
        poses.frame_pose("wrist_cam", STAMP_NS, what="wrist camera")
    assert err.value.key == "tf"
    assert str(err.value) == (
        'wrist camera: no TF base <- wrist_cam at t=1700000000.250 s (LookupException: "wrist_cam" passed to '
        "lookupTransform does not exist); refused wrist_cam: NaN"
    )


def test_a_non_finite_transform_is_refused():
    bad = np.eye(4)
    bad[0, 3] = np.nan
    poses = WorldPoses(TableLookup({("base", "scene_cam"): bad}), "base", "grasp_site", 0.1)
    with pytest.raises(ObservationProblem, match=r"TF base <- scene_cam"):
        poses.frame_pose("scene_cam", STAMP_NS)


def test_the_end_effector_from_tf():
    T_ee = pose([np.pi, 0.0, 0.0], [0.3, 0.05, 0.12])
    poses = WorldPoses(TableLookup({("base", "grasp_site"): T_ee}), "base", "grasp_site", 0.1)
    assert np.array_equal(poses.ee_pose(STAMP_NS), T_ee)
    with pytest.raises(ObservationProblem, match=r"^end-effector pose: no TF base <- grasp_site"):
        WorldPoses(TableLookup({}), "base", "grasp_site", 0.1).ee_pose(STAMP_NS)


def test_the_end_effector_from_joint_states_and_forward_kinematics():
    ee = EeFromJoints()  # the YAM's description and kinematics
    names = list(ee.history.joint_names)
    q = np.array([0.1, 0.6, 0.7, -0.2, 0.1, 0.3])[: len(names)]
    table = {("world", ee.base_frame): pose([0.0, 0.0, 0.5], [1.0, 2.0, 0.0])}
    in_base = WorldPoses(TableLookup(table), ee.base_frame, "unused", 0.1, ee_from_joints=ee, joint_states_topic="/js")
    with pytest.raises(ObservationProblem) as err:
        in_base.ee_pose(STAMP_NS)
    assert err.value.key == "joint_states"
    assert "no /js brackets t=1700000000.250 s (no joint states yet" in str(err.value)
    ee.history.add(STAMP_NS - 10_000_000, names, q)
    ee.history.add(STAMP_NS + 10_000_000, names, q)
    T_base_ee = ArmKinematics(load_yam_config().model).fk(q)  # the same joints at both stamps: this pose between
    assert np.allclose(in_base.ee_pose(STAMP_NS), T_base_ee)
    in_world = WorldPoses(TableLookup(table), "world", "unused", 0.1, ee_from_joints=ee)
    assert np.allclose(in_world.ee_pose(STAMP_NS), table[("world", ee.base_frame)] @ T_base_ee)
    with pytest.raises(ObservationProblem, match=r"^arm base pose: no TF map <- "):
        WorldPoses(TableLookup(table), "map", "unused", 0.1, ee_from_joints=ee).ee_pose(STAMP_NS)


def test_policy_choice_from_the_node_parameters():
    from para_ros.inference.policy_choice import PolicyChoice
    from para_ros.nodes.inference_node import PARAMETERS

    p = {param.name: param.default for param in PARAMETERS.params}
    choice = PolicyChoice.from_parameters({**p, "device": "auto", "decoding": "joint", "decoding_top_k": 7})
    assert choice.device is None and choice.checkpoint == "" and choice.random_preset == "tiny"
    assert (choice.decoding.mode, choice.decoding.top_k) == ("joint", 7)
    warnings: list[str] = []
    policy = choice.load(warn=warnings.append)
    assert len(warnings) == 1 and "UNTRAINED" in warnings[0] and "preset tiny, seed 0" in warnings[0]
    assert policy.decoding.mode == "joint" and tuple(policy.view_names) == ("scene", "wrist")
