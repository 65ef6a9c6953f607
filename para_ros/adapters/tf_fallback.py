"""The project's small implementation of the tf2_ros Python contract, used where ``tf2_ros`` is not installed.

Same names and signatures as upstream tf2_ros (``Buffer.lookup_transform(target_frame, source_frame, time,
timeout)``, ``TransformListener(buffer, node, *, spin_thread, qos, static_qos)``, broadcasters with
``sendTransform``), so node code is identical on a robot PC (real tf2_ros) and here (PyPI wheels, no tf2).
Do not import this module from node code: import :mod:`para_ros.adapters.tf`, which picks upstream when present.

Semantics kept from tf2:

* frames form a tree (each child has one parent); a lookup chains through the closest common ancestor;
* ``lookup_transform(target, source, t)`` returns ``T_target_source`` (maps points in ``source`` to ``target``):
  ``header.frame_id = target``, ``child_frame_id = source``;
* static transforms hold at every time; dynamic ones are interpolated between the two stamps that bracket the
  request (linear translation, slerp rotation); ``Time()`` (0 ns) means the latest time all dynamic links share;
* a request after the newest or before the oldest stamp of a link raises :class:`ExtrapolationException` (stamps are
  integer nanoseconds, so the comparison is exact, as in tf2); an unknown frame raises :class:`LookupException`;
  frames in different trees raise :class:`ConnectivityException`;
* the cache window, in tf2's order (``TimeCache::insertData`` of tf2 ``cache.cpp``): with ``L`` the newest stamp a
  link holds BEFORE an insert, the insert (1) first drops every stamp older than ``L - cache_time`` (strictly: a stamp
  exactly ``cache_time`` older stays), (2) then refuses the new data if it is older than that same bound (tf2's
  ``TF_OLD_DATA``; ``set_transform`` returns False and says why; the drop of step 1 has happened anyway), (3) else
  stores it. So the drop lags one insert behind a new newest stamp: inserting 5.0 s on top of 4.5 s with a 2 s cache
  leaves 2.5 s in the buffer until the next insert. :func:`old_data_reason` is the refusal's text on both paths.

Where this differs from tf2 (input a correct publisher never sends): two different transforms with the same stamp
replace each other here (tf2 keeps both and, depending on the lookup, answers with either); a frame that changes its
parent starts an empty history here (tf2 keeps one history per child with the old parent's entries in it).

Added on top (also applied to upstream by :mod:`para_ros.adapters.tf`): transforms with empty or equal frame ids,
non-finite values or a quaternion whose norm is off 1 by more than :data:`QUATERNION_NORM_TOLERANCE` are refused and
not stored; the reason is kept in ``Buffer.last_rejection`` and per child frame in ``Buffer.rejections_by_child`` so a
node can say *why* a lookup fails ("non-unit quaternion in TF from 'base' to 'scene_cam' ...").
"""

from __future__ import annotations

import bisect
import math
import threading
import time as _time
from dataclasses import dataclass, field
from threading import Thread

import numpy as np
import rclpy.logging
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import TransformStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from tf2_msgs.msg import TFMessage

from para_ros.adapters.transforms import invert_matrix, make_matrix, matrix_to_quaternion, quaternion_slerp
from para_ros.stamps import set_stamp, stamp_to_ns

DEFAULT_TF_TOPIC = "/tf"
DEFAULT_STATIC_TF_TOPIC = "/tf_static"
DEFAULT_CACHE_TIME = Duration(seconds=10)
# A quaternion whose norm differs from 1 by more than this is refused (tf2 itself only refuses |q|^2 off by 0.01).
QUATERNION_NORM_TOLERANCE = 1e-3
_LOGGER_NAME = "para_tf_buffer"
_MAX_TREE_DEPTH = 1000


class TransformException(Exception):
    """Base of every tf error (same hierarchy as tf2_ros)."""


class LookupException(TransformException):
    """A frame named in the request is not in the buffer."""


class ConnectivityException(TransformException):
    """The two frames exist but are in different trees."""


class ExtrapolationException(TransformException):
    """The requested time is outside the data held for a link of the chain."""


class InvalidArgumentException(TransformException):
    """A frame id is empty or starts with '/', or the time has the wrong type."""


class TimeoutException(TransformException):
    """Kept for API parity with tf2_ros; lookups here raise the underlying error after the timeout instead."""


def transform_rejection_reason(transform: TransformStamped) -> str | None:
    """Why ``transform`` must not enter a buffer, or None if it is fine.

    Checks: both frame ids set and different, finite translation/rotation, unit quaternion (within
    :data:`QUATERNION_NORM_TOLERANCE`).
    """
    parent = transform.header.frame_id.lstrip("/")
    child = transform.child_frame_id.lstrip("/")
    t, q = transform.transform.translation, transform.transform.rotation
    x, y, z, w = q.x, q.y, q.z, q.w
    norm = math.sqrt(x * x + y * y + z * z + w * w)  # nan or inf when a rotation value is
    if (
        parent
        and child
        and parent != child
        and math.isfinite(t.x + t.y + t.z)
        and abs(norm - 1.0) <= QUATERNION_NORM_TOLERANCE
    ):
        return None  # the usual case, decided without building any text
    where = f"in TF from '{parent}' to '{child}'"
    if not parent or not child:
        return f"empty frame id {where}; set both header.frame_id and child_frame_id"
    if parent == child:
        return f"self transform {where}; parent and child frame must differ"
    if not all(math.isfinite(v) for v in (t.x, t.y, t.z, x, y, z, w)):
        return (
            f"non-finite value {where}: translation ({t.x}, {t.y}, {t.z}), rotation ({x}, {y}, {z}, {w}); "
            "fix the publisher"
        )
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        return (
            f"non-unit quaternion {where}: (x, y, z, w) = ({x}, {y}, {z}, {w}) has norm {norm:.6f}, must be 1 "
            f"within {QUATERNION_NORM_TOLERANCE}; normalise it in the publisher"
        )
    return None  # finite translation values whose sum overflowed the quick check


def old_data_reason(parent: str, child: str, stamp_ns: int, newest_ns: int, cache_time_ns: int) -> str:
    """Why a dynamic transform at ``stamp_ns`` is refused when its child's newest stamp is ``newest_ns`` (tf2's
    ``TF_OLD_DATA``: older than ``newest - cache_time``); the same text on the upstream and the fallback path."""
    return (
        f"old data in TF from '{parent}' to '{child}' (TF_OLD_DATA): stamp {_seconds(stamp_ns)} s is more than the "
        f"cache time {_seconds(cache_time_ns)} s before the newest {_seconds(newest_ns)} s; a publisher's clock "
        "jumped back or its data arrives too late"
    )


def time_to_ns(time) -> int:
    """Nanoseconds of an ``rclpy.time.Time`` or a ``builtin_interfaces/Time`` message."""
    if isinstance(time, Time):
        return time.nanoseconds
    if isinstance(time, TimeMsg):
        return stamp_to_ns(time)
    raise InvalidArgumentException(f"time must be rclpy.time.Time or builtin_interfaces.msg.Time, got {type(time)!r}")


def duration_to_ns(duration) -> int:
    """Nanoseconds of an ``rclpy.duration.Duration``, a ``builtin_interfaces/Duration`` or seconds (float)."""
    if isinstance(duration, Duration):
        return duration.nanoseconds
    if isinstance(duration, DurationMsg):
        return stamp_to_ns(duration)
    if isinstance(duration, (int, float)):
        return int(round(float(duration) * 1e9))
    raise InvalidArgumentException(f"timeout must be rclpy.duration.Duration, got {type(duration)!r}")


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.6f}"


@dataclass
class _Link:
    """The transform(s) from ``parent`` to one child frame: one entry if static, a time-sorted history if dynamic."""

    parent: str
    static: bool
    stamps_ns: list[int] = field(default_factory=list)
    translations: list[tuple[float, float, float]] = field(default_factory=list)  # metres
    quaternions: list[tuple[float, float, float, float]] = field(default_factory=list)  # xyzw, unit
    static_matrix: np.ndarray | None = None  # (4, 4) T_parent_child of a static link, made once at insert


class Buffer:
    """Stores transforms from ``/tf`` and ``/tf_static`` and answers lookups between any two connected frames.

    Thread-safe: the listener's callbacks insert while node code looks up (one condition variable guards all state).
    """

    def __init__(self, cache_time: Duration | None = None, node=None) -> None:
        """
        :param cache_time: how long (before the newest stamp of each link) dynamic data is kept, by tf2's rule (module
            docstring); default 10 s, as tf2's ``BufferCore::DEFAULT_CACHE_TIME``.
        :param node: accepted for API parity (upstream serves ``tf2_frames`` on it); unused here.
        """
        self.cache_time_ns = duration_to_ns(DEFAULT_CACHE_TIME if cache_time is None else cache_time)
        if self.cache_time_ns <= 0:
            raise ValueError(
                f"cache_time is {self.cache_time_ns} ns; give a positive Duration such as Duration(seconds=10)"
            )
        self._links: dict[str, _Link] = {}
        # (target, source) -> the child frames whose links a look-up chains (source side, target side): the tree's
        # shape changes rarely, so it is walked once per pair; emptied whenever a link appears, is replaced or goes.
        self._chains: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._cond = threading.Condition(threading.RLock())
        self.last_rejection: str | None = None
        self.rejections_by_child: dict[str, str] = {}
        self.rejected_count = 0
        self._logger = rclpy.logging.get_logger(_LOGGER_NAME)

    # ------------------------------------------------------------------ inserting
    def set_transform(self, transform: TransformStamped, authority: str) -> bool:
        """Insert a dynamic transform; returns False (and records why) if it was refused.

        :param transform: ``T_parent_child`` with ``header.frame_id`` = parent and a stamp.
        :param authority: who sent it (kept for API parity).
        """
        return self._insert(transform, authority, static=False)

    def set_transform_static(self, transform: TransformStamped, authority: str) -> bool:
        """Insert a static transform (valid at all times); returns False (and records why) if it was refused."""
        return self._insert(transform, authority, static=True)

    def _reject(self, child: str, reason: str) -> bool:
        with self._cond:
            self.last_rejection = reason
            self.rejections_by_child[child] = reason
            self.rejected_count += 1
        self._logger.warning(f"refused transform: {reason}", throttle_duration_sec=5.0)
        return False

    def _insert(self, transform: TransformStamped, authority: str, static: bool) -> bool:
        parent = transform.header.frame_id.lstrip("/")
        child = transform.child_frame_id.lstrip("/")
        reason = transform_rejection_reason(transform)
        if reason is not None:
            return self._reject(child, reason)
        t, q = transform.transform.translation, transform.transform.rotation
        translation = (float(t.x), float(t.y), float(t.z))
        norm = math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w)  # within tolerance of 1 (checked above)
        quaternion = (q.x / norm, q.y / norm, q.z / norm, q.w / norm)
        stamp_ns = 0 if static else time_to_ns(transform.header.stamp)
        with self._cond:
            link = self._links.get(child)
            if link is None or link.parent != parent or link.static != static:
                link = _Link(parent=parent, static=static)  # a re-parented or re-typed frame starts afresh
                self._links[child] = link
                self._chains.clear()
            if static:
                link.stamps_ns, link.translations, link.quaternions = [0], [translation], [quaternion]
                link.static_matrix = make_matrix(translation, quaternion)
            else:
                if link.stamps_ns:  # tf2's order (module docstring): prune against the newest held, then refuse
                    newest_ns = link.stamps_ns[-1]
                    bound_ns = newest_ns - self.cache_time_ns
                    keep_from = bisect.bisect_left(link.stamps_ns, bound_ns)  # stamps < bound go, == bound stays
                    if keep_from:
                        del link.stamps_ns[:keep_from], link.translations[:keep_from], link.quaternions[:keep_from]
                    if stamp_ns < bound_ns:
                        return self._reject(
                            child, old_data_reason(parent, child, stamp_ns, newest_ns, self.cache_time_ns)
                        )
                i = bisect.bisect_left(link.stamps_ns, stamp_ns)
                if i < len(link.stamps_ns) and link.stamps_ns[i] == stamp_ns:  # same stamp: newest message wins
                    link.translations[i], link.quaternions[i] = translation, quaternion
                else:
                    link.stamps_ns.insert(i, stamp_ns)
                    link.translations.insert(i, translation)
                    link.quaternions.insert(i, quaternion)
            self.rejections_by_child.pop(child, None)
            self._cond.notify_all()
        return True

    def clear(self) -> None:
        """Forget the history of every dynamic transform; static transforms stay (tf2's ``BufferCore::clear``: each
        frame's cache is cleared, and ``StaticCache::clearList`` does nothing). Upstream does this on a backwards jump
        of time: dropping the statics too would lose a ``/tf_static`` that was published once (transient local) for
        good, and no camera on a static mount could be placed again."""
        with self._cond:
            for child in [c for c, link in self._links.items() if not link.static]:
                del self._links[child]
            self._chains.clear()

    # ------------------------------------------------------------------ looking up
    def lookup_transform(
        self, target_frame: str, source_frame: str, time, timeout: Duration = Duration()
    ) -> TransformStamped:
        """Get the transform that maps points in ``source_frame`` to ``target_frame`` at ``time``.

        :param target_frame: frame to transform into (becomes ``header.frame_id``).
        :param source_frame: frame of the input (becomes ``child_frame_id``).
        :param time: ``rclpy.time.Time``; ``Time()`` means the latest time common to the chain.
        :param timeout: how long to wait for the data to arrive (default: do not wait).
        :raises LookupException, ConnectivityException, ExtrapolationException, InvalidArgumentException:
        """
        T, stamp_ns = self._wait_for(target_frame, source_frame, time, timeout)
        return _make_stamped(T, target_frame, source_frame, stamp_ns)

    def lookup_matrix(self, target_frame: str, source_frame: str, time, timeout: Duration = Duration()) -> np.ndarray:
        """:meth:`lookup_transform` as the (4, 4) float64 ``T_target_source`` it is computed as: the same numbers
        without the round trip through a quaternion and a ``TransformStamped``. Same exceptions."""
        return self._wait_for(target_frame, source_frame, time, timeout)[0]

    def can_transform(
        self,
        target_frame: str,
        source_frame: str,
        time,
        timeout: Duration = Duration(),
        return_debug_tuple: bool = False,
    ):
        """True if :meth:`lookup_transform` would succeed (waiting up to ``timeout`` for data).

        :param return_debug_tuple: return ``(ok, error_message)`` instead of a bool, like upstream.
        """
        try:
            self._wait_for(target_frame, source_frame, time, timeout)
        except TransformException as error:
            return (False, str(error)) if return_debug_tuple else False
        return (True, "") if return_debug_tuple else True

    def all_frames_as_string(self) -> str:
        """One line per known child frame, as upstream prints it."""
        with self._cond:
            return "".join(
                f"Frame {child} exists with parent {link.parent}.\n" for child, link in sorted(self._links.items())
            )

    def _wait_for(self, target_frame: str, source_frame: str, time, timeout) -> tuple[np.ndarray, int]:
        time_ns = time_to_ns(time)
        deadline = _time.monotonic() + duration_to_ns(timeout) / 1e9
        with self._cond:
            while True:
                try:
                    return self._lookup_locked(target_frame, source_frame, time_ns)
                except InvalidArgumentException:
                    raise
                except TransformException:
                    remaining = deadline - _time.monotonic()
                    if remaining <= 0:
                        raise
                    self._cond.wait(remaining)

    def _frame_exists(self, frame: str) -> bool:
        return frame in self._links or any(link.parent == frame for link in self._links.values())

    def _validate_frame(self, frame: str, argument: str) -> None:
        if not isinstance(frame, str) or not frame:
            raise InvalidArgumentException(
                f"Invalid argument {frame!r} passed to lookup_transform argument {argument} - frame ids cannot be empty"
            )
        if frame.startswith("/"):
            raise InvalidArgumentException(
                f'Invalid argument "{frame}" passed to lookup_transform argument '
                f"{argument} - frame ids cannot start with a '/'"
            )
        if not self._frame_exists(frame):
            known = sorted(set(self._links) | {link.parent for link in self._links.values()})
            raise LookupException(
                f'"{frame}" passed to lookupTransform argument {argument} does not exist. Known frames: {known}'
            )

    def _chain_to_root(self, frame: str) -> list[str]:
        """``[frame, parent, grandparent, ..., root]``."""
        chain = [frame]
        while chain[-1] in self._links:
            chain.append(self._links[chain[-1]].parent)
            if len(chain) > _MAX_TREE_DEPTH:
                raise LookupException(f"the TF tree above '{frame}' has a loop or is deeper than {_MAX_TREE_DEPTH}")
        return chain

    def _chain(self, target: str, source: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The child frames whose links chain ``source`` and ``target`` to their closest common ancestor (source side
        from the source up, target side from the target up); raises the look-up's frame errors. Cached per pair."""
        chain = self._chains.get((target, source))
        if chain is not None:
            return chain
        self._validate_frame(target, "target_frame")
        self._validate_frame(source, "source_frame")
        source_chain, target_chain = self._chain_to_root(source), self._chain_to_root(target)
        target_index = {frame: i for i, frame in enumerate(target_chain)}
        common = next((i for i, frame in enumerate(source_chain) if frame in target_index), None)
        if common is None:
            raise ConnectivityException(
                f"Could not find a connection between '{target}' and '{source}' because they are not part of the "
                f"same tree. Tf has two or more unconnected trees ('{source}' is under '{source_chain[-1]}', "
                f"'{target}' under '{target_chain[-1]}')."
            )
        chain = (tuple(source_chain[:common]), tuple(target_chain[: target_index[source_chain[common]]]))
        self._chains[(target, source)] = chain
        return chain

    def _lookup_locked(self, target: str, source: str, time_ns: int) -> tuple[np.ndarray, int]:
        if target == source:
            self._validate_frame(target, "target_frame")
            return np.eye(4), time_ns
        source_links, target_links = self._chain(target, source)
        if time_ns == 0:
            latest = [self._links[c].stamps_ns[-1] for c in source_links + target_links if not self._links[c].static]
            time_ns = min(latest) if latest else 0
        T_common_source = self._chained(source_links, time_ns, target, source)  # (4, 4)
        if not target_links:  # the target is the common ancestor (a look-up from the root: the usual one)
            return T_common_source, time_ns
        T_common_target = self._chained(target_links, time_ns, target, source)  # (4, 4)
        return invert_matrix(T_common_target) @ T_common_source, time_ns

    def _chained(self, children: tuple[str, ...], time_ns: int, target: str, source: str) -> np.ndarray:
        """``T_ancestor_first`` (4, 4): the links of ``children`` (the first one lowest) composed at ``time_ns``; the
        identity for none. A fresh array: a static link's stored matrix is never handed out."""
        if not children:
            return np.eye(4)
        T = self._link_at(children[0], time_ns, target, source).copy()  # (4, 4)
        for child in children[1:]:
            T = self._link_at(child, time_ns, target, source) @ T
        return T

    def _link_at(self, child: str, time_ns: int, target: str, source: str) -> np.ndarray:
        """``T_parent_child`` (4, 4) of one link at ``time_ns`` (interpolated), or ExtrapolationException."""
        link = self._links[child]
        if link.static:
            return link.static_matrix
        stamps = link.stamps_ns
        context = (
            f", when looking up transform from frame [{child}] to frame [{link.parent}] "
            f"(lookup of [{source}] in [{target}])"
        )
        if len(stamps) == 1 and time_ns != stamps[0]:
            raise ExtrapolationException(
                f"Lookup would require extrapolation at time {_seconds(time_ns)}, but only "
                f"time {_seconds(stamps[0])} is in the buffer{context}"
            )
        if time_ns > stamps[-1]:
            raise ExtrapolationException(
                f"Lookup would require extrapolation into the future.  Requested time "
                f"{_seconds(time_ns)} but the latest data is at time "
                f"{_seconds(stamps[-1])}{context}"
            )
        if time_ns < stamps[0]:
            raise ExtrapolationException(
                f"Lookup would require extrapolation into the past.  Requested time "
                f"{_seconds(time_ns)} but the earliest data is at time "
                f"{_seconds(stamps[0])}{context}"
            )
        i = bisect.bisect_left(stamps, time_ns)
        if stamps[i] == time_ns:
            return make_matrix(link.translations[i], link.quaternions[i])
        fraction = (time_ns - stamps[i - 1]) / (stamps[i] - stamps[i - 1])
        (ax, ay, az), (bx, by, bz) = link.translations[i - 1], link.translations[i]
        translation = (ax + fraction * (bx - ax), ay + fraction * (by - ay), az + fraction * (bz - az))
        quaternion = quaternion_slerp(link.quaternions[i - 1], link.quaternions[i], fraction)  # (4,)
        return make_matrix(translation, quaternion)


def _make_stamped(T: np.ndarray, target: str, source: str, stamp_ns: int) -> TransformStamped:
    msg = TransformStamped()
    msg.header.frame_id = target
    msg.child_frame_id = source
    set_stamp(msg.header.stamp, stamp_ns)
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (float(v) for v in T[:3, 3])
    q = matrix_to_quaternion(T[:3, :3])
    msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z, msg.transform.rotation.w = (
        float(v) for v in q
    )
    return msg


class TransformListener:
    """Fills a :class:`Buffer` from ``/tf`` and ``/tf_static`` (signature of upstream ``tf2_ros.TransformListener``)."""

    def __init__(
        self,
        buffer: Buffer,
        node,
        *,
        spin_thread: bool = False,
        qos: QoSProfile | int | None = None,
        static_qos: QoSProfile | int | None = None,
        tf_topic: str = DEFAULT_TF_TOPIC,
        tf_static_topic: str = DEFAULT_STATIC_TF_TOPIC,
        static_only: bool = False,
    ) -> None:
        """
        :param buffer: where received transforms go.
        :param node: the node to subscribe with (``None``: a private node is created, as upstream).
        :param spin_thread: spin the node in a dedicated thread with its own executor.
        :param qos: QoS (or history depth) for ``/tf``; default depth 100, volatile.
        :param static_qos: QoS (or depth) for ``/tf_static``; default depth 100, reliable, TRANSIENT_LOCAL so a late
            listener still gets the latched static transforms.
        """
        if static_qos is None:
            static_qos = QoSProfile(
                depth=100,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
                history=HistoryPolicy.KEEP_LAST,
                reliability=ReliabilityPolicy.RELIABLE,
            )
        if qos is None:
            qos = QoSProfile(depth=100, durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
        self.buffer = buffer
        if node is None:
            node = Node(f"transform_listener_impl_{id(self):010x}", enable_rosout=False, start_parameter_services=False)
        self.node = node
        # Reentrant: another callback may block in lookup_transform(timeout) while these keep filling the buffer.
        self.group = ReentrantCallbackGroup()
        if not static_only:
            self.tf_sub = node.create_subscription(TFMessage, tf_topic, self.callback, qos, callback_group=self.group)
        self.tf_static_sub = node.create_subscription(
            TFMessage, tf_static_topic, self.static_callback, static_qos, callback_group=self.group
        )
        if spin_thread:
            self.executor = SingleThreadedExecutor(context=node.context)  # works with a non-default context too

            def run() -> None:
                self.executor.add_node(self.node)
                try:
                    self.executor.spin()
                except ExternalShutdownException:
                    pass
                self.executor.remove_node(self.node)

            self.dedicated_listener_thread = Thread(target=run, daemon=True)
            self.dedicated_listener_thread.start()

    def __del__(self) -> None:
        if hasattr(self, "dedicated_listener_thread") and hasattr(self, "executor"):
            self.executor.shutdown()
            self.dedicated_listener_thread.join()
        try:
            self.unregister()
        except Exception:  # node or context already gone at interpreter exit
            pass

    def unregister(self) -> None:
        """Destroy the subscriptions."""
        if hasattr(self, "tf_sub"):
            self.node.destroy_subscription(self.tf_sub)
            del self.tf_sub
        if hasattr(self, "tf_static_sub"):
            self.node.destroy_subscription(self.tf_static_sub)
            del self.tf_static_sub

    def callback(self, data) -> None:
        for transform in data.transforms:
            self.buffer.set_transform(transform, "default_authority")

    def static_callback(self, data) -> None:
        for transform in data.transforms:
            self.buffer.set_transform_static(transform, "default_authority")


def _as_list(transform) -> list[TransformStamped]:
    return list(transform) if isinstance(transform, (list, tuple)) else [transform]


class TransformBroadcaster:
    """Publishes dynamic transforms on ``/tf`` (signature of upstream ``tf2_ros.TransformBroadcaster``)."""

    def __init__(self, node, qos: QoSProfile | int | None = None) -> None:
        """
        :param node: the node to publish with.
        :param qos: QoS (or history depth); default depth 100.
        """
        self._message_type = TFMessage
        self.pub_tf = node.create_publisher(TFMessage, DEFAULT_TF_TOPIC, QoSProfile(depth=100) if qos is None else qos)

    def sendTransform(self, transform: TransformStamped | list[TransformStamped]) -> None:  # noqa: N802 (upstream)
        """Publish one transform or a list of them in one ``TFMessage``."""
        self.pub_tf.publish(self._message_type(transforms=_as_list(transform)))


class StaticTransformBroadcaster:
    """Publishes static transforms on latched ``/tf_static``, re-sending every frame it was ever given (upstream)."""

    def __init__(self, node, qos: QoSProfile | int | None = None) -> None:
        """
        :param node: the node to publish with.
        :param qos: QoS; default depth 1, reliable, TRANSIENT_LOCAL (late subscribers get the last message).
        """
        if qos is None:
            qos = QoSProfile(
                depth=1,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
                history=HistoryPolicy.KEEP_LAST,
                reliability=ReliabilityPolicy.RELIABLE,
            )
        self._message_type = TFMessage
        self._by_child: dict[str, TransformStamped] = {}
        self.pub_tf = node.create_publisher(TFMessage, DEFAULT_STATIC_TF_TOPIC, qos)

    def sendTransform(self, transform: TransformStamped | list[TransformStamped]) -> None:  # noqa: N802 (upstream)
        """Add (or replace, per child frame) transforms and publish all accumulated ones."""
        for t in _as_list(transform):
            self._by_child[t.child_frame_id] = t
        self.pub_tf.publish(self._message_type(transforms=list(self._by_child.values())))
