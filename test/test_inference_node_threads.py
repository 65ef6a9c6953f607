"""inference_node's CPU threads: the ``threads`` parameter reaches torch, and a node process started without
``OMP_WAIT_POLICY`` runs with the passive wait policy and says so in its ready line."""

from __future__ import annotations

import pytest
import torch
from test_inference_node import SEED, running_inference_node

pytestmark = pytest.mark.ros


def test_threads_parameter_sets_torchs_threads():
    from ros_helpers import in_process_inference_node

    before = torch.get_num_threads()
    try:
        for node in in_process_inference_node("inference_threads_test", random_seed=SEED, device="cpu", threads=1):
            assert torch.get_num_threads() == 1
            assert (node.cpu_threads.threads, node.cpu_threads.threads_why) == (1, "asked for")
    finally:
        torch.set_num_threads(before)


def test_node_process_defaults_to_the_passive_wait_policy(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # the node's process gets no policy from us
    output: list[str] = []
    with running_inference_node(f"random_seed:={SEED}", "threads:=1", output=output):
        pass
    ready = [line for line in output[0].splitlines() if "ready: model" in line]
    assert ready, output[0][-2000:]
    assert "CPU threads 1 (asked for); OpenMP wait policy passive" in ready[0]  # para_ros.nodes set it
    assert "on cpu (precision fp32 (this CPU has" in ready[0]  # and whether it has bf16 instructions
