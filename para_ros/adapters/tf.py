"""Stand-in for ``tf2_ros``: the real package when installed (robot PC), else :mod:`para_ros.adapters.tf_fallback`.

Node code imports tf only from here::

    from para_ros.adapters.tf import Buffer, TransformListener, LookupException, ...

Both paths have upstream's signatures. ``Buffer`` additionally refuses transforms with non-finite values or a
non-unit quaternion, returns False from ``set_transform*`` for them and keeps the reason in ``last_rejection`` /
``rejections_by_child`` (a thin subclass of upstream's Buffer on a robot PC), so a node can report why a lookup fails.
Upstream is the contract both paths follow; where upstream says nothing back, the subclass finds out itself:

* data older than the cache window (tf2's ``TF_OLD_DATA``): upstream's ``set_transform`` returns None and drops it
  inside C++, so the subclass compares the stamp with the newest one it handed over for that child frame BEFORE
  handing it over, by tf2's own rule (``stamp < newest - cache_time``, see :mod:`para_ros.adapters.tf_fallback`),
  and returns False with the reason, as the fallback does. The data is still handed over, so upstream's cache evolves
  exactly as it would without the subclass (its insert prunes before it refuses);
* the refusal warning goes through ONE logger made in ``__init__``: rclpy keeps the ``throttle_duration_sec`` state
  per logger object, so a logger fetched per refusal would log every one of them.

Set ``PARA_FORCE_TF_FALLBACK=1`` to use the project implementation even where tf2_ros exists (to test it there).
"""

from __future__ import annotations

import os
import threading

from para_ros.adapters.tf_fallback import (
    DEFAULT_CACHE_TIME,
    QUATERNION_NORM_TOLERANCE,
    duration_to_ns,
    old_data_reason,
    time_to_ns,
    transform_rejection_reason,
)
from para_ros.adapters.transforms import transform_to_matrix

_upstream = None
if os.environ.get("PARA_FORCE_TF_FALLBACK") != "1":
    try:
        import tf2_ros as _upstream
    except ImportError:
        _upstream = None

USING_UPSTREAM_TF2 = _upstream is not None

if USING_UPSTREAM_TF2:
    import rclpy.logging
    from rclpy.duration import Duration
    from tf2_ros import (  # noqa: F401
        ConnectivityException,
        ExtrapolationException,
        InvalidArgumentException,
        LookupException,
        StaticTransformBroadcaster,
        TimeoutException,
        TransformBroadcaster,
        TransformException,
        TransformListener,
    )

    class Buffer(_upstream.Buffer):
        """Upstream ``tf2_ros.Buffer`` plus the project's input check and age check (see module docstring)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            cache_time = kwargs.get("cache_time", args[0] if args else None)  # upstream: Buffer(cache_time, node)
            self.cache_time_ns = duration_to_ns(DEFAULT_CACHE_TIME if cache_time is None else cache_time)
            self.last_rejection: str | None = None
            self.rejections_by_child: dict[str, str] = {}
            self.rejected_count = 0
            self._newest_ns: dict[str, int] = {}  # child frame -> newest dynamic stamp handed to upstream
            self._age_lock = threading.Lock()  # the listener may insert from several threads
            self._logger = rclpy.logging.get_logger("para_tf_buffer")  # once: throttling lives in the logger

        def _reject(self, child: str, reason: str) -> bool:
            self.last_rejection = reason
            self.rejections_by_child[child] = reason
            self.rejected_count += 1
            self._logger.warning(f"refused transform: {reason}", throttle_duration_sec=5.0)
            return False

        def set_transform(self, transform, authority: str) -> bool:
            child = transform.child_frame_id.lstrip("/")
            reason = transform_rejection_reason(transform)
            if reason is not None:
                return self._reject(child, reason)
            stamp_ns = time_to_ns(transform.header.stamp)
            with self._age_lock:
                newest_ns = self._newest_ns.get(child)
                too_old = newest_ns is not None and stamp_ns < newest_ns - self.cache_time_ns
                super().set_transform(transform, authority)  # upstream prunes, and drops old data itself
                if not too_old:
                    self._newest_ns[child] = stamp_ns if newest_ns is None else max(newest_ns, stamp_ns)
            if too_old:
                return self._reject(
                    child,
                    old_data_reason(
                        transform.header.frame_id.lstrip("/"), child, stamp_ns, newest_ns, self.cache_time_ns
                    ),
                )
            self.rejections_by_child.pop(child, None)
            return True

        def set_transform_static(self, transform, authority: str) -> bool:
            child = transform.child_frame_id.lstrip("/")
            reason = transform_rejection_reason(transform)
            if reason is not None:
                return self._reject(child, reason)
            with self._age_lock:
                super().set_transform_static(transform, authority)
                self._newest_ns.pop(child, None)  # upstream replaces a dynamic frame's history by a static one
            self.rejections_by_child.pop(child, None)
            return True

        def lookup_matrix(self, target_frame: str, source_frame: str, time, timeout: Duration = Duration()):
            """``lookup_transform`` as a (4, 4) float64 ``T_target_source`` (the fallback's API; same exceptions)."""

            return transform_to_matrix(self.lookup_transform(target_frame, source_frame, time, timeout))

        def clear(self) -> None:
            """Forget every transform (upstream does this on a backwards jump of time), and the newest stamps."""
            with self._age_lock:
                super().clear()
                self._newest_ns.clear()
else:
    from para_ros.adapters.tf_fallback import (  # noqa: F401
        Buffer,
        ConnectivityException,
        ExtrapolationException,
        InvalidArgumentException,
        LookupException,
        StaticTransformBroadcaster,
        TimeoutException,
        TransformBroadcaster,
        TransformException,
        TransformListener,
    )

__all__ = [
    "Buffer",
    "TransformListener",
    "TransformBroadcaster",
    "StaticTransformBroadcaster",
    "TransformException",
    "LookupException",
    "ExtrapolationException",
    "ConnectivityException",
    "InvalidArgumentException",
    "TimeoutException",
    "USING_UPSTREAM_TF2",
    "QUATERNION_NORM_TOLERANCE",
    "transform_rejection_reason",
]
