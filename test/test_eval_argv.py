"""The evaluator's and the monitor's ROS contexts ignore the command's own argv: ``--node-param NODE:NAME:=VALUE``
is for the graph's nodes, and rcl read it as a (deprecated) remap rule of the evaluator itself, with a warning
per parameter."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def test_task_client_does_not_read_the_commands_argv(monkeypatch, capfd):
    from para_ros.deploy.episodes import TaskClient

    monkeypatch.setattr(sys, "argv", ["para-sim", "eval", "--node-param", "inference_node:decoding:=fused"])
    client = TaskClient(np.eye(4))
    try:
        err = capfd.readouterr().err
        assert "remap rule" not in err, err
        assert client.node.get_name() == "para_sim_eval"
    finally:
        client.close()
