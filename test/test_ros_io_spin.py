"""``spin_until`` on real rclpy: a condition made true by a real subscription's callback ends the spin; a deadline
that passes ends it with False; callback errors follow ``on_error``; a node is spun and released again."""

from __future__ import annotations

import threading
import time

import pytest

from para_ros.ros_io.spin import spin_until

pytestmark = pytest.mark.ros


@pytest.fixture
def ros():
    """(context, listener node, talker node, executor spinning the listener) on a private rclpy context; a thread
    publishes ``hello <n>`` on ``/spin_until_test`` every 20 ms while ``talking`` is set."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    listener = rclpy.create_node("spin_until_listener", context=context)
    talker = rclpy.create_node("spin_until_talker", context=context)
    pub = talker.create_publisher(String, "/spin_until_test", 10)
    talking = threading.Event()
    quit_ = threading.Event()

    def talk():
        n = 0
        while not quit_.is_set():
            if talking.is_set():
                pub.publish(String(data=f"hello {n}"))
                n += 1
            time.sleep(0.02)

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)
    yield context, listener, executor, talking
    quit_.set()
    thread.join(timeout=2.0)
    executor.shutdown()
    listener.destroy_node()
    talker.destroy_node()
    context.try_shutdown()


def subscribe(node, received: list, fail_first: int = 0):
    """Subscribe ``node`` to the test topic; the first ``fail_first`` callbacks raise RuntimeError."""
    from std_msgs.msg import String

    calls = [0]

    def on_msg(msg):
        calls[0] += 1
        if calls[0] <= fail_first:
            raise RuntimeError(f"callback failure {calls[0]}")
        received.append(msg.data)

    return node.create_subscription(String, "/spin_until_test", on_msg, 10)


def test_a_condition_made_true_by_a_subscription_ends_the_spin(ros):
    _, listener, executor, talking = ros
    received: list[str] = []
    subscribe(listener, received)
    assert spin_until(executor, lambda: bool(received), timeout_s=0.3) is False  # nobody talks yet
    assert received == []
    talking.set()
    t0 = time.monotonic()
    assert spin_until(executor, lambda: len(received) >= 3, timeout_s=30.0) is True
    assert len(received) >= 3 and received[0].startswith("hello ")
    assert time.monotonic() - t0 < 30.0


def test_a_deadline_that_passes_returns_false_after_the_deadline(ros):
    _, _, executor, _ = ros
    checks = [0]

    def never():
        checks[0] += 1
        return False

    t0 = time.monotonic()
    assert spin_until(executor, never, timeout_s=0.5, period_s=0.05) is False
    elapsed = time.monotonic() - t0
    assert elapsed >= 0.5  # never before the deadline
    assert checks[0] >= 2  # checked between the spins, not once
    assert spin_until(executor, never, timeout_s=0.0) is False  # a deadline already passed: no spin at all


def test_a_condition_already_true_returns_at_once_even_with_no_time(ros):
    _, _, executor, _ = ros
    assert spin_until(executor, lambda: True, timeout_s=0.0) is True


def test_a_node_is_spun_and_released_again(ros):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    context, _, _, talking = ros
    node = rclpy.create_node("spin_until_own_node", context=context)
    try:
        received: list[str] = []
        subscribe(node, received)
        talking.set()
        assert spin_until(node, lambda: bool(received), timeout_s=30.0) is True
        other = SingleThreadedExecutor(context=context)
        assert other.add_node(node) is True  # spin_until's own executor let go of it
        other.shutdown()
    finally:
        node.destroy_node()


@pytest.mark.parametrize("on_error", ["raise", "continue", "stop"])
def test_a_failing_callback_follows_on_error(ros, on_error):
    _, listener, executor, talking = ros
    received: list[str] = []
    subscribe(listener, received, fail_first=2)
    talking.set()
    if on_error == "raise":
        with pytest.raises(RuntimeError, match="callback failure 1"):
            spin_until(executor, lambda: bool(received), timeout_s=30.0, on_error=on_error)
    elif on_error == "continue":  # the two failures are skipped, the third message makes it true
        assert spin_until(executor, lambda: bool(received), timeout_s=30.0, on_error=on_error) is True
    else:
        assert spin_until(executor, lambda: bool(received), timeout_s=30.0, on_error=on_error) is False
        assert received == []


def test_a_context_shut_down_under_the_spin_ends_it_as_the_condition(ros):
    """The background threads' use: spin until the context is shut down by another thread."""
    context, _, executor, _ = ros
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(spin_until(executor, lambda: not context.ok(), period_s=0.05, on_error="raise"))
    )
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()  # still spinning: nothing ends it but the shutdown
    context.try_shutdown()
    thread.join(timeout=10.0)
    assert not thread.is_alive() and result == [True]


def test_bad_arguments_are_refused(ros):
    _, _, executor, _ = ros
    with pytest.raises(ValueError, match="on_error"):
        spin_until(executor, lambda: True, on_error="ignore")
    with pytest.raises(ValueError, match="period_s"):
        spin_until(executor, lambda: True, period_s=0.0)


def _spins_in(executor, seconds: float, timeout_s: float = 0.1) -> int:
    """How many times ``executor.spin_once(timeout_s)`` returned within ``seconds``."""
    spins, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            executor.spin_once(timeout_sec=timeout_s)
        except Exception:  # noqa: BLE001 - a handler's error is not what is counted here
            pass
        spins += 1
    return spins


def test_a_multithreaded_executor_is_refused_because_a_busy_thread_pool_makes_it_spin_hot(ros):
    """The reason for the refusal, on real rclpy: once its thread pool is busy (here two callbacks that block; on a
    loaded machine, pool threads that are not scheduled), a MultiThreadedExecutor's ``spin_once`` hands the task
    queued behind them out again at every call without waiting, so it returns hundreds of times a second instead of
    about once per message (and its list of handlers grows with every return); a single-threaded executor waits in
    the blocking callback. (If an rclpy release stops doing this, the first assertion fails and the refusal can be
    reconsidered.)"""
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from std_msgs.msg import String

    context, _, _, talking = ros
    node = rclpy.create_node("spin_until_busy_pool", context=context)
    release = threading.Event()
    node.create_subscription(  # every message's callback blocks until released: the pool of two fills at once
        String, "/spin_until_test", lambda _msg: release.wait(5.0), 10, callback_group=ReentrantCallbackGroup()
    )
    multi = MultiThreadedExecutor(num_threads=2, context=context)
    multi.add_node(node)
    try:
        talking.set()
        wakes = _spins_in(multi, 1.0)
    finally:
        talking.clear()
        release.set()
        multi.shutdown(timeout_sec=5.0)
    assert wakes > 100, f"{wakes} spins in 1 s: the multithreaded executor no longer re-queues a busy group's entities"

    with pytest.raises(TypeError, match="single-threaded executors only"):
        spin_until(MultiThreadedExecutor(num_threads=2, context=context), lambda: False, 0.1)

    single = SingleThreadedExecutor(context=context)
    single.add_node(node)
    release.clear()
    try:
        talking.set()
        threading.Timer(1.0, release.set).start()  # the blocking callback ends after 1 s
        wakes_single = _spins_in(single, 1.0)
    finally:
        talking.clear()
        release.set()
        single.shutdown(timeout_sec=5.0)
        node.destroy_node()
    assert wakes_single <= 30, f"{wakes_single} spins in 1 s of a single-threaded executor"
