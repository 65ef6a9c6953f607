"""The upstream-tf2_ros path of ``para_ros.adapters.tf`` where tf2_ros is not installed: its ``Buffer`` subclass over
a stand-in for ``tf2_ros`` that behaves as upstream does towards it.

The stand-in stores by tf2's rules (it wraps the fallback buffer, which ``test_adapters_tf_buffer`` holds to tf2's
cache rule) and, like upstream's Python ``tf2_ros.Buffer``, returns None from ``set_transform*`` whatever happened
inside. So everything the subclass reports (False and a reason for data older than the cache window, one throttled
warning for a burst of refusals) is its own doing, as on a robot PC with real tf2_ros.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from rclpy.duration import Duration
from test_adapters_tf_buffer import at, check_cache_window_rule, random_T, stamped

from para_ros.adapters import tf_fallback

pytestmark = pytest.mark.ros  # rclpy's Time/Duration and logging (no DDS traffic)

TF_ADAPTER = Path(__file__).resolve().parent.parent / "para_ros" / "adapters" / "tf.py"


class UpstreamLikeBuffer:
    """What the subclass sees of ``tf2_ros.Buffer``: tf2's storage, ``set_transform*`` returning None."""

    def __init__(self, cache_time=None, node=None):
        self._core = tf_fallback.Buffer(cache_time, node)
        self._core._logger = __import__("rclpy.logging").logging.get_logger("stand_in_tf2")  # not para_tf_buffer
        self.handed_over: list[float] = []

    def set_transform(self, transform, authority):
        self.handed_over.append(tf_fallback.time_to_ns(transform.header.stamp) / 1e9)
        self._core.set_transform(transform, authority)  # upstream: C++ prunes, maybe drops (TF_OLD_DATA), None

    def set_transform_static(self, transform, authority):
        self._core.set_transform_static(transform, authority)

    def clear(self):
        self._core.clear()

    def lookup_transform(self, *args, **kwargs):
        return self._core.lookup_transform(*args, **kwargs)

    def can_transform(self, *args, **kwargs):
        return self._core.can_transform(*args, **kwargs)


@pytest.fixture
def upstream_tf(monkeypatch):
    """``para_ros/adapters/tf.py`` loaded (as a separate module) with the stand-in as ``tf2_ros``."""
    fake = types.ModuleType("tf2_ros")
    fake.Buffer = UpstreamLikeBuffer
    for name in (
        "ConnectivityException",
        "ExtrapolationException",
        "InvalidArgumentException",
        "LookupException",
        "StaticTransformBroadcaster",
        "TimeoutException",
        "TransformBroadcaster",
        "TransformException",
        "TransformListener",
    ):
        setattr(fake, name, getattr(tf_fallback, name))
    monkeypatch.setitem(sys.modules, "tf2_ros", fake)
    monkeypatch.delenv("PARA_FORCE_TF_FALLBACK", raising=False)
    spec = importlib.util.spec_from_file_location("para_tf_over_stand_in_upstream", TF_ADAPTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.USING_UPSTREAM_TF2 and issubclass(module.Buffer, UpstreamLikeBuffer)
    return module


def test_upstream_path_follows_tf2s_cache_window_and_reports_old_data(upstream_tf):
    check_cache_window_rule(upstream_tf.Buffer)


def test_upstream_path_hands_old_data_over_and_reports_it_like_the_fallback(upstream_tf):
    results = {}
    for name, buffer_class in (("upstream", upstream_tf.Buffer), ("fallback", tf_fallback.Buffer)):
        buf = buffer_class(Duration(seconds=1))  # positional cache_time, as upstream allows
        accepted = [buf.set_transform(stamped("base", "arm", random_T(1), t), "test") for t in (10.0, 12.0, 10.5)]
        results[name] = (accepted, buf.last_rejection, dict(buf.rejections_by_child), buf.rejected_count)
        if name == "upstream":
            # handed over anyway: upstream's own cache evolves as it would without the subclass
            assert buf.handed_over == [10.0, 12.0, 10.5]
    assert results["upstream"] == results["fallback"]
    accepted, reason, by_child, count = results["upstream"]
    assert accepted == [True, True, False] and count == 1
    assert "old data in TF from 'base' to 'arm' (TF_OLD_DATA)" in reason and by_child == {"arm": reason}


def test_upstream_path_forgets_the_newest_stamp_on_clear_and_for_a_static_frame(upstream_tf):
    buf = upstream_tf.Buffer(cache_time=Duration(seconds=1))
    assert buf.set_transform(stamped("base", "arm", random_T(1), 100.0), "test")
    buf.clear()  # upstream clears on a jump back in time: older data is welcome again
    assert buf.set_transform(stamped("base", "arm", random_T(1), 5.0), "test")
    assert buf.set_transform_static(stamped("base", "arm", random_T(1)), "test")  # re-typed: history replaced
    assert buf.set_transform(stamped("base", "arm", random_T(1), 1.0), "test")
    np.testing.assert_allclose(
        tf_fallback.time_to_ns(buf.lookup_transform("base", "arm", at(1.0)).header.stamp), 1_000_000_000
    )


@pytest.mark.parametrize("path", ["upstream", "fallback"])
def test_a_burst_of_refusals_logs_one_throttled_warning(upstream_tf, capfd, path):
    """rclpy keeps the throttle state per logger object: one logger per buffer, so 5 refusals in a row log once."""
    buf = (upstream_tf.Buffer if path == "upstream" else tf_fallback.Buffer)()
    capfd.readouterr()
    for k in range(5):
        bad = stamped("base", f"cam{k}", np.eye(4), 1.0)
        bad.transform.rotation.w = 2.0
        assert buf.set_transform(bad, "test") is False
    lines = [line for line in capfd.readouterr().err.splitlines() if "[para_tf_buffer]" in line]
    assert len(lines) == 1 and "non-unit quaternion" in lines[0], lines
    assert buf.rejected_count == 5


def test_upstream_path_lookup_matrix_is_its_lookup_transform_as_a_matrix(upstream_tf):
    """The nodes call ``lookup_matrix``, which upstream's Buffer does not have: the subclass converts its
    ``lookup_transform``, with and without a timeout, and passes its exceptions on."""
    from para_ros.adapters.transforms import transform_to_matrix

    buf = upstream_tf.Buffer(cache_time=Duration(seconds=10))
    T = random_T(4)
    for t in (1.0, 2.0):
        assert buf.set_transform(stamped("base", "arm", T, t), "test")
    want = transform_to_matrix(buf.lookup_transform("base", "arm", at(1.5)))
    np.testing.assert_allclose(buf.lookup_matrix("base", "arm", at(1.5)), want, atol=1e-12)
    np.testing.assert_allclose(buf.lookup_matrix("base", "arm", at(1.5), Duration(seconds=0.01)), want, atol=1e-12)
    np.testing.assert_allclose(want, T, atol=1e-9)
    with pytest.raises(tf_fallback.ExtrapolationException):
        buf.lookup_matrix("base", "arm", at(3.0))
