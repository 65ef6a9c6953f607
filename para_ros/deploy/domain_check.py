"""Before a graph starts: no node of the same name may already live in its ROS domain.

Two simulators, or two executors, in one domain answer each other's messages: a lockstep run started in a domain
used moments before can receive the old run's trajectories and never its own acknowledgements, and on a robot two
executors would command one arm. A process that died without shutting down stays announced by DDS until its lease
runs out (Fast DDS: 20 s), so a name still seen is waited for up to ``wait_s`` (a stale participant goes away by
itself). A name still there then is asked once more of a fresh participant: this process's long-lived probe can keep
a node that is gone (rmw_fastrtps's graph cache, when a dying participant's last node announcement is handled after
its removal, seen on a loaded machine: a ``/sim_node`` with no process behind it refused every later graph of a test
run). Only a node the fresh participant also discovers is a live run, and the start is refused naming the nodes and
the domain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

DISCOVERY_S = 0.8  # loopback discovery of a live participant takes well under this
STALE_WAIT_S = 25.0  # a participant that died unannounced is forgotten after its lease (Fast DDS default 20 s)
FRESH_DISCOVERY_S = 8.0  # a participant created after another was deleted discovered the live ones within 3 s


_PROBES: dict = {}  # domain id -> (rclpy context, node) kept for the process: its graph cache stays current
# (domain id, node name) -> monotonic time this process stopped that node (its process had exited): DDS announces a
# participant for a while after its process ended, and a sweep starting its next graph need not wait for its own.
_STOPPED: dict[tuple[int, str], float] = {}


def stopped_here(domain_id: int | str, names: Iterable[str]) -> None:
    """Say that this process's nodes ``names`` in ``domain_id`` have exited (``GraphRun.stop``)."""
    now = time.monotonic()
    for name in names:
        _STOPPED[(int(domain_id), str(name).strip("/"))] = now


def _not_ours(domain_id: int, seen: list[str]) -> list[str]:
    """``seen`` (``namespace/name``) without the nodes this process stopped in that domain within the last
    :data:`STALE_WAIT_S` (what DDS still announces of them)."""
    now = time.monotonic()
    return [s for s in seen if now - _STOPPED.get((domain_id, s.rsplit("/", 1)[-1]), -1e9) >= STALE_WAIT_S]


def _drop_probe(domain_id: int) -> None:
    """Forget this process's probe in ``domain_id`` (and its graph cache); the next :func:`_probe_node` makes one."""
    context, node = _PROBES.pop(domain_id, (None, None))
    if node is not None:
        node.destroy_node()
        context.try_shutdown()


def _probe_node(domain_id: int, discovery_s: float):
    """This process's probe node in ``domain_id``, created (and given ``discovery_s`` to discover) on first use. One
    per domain for the process's life: a participant created again right after one was deleted is not told about
    the others for seconds (measured: nothing within 0.8 s, everything within 3 s)."""
    if domain_id not in _PROBES:
        import rclpy  # rclpy: loaded on first use, not on import

        context = rclpy.Context()
        rclpy.init(args=[], context=context, domain_id=domain_id)
        node = rclpy.create_node("para_domain_check", context=context, start_parameter_services=False)
        _PROBES[domain_id] = (context, node)
        time.sleep(discovery_s)
    return _PROBES[domain_id][1]


def nodes_in_domain(
    names: Iterable[str], domain_id: int, discovery_s: float = DISCOVERY_S, wait_s: float = 0.0, fresh: bool = False
) -> list[str]:
    """Which of ``names`` (node base names) ROS domain ``domain_id`` has, as ``namespace/name``; asked again each
    second while any is seen, for at most ``wait_s``; the names still seen at the end. ``fresh``: ask a new
    participant instead of this process's probe (which it then replaces), and return what it discovers of ``names``
    within :data:`FRESH_DISCOVERY_S`, as soon as it sees any."""
    wanted = {str(n).strip("/") for n in names}

    def seen_by(node) -> list[str]:
        return sorted(f"{ns.rstrip('/')}/{name}" for name, ns in node.get_node_names_and_namespaces() if name in wanted)

    if fresh:
        _drop_probe(int(domain_id))
        node = _probe_node(int(domain_id), 0.0)
        deadline = time.monotonic() + FRESH_DISCOVERY_S
        while not (seen := seen_by(node)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return seen
    node = _probe_node(int(domain_id), discovery_s)
    deadline = time.monotonic() + wait_s
    while True:
        seen = seen_by(node)
        if not seen or time.monotonic() >= deadline:
            return seen
        time.sleep(1.0)


def check_domain_free(
    names: Iterable[str],
    domain_id: int | str,
    wait_s: float = STALE_WAIT_S,
    say: Callable[[str], None] = print,
    probe: Callable[..., list[str]] = nodes_in_domain,
) -> None:
    """Raise RuntimeError when nodes named like the graph's still live in the domain after ``wait_s`` (module
    docstring); say once when it waits for them."""
    seen = _not_ours(int(domain_id), probe(list(names), domain_id, wait_s=0.0))
    if not seen:
        return
    say(
        f"ROS_DOMAIN_ID {domain_id} already has {', '.join(seen)}: waiting up to {wait_s:g} s for them to go "
        "(participants of a run that just ended)"
    )
    t0 = time.monotonic()
    seen = _not_ours(int(domain_id), probe([s.rsplit("/", 1)[-1] for s in seen], domain_id, wait_s=wait_s))
    if seen:
        stale = seen
        seen = _not_ours(int(domain_id), probe([s.rsplit("/", 1)[-1] for s in stale], domain_id, fresh=True))
        if not seen:
            say(
                f"ROS_DOMAIN_ID {domain_id}: {', '.join(stale)} not seen by a fresh participant: a stale entry of this "
                "process's DDS graph cache, not a run"
            )
            return
    if seen:
        raise RuntimeError(
            f"ROS_DOMAIN_ID {domain_id} already has {', '.join(seen)} (another run in this domain): their messages "
            "would mix with this graph's. Stop that run, or start this one in another domain (unset ROS_DOMAIN_ID "
            "for a fresh one, or export ROS_DOMAIN_ID=N)"
        )
    say(f"ROS_DOMAIN_ID {domain_id}: they went after {time.monotonic() - t0:.1f} s")
