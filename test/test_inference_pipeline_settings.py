"""What the inference node's parameters set up in its pipeline, without ROS: the settings from the parameter values,
the lockstep gripper wait, the overlay, a dynamic change applied, ``ee_source`` checked, and the ready line's
familiarity summary."""

import pytest
import torch

from para_core.model.config import V4Config
from para_core.model.policy import Policy
from para_ros.inference import pipeline_settings
from para_ros.nodes.inference_params import PARAMETERS, view_topic_params

torch.set_num_threads(1)


class Report:
    def count(self, key, n=1): ...
    def problem(self, key, message): ...
    def fault(self, key, message): ...
    def clear(self, key): ...
    def set_value(self, key, value): ...
    def add_sample(self, key, sample): ...


@pytest.fixture(scope="module")
def policy():
    return Policy.random_init(V4Config.tiny(), device="cpu", seed=0)


def params(policy, **changes):
    """The node's parameter values: the table's defaults, its views' topics, ``changes``."""
    return PARAMETERS.defaults() | {x.name: x.default for x in view_topic_params(policy.view_names)} | changes


def test_the_defaults_set_up_the_pipeline_as_the_table_says(policy):
    p = params(policy)
    pipe = pipeline_settings.build_pipeline(policy, p, Report())
    assert (pipe.pairing.pair_slop_s, pipe.pairing.max_observation_age_s) == (0.05, 1.0)
    assert pipe.info_sources == ["/scene_cam/camera_info", "/wrist_cam/camera_info"]
    assert pipe.gripper_source == "/joint_states" and pipe.observation_settings.gripper_joint == "gripper"
    assert pipe.observation_settings.past_n == policy.config.mv_past_n
    assert pipe.camera_check.settings.enabled and pipe.camera_check.settings.min_contrast_levels == 2.0
    assert pipe.familiarity_check.settings.enabled and pipe.familiarity_check.settings.window_frames == 0
    assert pipe.gripper_wait_s == 0.0 and not pipe.draw_overlay and pipe.ee_from_joints is None
    assert pipeline_settings.familiarity_summary(pipe).startswith("off (the checkpoint has no familiarity memory")


def test_lockstep_waits_for_the_gripper_and_an_overlay_topic_draws_the_overlay(policy):
    p = params(policy, lockstep_ack_topic="/sim/no_chunk", tf_timeout_s=0.3, overlay_topic="/para/overlay")
    pipe = pipeline_settings.build_pipeline(policy, p, Report())
    assert pipe.gripper_wait_s == 0.3 and pipe.draw_overlay


def test_a_dynamic_change_reaches_the_pipeline(policy):
    p = params(policy)
    pipe = pipeline_settings.build_pipeline(policy, p, Report())
    pairer = pipe.pairer
    pipe.familiarity_check.check(pipe.views, [0.5, 0.5])
    assert pipe.familiarity_check.last_medians.size == 2
    changes = {"pair_slop_s": 0.02, "camera_check": False, "familiarity_window_frames": 9}
    pipeline_settings.apply_parameter_changes(pipe, p | changes, changes)
    assert pipe.pairing.pair_slop_s == 0.02 and pipe.pairer is not pairer  # pairing starts afresh
    assert not pipe.camera_check.settings.enabled
    assert pipe.familiarity_check.settings.window_frames == 9
    assert pipe.familiarity_check.last_medians.size == 0  # its window starts afresh
    pairer = pipe.pairer
    pipeline_settings.apply_parameter_changes(pipe, p | {"tf_timeout_s": 0.5}, {"tf_timeout_s": 0.5})
    assert pipe.pairer is pairer  # not a pairing parameter: the frames stay


def test_ee_source_names_the_choices(policy):
    assert pipeline_settings.ee_from_joints(params(policy)) is None
    assert pipeline_settings.ee_from_joints(params(policy, ee_source="joint_states")) is not None
    with pytest.raises(ValueError, match="ee_source='fk'.*'tf'.*'joint_states'"):
        pipeline_settings.ee_from_joints(params(policy, ee_source="fk"))
