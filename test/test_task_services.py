"""``call_service``: an idempotent request is sent again when its answer does not come, and the first answer wins;
without ``resend_after_s`` one request is sent and a lost answer is a timeout naming the service."""

from __future__ import annotations

import threading

import pytest
from rclpy.task import Future

from para_ros.ros_io.task_services import call_service


class LosingClient:
    """rclpy's client interface (``wait_for_service``, ``call_async``, ``srv_name``, ``srv_type``) over real rclpy
    futures: the answers to the first ``lose`` requests never come (a reply lost in discovery); later ones come at
    once."""

    srv_name = "/chunk_executor/stop"

    class srv_type:  # noqa: N801 - rclpy's attribute name
        @staticmethod
        def Request():  # noqa: N802 - rclpy's method name
            return "request"

    def __init__(self, lose: int):
        self.lose, self.requests = lose, []

    def wait_for_service(self, timeout_sec=None):
        return True

    def call_async(self, request):
        self.requests.append(request)
        future = Future()
        if len(self.requests) > self.lose:
            threading.Timer(0.02, future.set_result, args=(f"answer {len(self.requests)}",)).start()
        return future


def test_a_lost_answer_is_asked_again_and_the_first_answer_returned():
    client = LosingClient(lose=2)
    assert call_service(client, timeout_s=5.0, resend_after_s=0.1) == "answer 3"
    assert client.requests == ["request"] * 3


def test_without_resending_a_lost_answer_is_a_timeout_naming_the_service():
    client = LosingClient(lose=1)
    with pytest.raises(RuntimeError, match=r"/chunk_executor/stop did not answer within 0.3 s \(1 request\(s\)\)"):
        call_service(client, timeout_s=0.3)
    assert len(client.requests) == 1
