"""The inference node's thread without ROS: a step per wake-up at most max_rate_hz, a step every IDLE_STEP_S without
one, a rate change read at once, and a stop that ends it."""

import threading
import time

from para_ros.inference.inference_thread import IDLE_STEP_S, InferenceThread


def test_wake_ups_faster_than_the_rate_give_at_most_the_rate():
    steps = []
    rate_hz = [20.0]
    thread = InferenceThread(lambda: steps.append(time.monotonic()), lambda: rate_hz[0])
    thread.start()
    try:
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:  # an image every 2 ms: 500 Hz of wake-ups
            thread.wake()
            time.sleep(0.002)
        gaps = [b - a for a, b in zip(steps, steps[1:])]
        assert 5 <= len(steps) <= 21, len(steps)  # at most 20 Hz (+1 at the edge); at least a few on a busy machine
        assert min(gaps) >= 1.0 / rate_hz[0] - 0.005, min(gaps)
        rate_hz[0] = 2.0  # a parameter change: read before the next wait
        thread.wake()
        n = len(steps)
        t_end = time.monotonic() + 1.2
        while time.monotonic() < t_end:
            thread.wake()
            time.sleep(0.002)
        assert len(steps) - n <= 4, len(steps) - n  # 2 Hz now (one step may have been waiting at 20 Hz)
    finally:
        thread.stop()
    assert not thread.is_alive()


def test_without_images_it_steps_every_idle_period_and_stops_at_once():
    steps = []
    stepped = threading.Event()

    def step():
        steps.append(time.monotonic())
        stepped.set()

    thread = InferenceThread(step, lambda: 30.0)
    t0 = time.monotonic()
    thread.start()
    assert stepped.wait(timeout=IDLE_STEP_S + 2.0)  # no wake-up: a step after the idle period (a silent camera named)
    assert steps[0] - t0 >= IDLE_STEP_S - 0.05
    t_stop = time.monotonic()
    thread.stop(timeout_s=5.0)
    assert not thread.is_alive() and time.monotonic() - t_stop < 1.0
    n = len(steps)
    time.sleep(IDLE_STEP_S + 0.1)
    assert len(steps) == n  # stopped: no more steps
