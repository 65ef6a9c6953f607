"""A graph refuses to start in a domain where nodes of its names live, and waits out ones that just went away."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("rclpy")

import rclpy  # noqa: E402
from ros_helpers import wait_for  # noqa: E402

from para_ros.deploy.domain_check import check_domain_free, nodes_in_domain, stopped_here  # noqa: E402

pytestmark = pytest.mark.ros


def test_a_live_node_of_the_graphs_name_is_refused_and_its_absence_is_not():
    """Real rclpy: the refusal goes through the fresh participant's check too, so a live node is still refused."""
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = rclpy.create_node("sim_node", namespace="/other_run", context=context)
    said: list[str] = []
    try:
        domain = int(os.environ["ROS_DOMAIN_ID"])
        wait_for(lambda: nodes_in_domain(["sim_node", "chunk_executor"], domain) == ["/other_run/sim_node"], 10.0,
                 None, "the probe to discover the node")  # fmt: skip
        with pytest.raises(RuntimeError, match=r"ROS_DOMAIN_ID \d+ already has /other_run/sim_node"):
            check_domain_free(["sim_node"], os.environ["ROS_DOMAIN_ID"], wait_s=1.5, say=said.append)
        assert said and "waiting up to 1.5 s" in said[0]
    finally:
        node.destroy_node()
        context.try_shutdown()
    said.clear()
    check_domain_free(["sim_node"], os.environ["ROS_DOMAIN_ID"], wait_s=5.0, say=said.append)
    assert said == [] or "waiting" in said[0]  # gone at once (shut down cleanly), or within the wait


def test_a_name_that_goes_away_within_the_wait_lets_the_start_go_on():
    calls = []

    def probe(names, domain_id, wait_s=0.0, fresh=False):  # seen at first, gone within the wait (a lease ran out)
        calls.append(wait_s)
        return ["/sim_node"] if len(calls) == 1 else []

    said: list[str] = []
    check_domain_free(["sim_node"], "7", wait_s=25.0, say=said.append, probe=probe)
    assert calls == [0.0, 25.0] and "ROS_DOMAIN_ID 7 already has /sim_node" in said[0] and "went after" in said[1]


def test_nodes_this_process_just_stopped_are_not_waited_for():
    """A sweep's next graph in the same domain: DDS still announces the nodes of the graph this process stopped a
    moment ago; they are not another run."""
    said: list[str] = []

    def probe(names, domain_id, wait_s=0.0, fresh=False):  # live: a fresh participant sees them too
        return ["/sim_node", "/chunk_executor"]

    stopped_here(41, ["sim_node"])
    with pytest.raises(RuntimeError, match="already has /chunk_executor") as err:
        check_domain_free(["sim_node", "chunk_executor"], 41, wait_s=0.0, say=said.append, probe=probe)
    assert "/sim_node" not in str(err.value)
    stopped_here(41, ["chunk_executor"])
    check_domain_free(["sim_node", "chunk_executor"], 41, wait_s=0.0, say=said.append, probe=probe)
    with pytest.raises(RuntimeError):  # another domain: not ours
        check_domain_free(["sim_node"], 42, wait_s=0.0, say=said.append, probe=probe)


def test_a_name_only_this_processs_graph_cache_still_holds_is_not_a_run():
    """The probe kept for the process's life still lists a node long after the wait, but a fresh participant does
    not discover it: a stale cache entry (no process behind it), so the start goes on, saying so, instead of refusing
    every later graph of the process."""
    calls = []

    def probe(names, domain_id, wait_s=0.0, fresh=False):
        calls.append((wait_s, fresh))
        return [] if fresh else ["/sim_node"]

    said: list[str] = []
    check_domain_free(["sim_node", "chunk_executor"], "43", wait_s=25.0, say=said.append, probe=probe)
    assert calls == [(0.0, False), (25.0, False), (0.0, True)]
    assert "stale entry" in said[-1] and "/sim_node" in said[-1]
