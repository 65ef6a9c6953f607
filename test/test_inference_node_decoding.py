"""The inference node's chunk decoding parameters reach the policy and its pipeline (an in-process node, no DDS peer);
the parameter table refuses an unknown mode and an out-of-range value."""

import pytest

from para_ros.nodes.inference_node import PARAMETERS


def test_decoding_parameters_reach_the_policy_and_the_pipeline_holds_its_fusion_memory():
    from ros_helpers import in_process_inference_node

    for node in in_process_inference_node(
        "inference_decoding_test",
        random_seed=2,
        decoding="fused",
        decoding_top_k=4,
        decoding_max_speed_m_s=0.5,
        decoding_motion_cost_per_m=2.0,
        fusion_tau_s=0.3,
    ):
        d = node.policy.decoding
        assert (d.mode, d.top_k, d.max_speed_m_s, d.motion_cost_per_m, d.fusion_tau_s) == ("fused", 4, 0.5, 2.0, 0.3)
        assert node.pipeline.fusion is node.policy.fusion and node.policy.fusion.tau_s == 0.3
        node.pipeline.fusion.add(1.0, 0.2, [[[0.0, 0.0, 0.0]]], [[1.0]])
        node._before_time_jump()  # the clock jumped back: the fused chunks are forgotten with the rest
        assert len(node.pipeline.fusion.chunks) == 0 and node.pipeline.generation == 1


def test_the_table_refuses_bad_decoding_values_and_defaults_to_auto():
    assert PARAMETERS.coerce_all({})["decoding"] == "auto"  # fused for PARA, argmax for the regression baseline
    with pytest.raises(ValueError, match="decoding"):
        PARAMETERS.coerce_all({"decoding": "viterbi"})
    with pytest.raises(ValueError, match="decoding_top_k"):
        PARAMETERS.coerce_all({"decoding_top_k": 0})
