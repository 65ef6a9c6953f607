"""Client side of the sim node's task interface, shared by ``para-sim eval`` and ``para-sim record``: a blocking
service call for a node whose executor spins in another thread, and the task reset (``task_seed`` parameter, then
``/sim_node/reset_task``)."""

from __future__ import annotations

import json
import time


def call_service(client, request=None, timeout_s: float = 10.0):
    """Call ``client`` and wait for the answer (the node is spun by another thread); RuntimeError on a timeout."""
    if not client.wait_for_service(timeout_sec=timeout_s):
        raise RuntimeError(f"{client.srv_name} is not available after {timeout_s} s (did sim_node start?)")
    future = client.call_async(request if request is not None else client.srv_type.Request())
    deadline = time.monotonic() + timeout_s
    while not future.done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{client.srv_name} did not answer within {timeout_s} s")
        time.sleep(0.01)
    return future.result()


def reset_task(params_client, reset_client, seed: int) -> dict:
    """Set ``task_seed`` on the sim node (``params_client``: its ``set_parameters`` service), call ``reset_task``
    (``reset_client``) and return the layout it applied (the service's JSON answer)."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue  # rclpy: loaded on first use, not on import
    from rcl_interfaces.srv import SetParameters

    req = SetParameters.Request()
    req.parameters = [
        Parameter(name="task_seed", value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=int(seed)))
    ]
    res = call_service(params_client, req)
    if not res.results[0].successful:
        raise RuntimeError(f"sim_node refused task_seed={seed}: {res.results[0].reason}")
    answer = call_service(reset_client)
    if not answer.success:
        raise RuntimeError(f"sim_node refused the reset: {answer.message}")
    return json.loads(answer.message)
