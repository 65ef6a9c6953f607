"""Run the graph's nodes as processes: start, watch, respawn, stop, and say how each ended.

:class:`GraphRun` is the one object every command that runs the graph uses (``para-deploy``, ``para-sim eval``,
``para-sim record``, the soak bench): each node is ``python -m <module> --ros-args -r __node:=<name> --params-file
<file> -p ...`` (:func:`node_command`) with the loopback DDS environment (:func:`graph_env`, also applied to this
process, so that a monitor or evaluator node here joins the same domain), its output in ``<log_dir>/<node>.log``.

Stop: every node gets SIGINT, is waited for, and a node still running after the timeout is killed with its whole
process group: nothing is left behind (a node also gets SIGTERM when this process dies: ``PR_SET_PDEATHSIG``).
Respawn (:func:`respawns`): a node that dies on its own (not at the stop) is started again with the same command line
after ``respawn_delay_s``, its output appended to the same log, and counted; the summaries report every restart and
the exit status of each death. The nodes that only compute or simulate are respawned with ``respawn``; the executor
only with ``respawn_executor`` (it commands the arm, so after it died a person should look first).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from para_ros.dds_env import apply_loopback_dds_env, loopback_dds_env
from para_ros.deploy import graph
from para_ros.paths import share_file

PR_SET_PDEATHSIG = 1
try:  # loaded here, not in the forked child
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _LIBC = None


def yaml_value(value) -> str:
    """``value`` as the YAML text of a ``-p name:=value`` rule (strings quoted when YAML would read another type)."""
    text = yaml.safe_dump(value, default_flow_style=True)
    return text.removesuffix("\n...\n").strip()


def node_command(spec: graph.NodeSpec, overrides: dict[str, object], python: str = sys.executable) -> list[str]:
    """The command line of one node: its module, name, parameter file, then ``-p`` for every override."""
    cmd = [
        python,
        "-m",
        spec.module,
        "--ros-args",
        "-r",
        f"__node:={spec.name}",
        "--params-file",
        str(share_file(spec.params_file)),
    ]
    for name, value in overrides.items():
        cmd += ["-p", f"{name}:={yaml_value(value)}"]
    return cmd


def graph_commands(settings: graph.DeploySettings) -> list[tuple[graph.NodeSpec, list[str]]]:
    """Every node of the graph for ``settings`` with its command line, in start order."""
    plan = graph.plan(settings)
    graph.tie_lockstep(plan)
    return [(spec, node_command(spec, overrides)) for spec, overrides in plan]


def graph_env(domain_id: int | None = None) -> dict[str, str]:
    """The environment of the graph's node processes (a fresh loopback DDS domain, or ``domain_id``; EGL rendering,
    unbuffered output), also applied to this process, so that a monitor or evaluator node here joins the same
    domain."""
    env = loopback_dds_env(domain_id=domain_id)
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYTHONUNBUFFERED", "1")
    apply_loopback_dds_env(domain_id=int(env["ROS_DOMAIN_ID"]))
    return env


def _die_with_parent() -> None:
    """In the child before exec: its own process group (Ctrl-C reaches it only through us) and SIGTERM when we die."""
    os.setpgid(0, 0)
    prctl = getattr(_LIBC, "prctl", None) if sys.platform.startswith("linux") else None
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class NodeProcess:
    """One started node: its spec, process and log file; ``returncode`` / ``killed`` once stopped.

    With ``respawn``, ``proc`` is the node's current process: ``restarts`` counts the restarts and ``exit_statuses``
    holds the exit status of every death that was followed by a restart (or is waiting for one, ``down_since`` set).
    """

    spec: graph.NodeSpec
    cmd: list[str]
    proc: subprocess.Popen
    log_path: Path
    returncode: int | None = None
    killed: bool = False
    exited_early: bool = False
    respawn: bool = False
    restarts: int = 0
    exit_statuses: list[int] = field(default_factory=list)
    down_since: float | None = None  # monotonic time its death was seen, while it waits for the restart


EXECUTOR_NODE = "chunk_executor"


INTERRUPTED_RC = 130  # exit status of a run stopped by SIGINT / SIGTERM (128 + SIGINT, as a shell reports Ctrl-C)


def run_exit_status(extra: dict) -> int:
    """Exit status of an evaluation from its report's ``extra``: 1 after an error, :data:`INTERRUPTED_RC` when a
    signal stopped it, else 0."""
    if "error" in extra:
        return 1
    return INTERRUPTED_RC if extra["interrupted"] else 0


class SignalStop:
    """While alive: SIGINT and SIGTERM set :attr:`event` and say which signal in :attr:`why` (the run's stop
    reason, ``why`` until then); :meth:`restore` puts the previous handlers back."""

    def __init__(self, why: str = "duration reached"):
        self.event = threading.Event()
        self.why = why
        self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.why = f"{signal.Signals(signum).name} received"
        self.event.set()

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


def respawns(spec_name: str, respawn: bool, respawn_executor: bool) -> bool:
    """Whether the launchers restart node ``spec_name`` when it dies: the executor with ``respawn_executor`` only
    (it commands the arm: off by default, see the module docstring), every other node with ``respawn``."""
    return respawn_executor if spec_name == EXECUTOR_NODE else respawn


@dataclass
class ProcessGroup:
    """Start, watch and stop the nodes of one run (see the module docstring for the shutdown and respawn rules).

    A node started with ``respawn=True`` is watched by a thread of this group (every ``poll_s``): when it dies before
    :meth:`stop`, it is started again ``respawn_delay_s`` later, and :meth:`first_dead` never reports it.
    ``pids_path``: a JSON file of each node's current pid, rewritten at every start and restart (by whoever starts
    the process, so it never lags a restart).
    """

    log_dir: Path
    env: dict[str, str]
    echo: bool = False
    nodes: list[NodeProcess] = field(default_factory=list)
    respawn_delay_s: float = 2.0
    poll_s: float = 0.05
    pids_path: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _watcher: threading.Thread | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if not (self.respawn_delay_s >= 0.0 and self.poll_s > 0.0):
            raise ValueError(f"respawn_delay_s={self.respawn_delay_s!r} must be >= 0 and poll_s={self.poll_s!r} > 0")

    def _popen(self, cmd: list[str], log_path: Path, append: bool) -> subprocess.Popen:
        log = open(log_path, "ab" if append else "wb")  # noqa: SIM115  (kept open for the child's lifetime)
        try:
            return subprocess.Popen(
                cmd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=None if self.echo else log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def start(self, spec: graph.NodeSpec, cmd: list[str], respawn: bool = False) -> NodeProcess:
        """Start one node (its output in ``<log_dir>/<name>.log``); ``respawn``: restart it whenever it dies."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        node = NodeProcess(spec, cmd, self._popen(cmd, log_path, append=False), log_path, respawn=respawn)
        with self._lock:
            self.nodes.append(node)
            self._write_pids()
            if respawn and self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="para_deploy_respawn", daemon=True)
                self._watcher.start()
        return node

    def _log_line(self, node: NodeProcess, text: str) -> None:
        line = f"[para-deploy] {datetime.now().strftime('%H:%M:%S')} {text}"
        if self.echo:
            print(line, flush=True)
            return
        try:
            with open(node.log_path, "a") as log:
                log.write(line + "\n")
        except OSError:
            pass

    def _watch(self) -> None:
        """Respawn thread: note each death of a respawned node, start it again ``respawn_delay_s`` later."""
        while not self._stopping.wait(self.poll_s):
            with self._lock:
                if self._stopping.is_set():
                    return
                now = time.monotonic()
                for n in self.nodes:
                    if not n.respawn:
                        continue
                    if n.down_since is None and n.proc.poll() is not None:
                        n.down_since = now
                        n.exit_statuses.append(n.proc.returncode)
                        self._log_line(
                            n,
                            f"{n.spec.name} (pid {n.proc.pid}) exited with status {n.proc.returncode};"
                            f" restarting it in {self.respawn_delay_s:g} s",
                        )
                    if n.down_since is not None and now - n.down_since >= self.respawn_delay_s:
                        n.proc = self._popen(n.cmd, n.log_path, append=True)
                        n.restarts += 1
                        n.down_since = None
                        self._write_pids()
                        self._log_line(n, f"{n.spec.name} restarted (restart {n.restarts}, pid {n.proc.pid})")

    def _write_pids(self) -> None:
        """Under the lock: ``pids_path`` gets ``{node name: current pid}``."""
        if self.pids_path is not None:
            self.pids_path.write_text(json.dumps({n.spec.name: n.proc.pid for n in self.nodes}))

    def restarts(self) -> int:
        """Restarts of all nodes so far."""
        with self._lock:
            return sum(n.restarts for n in self.nodes)

    def pids(self) -> list[int]:
        with self._lock:
            return [n.proc.pid for n in self.nodes]

    def first_dead(self) -> NodeProcess | None:
        """A node that has exited on its own (before the shutdown) and is not respawned, or None."""
        with self._lock:
            for n in self.nodes:
                if not n.respawn and n.proc.poll() is not None:
                    n.exited_early = True
                    n.returncode = n.proc.returncode
                    return n
        return None

    def stop(self, timeout_s: float = 5.0) -> None:
        """End respawning, SIGINT every node, wait up to ``timeout_s`` in all, SIGKILL the process group of any
        still running. A respawned node that is dead at this moment (waiting for its restart) counts as exited
        early."""
        with self._lock:
            self._stopping.set()
            watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=5.0)
        for n in self.nodes:
            if n.respawn and (n.down_since is not None or n.proc.poll() is not None):
                n.exited_early = True
                if n.down_since is None:  # died since the watcher last looked
                    n.exit_statuses.append(n.proc.returncode)
            elif n.proc.poll() is None:
                try:
                    os.killpg(n.proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        for n in self.nodes:
            try:
                n.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                n.killed = True
                try:
                    os.killpg(n.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                n.proc.wait()
            if n.returncode is None:
                n.returncode = n.proc.returncode
        for n in self.nodes:  # grandchildren a node left in its group
            try:
                os.killpg(n.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def log_tail(self, node: NodeProcess, n_lines: int = 25) -> str:
        try:
            lines = node.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n_lines:])


class GraphRun:
    """One run of graph nodes as processes (module docstring): start them, watch for deaths, stop them, and say how
    each ended (:meth:`node_lines` for a summary text, :meth:`node_summaries` for JSON).

    :param log_dir: where each node's ``<name>.log`` goes.
    :param echo: the nodes' output on this terminal instead of the logs.
    :param respawn_delay_s: seconds between a respawned node's death and its restart.
    :param pids_path: a JSON file of each node's current pid, rewritten at every start and restart.
    :param domain_id: the run's DDS domain (default: this process's, else a fresh one; ``para-sim eval --compare``
        gives each of its graphs its own).
    """

    def __init__(
        self,
        log_dir: Path,
        echo: bool = False,
        respawn_delay_s: float = 2.0,
        pids_path: Path | None = None,
        domain_id: int | None = None,
    ):
        self.env = graph_env(domain_id)
        self.group = ProcessGroup(log_dir, self.env, echo=echo, respawn_delay_s=respawn_delay_s, pids_path=pids_path)

    @property
    def domain_id(self) -> str:
        """The ROS_DOMAIN_ID of the run (a fresh one per run, loopback only)."""
        return self.env["ROS_DOMAIN_ID"]

    @property
    def nodes(self) -> list[NodeProcess]:
        return self.group.nodes

    def start_commands(
        self,
        commands: list[tuple[graph.NodeSpec, list[str]]],
        respawn: bool = False,
        respawn_executor: bool = False,
        check_domain: bool = True,
    ) -> list[NodeProcess]:
        """Start each (spec, command line) in order, respawned as :func:`respawns` says for ``respawn`` /
        ``respawn_executor``. Refused (RuntimeError) while the domain has live nodes of those names
        (:mod:`para_ros.deploy.domain_check`), unless ``check_domain`` is false."""
        if check_domain:
            from para_ros.deploy.domain_check import check_domain_free

            check_domain_free([spec.name for spec, _ in commands], self.domain_id)
        return [
            self.group.start(spec, cmd, respawn=respawns(spec.name, respawn, respawn_executor))
            for spec, cmd in commands
        ]

    def start_plan(
        self,
        plan: list[tuple[graph.NodeSpec, dict]],
        extra: dict[str, dict] | None = None,
        respawn: bool = False,
        respawn_executor: bool = False,
        check_domain: bool = True,
    ) -> list[NodeProcess]:
        """Start the nodes of ``plan`` (:func:`para_ros.deploy.graph.plan`: (spec, parameter overrides) in start
        order), each with ``extra[node name]``'s parameters on top of the plan's (``check_domain``: as
        :meth:`start_commands`)."""
        extra = extra or {}
        merged = [(spec, {**overrides, **extra.get(spec.name, {})}) for spec, overrides in plan]
        graph.tie_lockstep(merged)
        return self.start_commands(
            [(spec, node_command(spec, overrides)) for spec, overrides in merged],
            respawn,
            respawn_executor,
            check_domain,
        )

    def start_again(
        self, plan: list[tuple[graph.NodeSpec, dict]], extra: dict[str, dict] | None = None
    ) -> list[NodeProcess]:
        """After :meth:`stop`: start ``plan`` afresh in the same DDS domain, so that a node in this process keeps
        hearing the graph (``para-sim record`` restarts the sim node for each randomised scene camera: its pose and
        field of view are read-only parameters). The summaries then describe the new start only."""
        g = self.group
        self.group = ProcessGroup(
            g.log_dir, self.env, echo=g.echo, respawn_delay_s=g.respawn_delay_s, pids_path=g.pids_path
        )
        return self.start_plan(plan, extra, check_domain=False)  # its own nodes stopped just now

    def first_dead(self) -> NodeProcess | None:
        """A node that exited on its own and is not respawned, or None."""
        return self.group.first_dead()

    def restarts(self) -> int:
        return self.group.restarts()

    def log_tail(self, node: NodeProcess, n_lines: int = 25) -> str:
        return self.group.log_tail(node, n_lines)

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGINT every node, SIGKILL what still runs after ``timeout_s`` (see :meth:`ProcessGroup.stop`)."""
        self.group.stop(timeout_s=timeout_s)
        from para_ros.deploy.domain_check import stopped_here

        stopped_here(self.domain_id, [n.spec.name for n in self.nodes])

    def failed(self) -> bool:
        """After :meth:`stop`: a node died early (and was not respawned, or was dead at the stop) or was killed."""
        return any(n.killed or n.exited_early for n in self.nodes)

    def node_lines(self) -> list[str]:
        """After :meth:`stop`: one summary line per node, how it ended and where its log is."""
        lines = []
        for n in self.nodes:
            how = (
                "killed after the shutdown timeout"
                if n.killed
                else (
                    f"exited early, status {n.returncode}"
                    if n.exited_early
                    else f"stopped on SIGINT, status {n.returncode}"
                )
            )
            if n.restarts or n.exit_statuses:
                how += (
                    f"; restarted {n.restarts} time{'s' if n.restarts != 1 else ''} (exit statuses "
                    f"{', '.join(str(c) for c in n.exit_statuses)})"
                )
            lines.append(f"  node {n.spec.name:<16} {how}  (log {n.log_path})")
        return lines

    def node_summaries(self) -> dict[str, dict]:
        """After :meth:`stop`: per node its pid, exit status, how it ended and its restarts (JSON-ready)."""
        return {
            n.spec.name: {
                "pid": n.proc.pid,
                "returncode": n.returncode,
                "killed": n.killed,
                "exited_early": n.exited_early,
                "respawn": n.respawn,
                "restarts": n.restarts,
                "exit_statuses": list(n.exit_statuses),
            }
            for n in self.nodes
        }

    def failed_log_tails(self) -> list[str]:
        """After :meth:`stop`: the last lines of the log of every node that died early or was killed."""
        return [
            f"--- last lines of {n.log_path}:\n{self.log_tail(n)}" for n in self.nodes if n.exited_early or n.killed
        ]
