"""Stand-in for ``tf2_ros``: the real package when installed (robot PC), else :mod:`para_ros.adapters.tf_fallback`.

Node code imports tf only from here::

    from para_ros.adapters.tf import Buffer, TransformListener, LookupException, ...

Both paths have upstream's signatures. ``Buffer`` additionally refuses transforms with non-finite values or a
non-unit quaternion, returns False from ``set_transform*`` for them and keeps the reason in ``last_rejection`` /
``rejections_by_child`` (a thin subclass of upstream's Buffer on a robot PC), so a node can report why a lookup fails.
Set ``PARA_FORCE_TF_FALLBACK=1`` to use the project implementation even where tf2_ros exists (to test it there).
"""
from __future__ import annotations

import os

from para_ros.adapters.tf_fallback import QUATERNION_NORM_TOLERANCE, transform_rejection_reason

_upstream = None
if os.environ.get("PARA_FORCE_TF_FALLBACK") != "1":
    try:
        import tf2_ros as _upstream
    except ImportError:
        _upstream = None

USING_UPSTREAM_TF2 = _upstream is not None

if USING_UPSTREAM_TF2:
    import rclpy.logging
    from tf2_ros import (ConnectivityException, ExtrapolationException, InvalidArgumentException,  # noqa: F401
                         LookupException, StaticTransformBroadcaster, TimeoutException, TransformBroadcaster,
                         TransformException, TransformListener)

    class Buffer(_upstream.Buffer):
        """Upstream ``tf2_ros.Buffer`` plus the project's input check (see module docstring)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.last_rejection: str | None = None
            self.rejections_by_child: dict[str, str] = {}
            self.rejected_count = 0

        def _accept(self, transform) -> bool:
            reason = transform_rejection_reason(transform)
            child = transform.child_frame_id.lstrip("/")
            if reason is None:
                self.rejections_by_child.pop(child, None)
                return True
            self.last_rejection = reason
            self.rejections_by_child[child] = reason
            self.rejected_count += 1
            rclpy.logging.get_logger("para_tf_buffer").warning(f"refused transform: {reason}",
                                                               throttle_duration_sec=5.0)
            return False

        def set_transform(self, transform, authority: str) -> bool:
            if not self._accept(transform):
                return False
            super().set_transform(transform, authority)
            return True

        def set_transform_static(self, transform, authority: str) -> bool:
            if not self._accept(transform):
                return False
            super().set_transform_static(transform, authority)
            return True
else:
    from para_ros.adapters.tf_fallback import (Buffer, ConnectivityException, ExtrapolationException,  # noqa: F401
                                               InvalidArgumentException, LookupException, StaticTransformBroadcaster,
                                               TimeoutException, TransformBroadcaster, TransformException,
                                               TransformListener)

__all__ = ["Buffer", "TransformListener", "TransformBroadcaster", "StaticTransformBroadcaster", "TransformException",
           "LookupException", "ExtrapolationException", "ConnectivityException", "InvalidArgumentException",
           "TimeoutException", "USING_UPSTREAM_TF2", "QUATERNION_NORM_TOLERANCE", "transform_rejection_reason"]
