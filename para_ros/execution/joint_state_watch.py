"""When the arm's joint state last arrived complete: the age the executor's joint-state watchdog needs."""

from __future__ import annotations

import threading
from collections.abc import Callable


class JointStateWatch:
    """When every joint the executor reads was last heard on a ``JointState`` topic (receipt time, the caller's clock).

    Next to the backend's reader (``JointStateReader`` keeps values, not times), with the reader's rule: joints may
    come split over several messages and are merged by name, so the state is as old as its least recently heard joint
    (:meth:`last_complete_s`). Receipt time, not ``header.stamp``: a driver's clock may differ from the node's, and
    what the watchdog needs is whether the state still arrives. ROS-free: the node's subscription hands each message
    to :meth:`on_joint_state` (anything with ``name`` and ``position`` sequences).

    :param names: the joints the executor reads (the arm's, and the gripper's when it is read from the same topic).
    :param now_s: the clock receipt times are taken from (the node's clock, s).
    """

    def __init__(self, names: tuple[str, ...], now_s: Callable[[], float]):
        self.names = tuple(names)
        self._now_s = now_s
        self._heard: dict[str, float] = {}
        self._lock = threading.Lock()

    def on_joint_state(self, msg) -> None:
        """A ``JointState`` arrived: each needed joint with a finite position in it was heard now. A message whose
        names and positions differ in length is ignored (the reader ignores it too)."""
        if len(msg.position) != len(msg.name):
            return
        t = self._now_s()
        with self._lock:
            for name, position in zip(msg.name, msg.position):
                if name in self.names and position == position and abs(position) != float("inf"):
                    self._heard[name] = t

    def last_complete_s(self) -> float | None:
        """Receipt time of the oldest of the needed joints' latest values; None until each was heard once."""
        with self._lock:
            if not all(n in self._heard for n in self.names):
                return None
            return min(self._heard[n] for n in self.names)

    def clear(self) -> None:
        """Forget every receipt time (the clock jumped back: they are on the old clock)."""
        with self._lock:
            self._heard.clear()
