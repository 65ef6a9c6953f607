"""What each lockstep process polls at every wake-up (para_ros.nodes.lockstep_hooks): the simulator's, the executor's
and the evaluator's own endpoints go without rclpy's default QoS event handlers in lockstep (and keep them in real
time), the evaluator has no parameter services and subscribes to the
scene camera only when it records videos. The outcomes of lockstep runs with these are checked to the digit by
test_lockstep_batch and bench/bench_lockstep.py."""

from __future__ import annotations

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter

DIAGNOSTICS = "/diagnostics"
KEEP_THEIRS = {"/tf", "/tf_static", "/parameter_events", "/rosout"}  # endpoints the change leaves as they are


@pytest.fixture
def context():
    """The simulator and executor built here carry the graph's node names: in a domain of their own."""
    from ros_helpers import private_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=private_domain_id())
    yield ctx
    rclpy.try_shutdown(context=ctx)


def _sim_node(context, lockstep: bool):
    from para_ros.nodes.sim_node import SimNode

    params = [Parameter("image_width", value=32), Parameter("image_height", value=32)]
    if lockstep:
        params += [Parameter("lockstep", value=True), Parameter("publish_clock", value=True)]
    return SimNode(context=context, parameter_overrides=params)


def _handlers_by_topic(node) -> dict[str, int]:
    """Default QoS event handlers of each of the node's publishers and subscriptions, by topic."""
    out = {}
    for endpoint in list(node.publishers) + list(node.subscriptions):
        out[endpoint.topic_name] = out.get(endpoint.topic_name, 0) + len(endpoint.event_handlers)
    return out


def test_the_simulators_own_endpoints_have_no_event_handlers_in_lockstep_and_keep_them_in_real_time(context):
    node = _sim_node(context, lockstep=True)
    try:
        handlers = _handlers_by_topic(node)
        own = {t: n for t, n in handlers.items() if t not in KEEP_THEIRS and t != DIAGNOSTICS}
        # the cameras, joint states, clock, task state, commands and the lockstep topics, every one without
        for topic in ("/scene_cam/image_raw", "/wrist_cam/camera_info", "/joint_states", "/clock",
                      "/joint_trajectory", "/chunk_executor/lockstep_ack", "/sim_node/lockstep_horizon",
                      "/chunk_executor/lockstep_batch", "/sim_node/task_state"):  # fmt: skip
            assert own.get(topic) == 0, (topic, own)
        assert sum(own.values()) == 0, own
        assert handlers["/tf"] == 2  # /tf keeps them (para_ros.ros_io.event_handlers)
    finally:
        node.destroy_node()
    node = _sim_node(context, lockstep=False)
    try:
        handlers = _handlers_by_topic(node)
        for topic in ("/scene_cam/image_raw", "/wrist_cam/camera_info", "/joint_states", "/joint_trajectory"):
            assert handlers[topic] == 2, (topic, handlers)  # real time: incompatible QoS and type, as before
        assert "/chunk_executor/lockstep_ack" not in handlers
    finally:
        node.destroy_node()


def test_the_executors_lockstep_endpoints_have_no_event_handlers(context):
    from para_ros.nodes.chunk_executor import ChunkExecutorNode

    node = ChunkExecutorNode(
        context=context,
        parameter_overrides=[Parameter("lockstep", value=True), Parameter("use_sim_time", value=True)],
    )
    try:
        handlers = _handlers_by_topic(node)
        for topic in ("/chunk_executor/lockstep_ack", "/chunk_executor/lockstep_batch",
                      "/sim_node/lockstep_horizon", "/para/action_chunk"):  # fmt: skip
            assert handlers[topic] == 0, (topic, handlers)
    finally:
        node.destroy_node()
    node = ChunkExecutorNode(context=context)
    try:
        assert _handlers_by_topic(node)["/para/action_chunk"] == 2  # real time: as before
    finally:
        node.destroy_node()


def test_the_evaluator_has_no_parameter_services_and_takes_images_only_for_videos():
    from para_ros.deploy.episodes import TaskClient

    for videos in (False, True):
        client = TaskClient(np.eye(4), videos=videos)
        try:
            topics = {s.topic_name for s in client.node.subscriptions}
            assert ("/scene_cam/image_raw" in topics) is videos
            assert ("/scene_cam/camera_info" in topics) is videos
            assert {"/sim_node/task_state", "/para/action_chunk", DIAGNOSTICS} <= topics
            assert not [s.srv_name for s in client.node.services if "parameter" in s.srv_name], "parameter services"
        finally:
            client.close()
