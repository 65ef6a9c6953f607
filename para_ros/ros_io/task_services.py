"""Client side of the sim node's task interface, shared by ``para-sim eval`` and ``para-sim record``: a blocking
service call for a node whose executor spins in another thread, and the task reset (``task_seed`` parameter, then
``/sim_node/reset_task``)."""

from __future__ import annotations

import json
import time


def call_service(client, request=None, timeout_s: float = 10.0, resend_after_s: float | None = None):
    """Call ``client`` and wait for the answer (the node is spun by another thread); RuntimeError on a timeout.

    ``resend_after_s``: for an idempotent request (a Trigger such as the executor's ``~/stop``), send it again when no
    answer came within this long. A request sent just as the server appears can lose its answer (the server's reply
    writer not yet matched with this client's reader); a second request gets one."""
    if not client.wait_for_service(timeout_sec=timeout_s):
        raise RuntimeError(f"{client.srv_name} is not available after {timeout_s} s (did sim_node start?)")
    request = request if request is not None else client.srv_type.Request()
    futures = [client.call_async(request)]
    start = time.monotonic()
    deadline, sent = start + timeout_s, start
    while True:
        done = [f for f in futures if f.done()]
        if done:
            return done[0].result()
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(f"{client.srv_name} did not answer within {timeout_s} s ({len(futures)} request(s))")
        if resend_after_s is not None and now - sent >= resend_after_s:
            futures.append(client.call_async(request))
            sent = now
        time.sleep(0.01)


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
