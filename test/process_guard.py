"""Processes of this test run that outlived their parent: found by an environment mark, killed, named.

Every process a test starts inherits ``os.environ``, so the mark set at import (:data:`RUN_MARK`, this pytest
process's pid) travels into each node, each evaluation subprocess and each node that one starts. A process carrying
the mark that is neither this process nor one of its descendants was orphaned: its parent ended without stopping
it. Such a node keeps its name in the run's ROS domain, and every later graph of the same names is refused there.
"""

from __future__ import annotations

import os
import signal

RUN_MARK = "PARA_TEST_RUN"


def mark_this_run() -> None:
    """Put this run's mark in ``os.environ`` (a caller's pytest under pytest keeps its own)."""
    os.environ.setdefault(RUN_MARK, str(os.getpid()))


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process readable now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        parents[int(entry)] = int(fields[1])
    return parents


def _carries_mark(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def orphans_of_this_run() -> list[int]:
    """Pids carrying this run's mark that are not this process or its descendants."""
    value = os.environ.get(RUN_MARK)
    if value is None:
        return []
    mark = f"{RUN_MARK}={value}".encode()
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    ours, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        ours.add(pid)
        todo.extend(c for c in children.get(pid, []) if c not in ours)
    return [pid for pid in parents if pid not in ours and _carries_mark(pid, mark)]


def kill_orphans() -> list[str]:
    """SIGKILL every orphan of this run; their command lines with pids."""
    said = []
    for pid in orphans_of_this_run():
        said.append(f"pid {pid}: {_cmdline(pid)}")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return said
