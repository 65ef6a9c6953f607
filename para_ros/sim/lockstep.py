"""Lockstep evaluation: the simulator advances on simulated time, and only once the graph has answered (ROS-free).

In real time the simulator steps by the wall clock, so how stale each chunk is when it takes effect, and when the
executor's control ticks fall, depend on how busy the machine is: two runs of the same seeds differ. In lockstep the
simulator publishes ``/clock`` and never steps physics before the graph has done, for the current simulated instant,
everything it would have done in real time on an infinitely fast machine; the per-episode outcome then depends on the
seeds alone. The rules:

1. The simulator advances in steps of ``step_s`` (the executor's control period). After each step it publishes the
   state (``/clock``, ``/joint_states``, ``/tf``) stamped with the new simulated time ``t`` (in batches, rule 7, only
   at the instant after each batch).
2. The executor (``lockstep: true``) ticks once per simulated instant, triggered by the joint state stamped ``t`` (it
   reads exactly that state, not whatever arrived last), and then acknowledges the tick (:func:`tick_ack`), saying
   whether it sent a command. The simulator steps again only after that acknowledgement and, when a command was sent,
   after that command arrived: physics between ``t`` and ``t + step_s`` always follows the command of tick ``t``.
3. The camera frames due at ``t`` go out once the executor has answered the tick at ``t``: the joint state of ``t``
   has then reached the executor, and (the same message, the same moment) almost surely the inference node, which
   reads the gripper opening at the frame's stamp from it.
4. A camera frame stamped ``t`` holds the simulator until the executor acknowledges the chunk predicted from it
   (:func:`chunk_ack`; the inference node stamps each chunk with its observation's image stamp), or the inference
   node says that frame gets none (:func:`no_chunk_ack`: its images failed the camera check, so the executor goes on
   without a chunk, as it would in real time). The executor keeps
   each chunk aside and hands it to its core at the first tick at or after ``stamp + latency_s``
   (:class:`ChunkRelease`): the chunk takes effect after a fixed simulated latency instead of after however long the
   machine took. So the chunk is needed only by then: with ``chunk_latency_s`` (the executor's latency, capped at
   the camera period so that the inference node never has two frames to choose from) the simulator goes on
   stepping up to the last instant before ``t + chunk_latency_s`` while the model computes, and holds there. The
   outcome is the same as holding at ``t`` (every input of the chunk is of time ``t``); the model and the physics
   then share the machine's cores instead of taking turns. The frames of the first instant after a reset hold at
   once: until they are answered, that instant may be sent again after a ``/clock`` hop for a node that missed the
   reset (``para_ros.nodes.lockstep_hooks.SimLockstep``), which only works while the simulator is still there.
5. A frame whose chunk has not come after ``reask_s`` of wall time is asked for again (also while the simulator is
   held at ``lockstep_run_until_s``, where it waits for every chunk on its way): the simulator publishes the
   same frames (same images, same stamps) once more, then after twice as long, up to :data:`MAX_REASK_S` between
   asks (:meth:`LockstepGate.due_reask`); likewise a horizon whose batch has not come (rule 7,
   :meth:`LockstepGate.due_horizon_reask`: the executor sends the batch it sent for that instant again, or the one
   it never sent, computed as it would have been). Sensor data travels best effort, and a busy or briefly stopped process
   loses frames; a frame that did arrive is refused by the inference node's pairing as not newer, so an ask costs
   nothing when the model is only slow. Nothing of the simulated state changes meanwhile, so the outcome is the one
   of a machine that never lost anything.
6. A wait longer than ``timeout_s`` of wall time (minutes) is a fault (:meth:`LockstepGate.check_timeout` names
   what was missing); the simulator then holds until the next task reset, which ends the episode as a fault. A
   fault is the machine's, not the policy's: evaluations leave it out of the success rate and ``--continue`` runs
   that layout again.

7. Batches (``batch``, the default): the executor's ticks between two instants at which anything can reach it need no
   round trip each. With the state at ``t`` the simulator publishes a horizon (:func:`horizon_msg`: ``[t, until]``):
   no camera frame is due, no chunk the executor does not hold yet takes effect, and ``lockstep_run_until_s`` is not
   reached before ``until``. The executor ticks on the state of ``t`` as in rule 2 (command and acknowledgement as
   always), then on the instants ``t + step .. until - step`` without their states, and sends those ticks' commands
   in one message (:func:`batch_points`: one ``JointTrajectory`` point per tick, an empty point where it sent
   nothing). It stops early at the first tick whose command would read the measured joints' values
   (``ExecutorCore.needs_measured_joints``: before the first state, after lost feedback or a clock jump, whose restart
   re-seeds from them); every other tick computes its command from the chunks, its previous command and the tick time
   alone, and the state's only other use, the watchdog's age, is the instant's own time, as each state is stamped
   with its instant. The simulator then steps through those ticks (while the model computes, as far as rule 4's chunks
   allow), following each tick's command from its instant on exactly as it follows a command that arrived then (rule
   2 holds for every step), and publishes the next state
   (``/clock``, ``/joint_states``) only at the instant after the last tick: the round trip per 10 ms becomes one per
   batch (one per camera frame with the default latencies). ``/tf`` goes out for the instants passed too, with the
   next state in one message: the inference node looks the end effector up at past times (the policy's history,
   ``step_dt_s`` apart) that need not fall on a published state. Every instant by default; with ``tf_period_s``
   (:func:`tf_grid_steps`: the coarsest grid holding every camera frame and every one of the policy's steps, which
   ``para-sim eval`` sets) only the instants on that grid, the only ones the graph looks up, so the others are neither
   built, sent nor parsed; a look-up falls on an instant sent either way and reads the same transform. The inference
   node reads the joint state only at its frames'
   stamps (the gripper opening), and frames fall on published states. The outcome is that of rule 2, to the digit;
   ``batch: false`` is the per-tick protocol of rules 1-6 (for comparison, and for an inference node with
   ``ee_source: joint_states``, whose history needs the joint state of every instant).

The acknowledgements and the horizon travel as ``std_msgs/Int64MultiArray`` (``data = [kind, time_ns, value]``;
the horizon ``[t_ns, until_ns, step_ns]``), a batch's commands as a ``trajectory_msgs/JointTrajectory``: standard messages, so
that no interface package changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ACK_TICK = 0  # data = [ACK_TICK, tick time ns, 1 if a command was sent else 0]
ACK_CHUNK = 1  # data = [ACK_CHUNK, chunk header stamp ns, 0]
ACK_NO_CHUNK = 2  # data = [ACK_NO_CHUNK, frame stamp ns, 0]: the inference node refused that frame
ACK_TOPIC = "/chunk_executor/lockstep_ack"  # where the answers go (the nodes' lockstep_ack_topic default)
HORIZON_TOPIC = "/sim_node/lockstep_horizon"  # rule 7: the simulator's horizons (lockstep_horizon_topic)
BATCH_TOPIC = "/chunk_executor/lockstep_batch"  # rule 7: the executor's commands of a batch (lockstep_batch_topic)

# Default simulated latency between a frame's exposure and its chunk taking effect (s). Why 0.05: the PARA v4 model
# on an H100-class GPU predicts a chunk from two 256 px views in tens of ms (about 20-30 ms forward), plus about 10 ms
# of camera readout, DDS transfer and pairing; 50 ms is that GPU-class budget rounded up to a whole number of 10 ms
# control periods, so results do not depend on where a release falls between two ticks.
DEFAULT_LATENCY_S = 0.05
# Wall time before a missing answer is a fault: a last resort only, since lost frames are asked for again (rule 5) and
# a CPU model on a shared machine at a load of 12 takes seconds per chunk; ten minutes is a stalled process.
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_REASK_S = 5.0  # wall seconds before a frame whose chunk has not come is published again (rule 5)
MAX_REASK_S = 60.0  # the interval between asks doubles up to this


def whole_steps(period_s: float, step_s: float) -> int | None:
    """``period_s`` as a whole number (at least 1) of steps of ``step_s``, or None when it is not one."""
    steps = round(period_s / step_s)
    return steps if steps >= 1 and abs(steps * step_s - period_s) <= 1e-9 * max(1.0, period_s) else None


def tf_grid_steps(step_s: float, periods_s) -> int:
    """Rule 7's ``/tf`` grid in steps of ``step_s``: the largest whole number of steps that divides every period of
    ``periods_s`` (seconds: the camera periods, the policy's step period), so that every instant a camera frame falls
    on, and every past step a policy looks up from one, lies on it; 1 (every instant) when a period is not a whole
    number of steps. ValueError for a step or a period that is not a positive finite number."""
    if not (math.isfinite(step_s) and step_s > 0):
        raise ValueError(f"lockstep step {step_s!r} s: use a positive number of seconds")
    grid = 0
    for period in periods_s:
        if not (math.isfinite(period) and period > 0):
            raise ValueError(f"period {period!r} s: use a positive number of seconds")
        steps = whole_steps(period, step_s)
        if steps is None:
            return 1
        grid = math.gcd(grid, steps)
    return max(grid, 1)


def tick_ack(t_ns: int, command_sent: bool) -> list[int]:
    """The ``data`` of the executor's acknowledgement of its tick at ``t_ns``."""
    return [ACK_TICK, int(t_ns), 1 if command_sent else 0]


def chunk_ack(stamp_ns: int) -> list[int]:
    """The ``data`` of the executor's acknowledgement that it holds the chunk stamped ``stamp_ns``."""
    return [ACK_CHUNK, int(stamp_ns), 0]


def no_chunk_ack(stamp_ns: int) -> list[int]:
    """The ``data`` of the inference node's word that the frame stamped ``stamp_ns`` gets no chunk."""
    return [ACK_NO_CHUNK, int(stamp_ns), 0]


def horizon_msg(t_ns: int, until_ns: int, step_ns: int) -> list[int]:
    """The ``data`` of the simulator's horizon (rule 7): the state stamped ``t_ns`` is out, and the executor may tick
    every instant ``t_ns + k * step_ns`` before ``until_ns`` without its state."""
    return [int(t_ns), int(until_ns), int(step_ns)]


def parse_horizon(data) -> tuple[int, int, int]:
    """(t ns, until ns, step ns) of a horizon; ValueError for anything else."""
    values = [int(v) for v in data]
    if len(values) != 3 or values[2] <= 0 or values[1] <= values[0]:
        raise ValueError(
            f"lockstep horizon {values!r}: expected [t_ns, until_ns, step_ns] with until_ns > t_ns and step_ns > 0"
        )
    return values[0], values[1], values[2]


def parse_ack(data) -> tuple[int, int, int]:
    """(kind, time ns, value) of an acknowledgement; ValueError for anything else."""
    values = [int(v) for v in data]
    if len(values) != 3 or values[0] not in (ACK_TICK, ACK_CHUNK, ACK_NO_CHUNK):
        raise ValueError(f"lockstep acknowledgement {values!r}: expected [kind 0|1|2, time_ns, value]")
    return values[0], values[1], values[2]


@dataclass
class LockstepSettings:
    """The simulator's side of lockstep.

    Args:
        step_s: simulated seconds per step; the executor ticks once per step, so this is its control period.
        timeout_s: wall seconds the simulator waits for any one answer before the wait is a fault.
        reask_s: wall seconds before the frames whose chunk has not come are published again (then twice as long
            each time, up to :data:`MAX_REASK_S`).
        chunk_latency_s: simulated seconds after a frame by which its chunk must be held (rule 4); 0: at once.
            Never more than the executor's ``lockstep_latency_s`` (the chunk would come too late).
        batch: the executor ticks in batches between the instants at which anything can reach it (rule 7); False:
            one round trip per step (rules 1-6 alone).
        tf_period_s: rule 7's ``/tf`` grid: the instants inside a batch carry ``/tf`` only every this many simulated
            seconds, a whole number of steps (:func:`tf_grid_steps`); 0: every instant.
    """

    step_s: float = 0.01
    timeout_s: float = DEFAULT_TIMEOUT_S
    reask_s: float = DEFAULT_REASK_S
    chunk_latency_s: float = 0.0
    batch: bool = True
    tf_period_s: float = 0.0

    def __post_init__(self):
        if not 1e-4 <= float(self.step_s) <= 0.1:
            raise ValueError(
                f"lockstep_step_s={self.step_s}: use 0.0001..0.1 s (the executor's control period, 0.01 s at 100 Hz)"
            )
        if not 0 < float(self.timeout_s) <= 3600:
            raise ValueError(f"lockstep_timeout_s={self.timeout_s}: use (0, 3600] s of wall time")
        if not 0.05 <= float(self.reask_s) <= MAX_REASK_S:
            raise ValueError(f"lockstep_reask_s={self.reask_s}: use 0.05..{MAX_REASK_S:g} s of wall time")
        if not 0.0 <= float(self.chunk_latency_s) <= 10.0:
            raise ValueError(f"lockstep_chunk_latency_s={self.chunk_latency_s}: use 0..10 s of simulated time")
        period = float(self.tf_period_s)
        if period != 0.0 and not (0.0 < period <= 10.0 and whole_steps(period, self.step_s)):
            raise ValueError(
                f"lockstep_tf_period_s={self.tf_period_s}: use 0 (every instant) or a whole number of "
                f"lockstep_step_s ({self.step_s} s) up to 10 s"
            )

    @property
    def tf_period_steps(self) -> int:
        """Rule 7's ``/tf`` grid in steps: an instant ``k * step_s`` inside a batch carries ``/tf`` when ``k`` is a
        multiple of it."""
        return whole_steps(float(self.tf_period_s), self.step_s) if self.tf_period_s else 1


@dataclass
class AskAgain:
    """When to ask again for an answer that has not come (rule 5): ``first_s`` of wall time after it was asked, then
    twice as long each time, up to :data:`MAX_REASK_S`."""

    first_s: float
    asked_s: float = 0.0  # wall time it was last asked (published, or asked again)
    after_s: float = 0.0  # the interval to the next ask
    waited_s: float = 0.0  # how long the last ask had waited (for the log)

    def __post_init__(self):
        self.after_s = self.first_s

    def asked(self, wall_s: float) -> None:
        """It was asked (published) at ``wall_s``: the next ask after ``first_s``."""
        self.asked_s, self.after_s = wall_s, self.first_s

    def due(self, wall_s: float) -> bool:
        """Whether to ask again now; each True doubles the interval to the next."""
        if wall_s - self.asked_s <= self.after_s:
            return False
        self.waited_s, self.asked_s = wall_s - self.asked_s, wall_s
        self.after_s = min(2.0 * self.after_s, MAX_REASK_S)
        return True


class LockstepGate:
    """Whether the simulator may take its next step: what it still waits for since it published time ``t``.

    Call :meth:`published` after publishing the state at ``t`` (with the stamps of the frames published with it),
    the ``on_*`` methods as answers arrive, :meth:`ready` before stepping, :meth:`check_timeout` periodically and
    :meth:`reset` when the task is reset (simulated time restarts: everything waited for belongs to the old run).
    """

    def __init__(self, settings: LockstepSettings):
        self.settings = settings
        self.reset()

    def reset(self) -> None:
        self.t_ns: int | None = None  # the instant last published; None: publish the current state first
        self.waiting_since_s = 0.0
        self.tick_acked = False
        self.command_sent = False
        self.command_arrived = False
        self.frames_waiting: set[int] = set()
        self.frames_pending = False
        self.chunks_held: set[int] = set()  # chunk stamps the executor acknowledged (<= t)
        self.fault = ""
        self.first_ns: int | None = None  # the first instant published since the reset
        self.frame_ask = AskAgain(self.settings.reask_s)  # the frames waited for (rule 5)
        self.batch_until_ns: int | None = None  # rule 7: the horizon sent with the current instant (None: none)
        self.batch_points: list | None = None  # the commands of the batch's ticks after t_ns, once they came
        self.batch_steps = 0  # the steps taken into the batch (to instants whose state is not published)
        self.horizon_ask = AskAgain(self.settings.reask_s)  # the horizon whose batch is waited for (rule 5, rule 7)

    @property
    def needs_publish(self) -> bool:
        return self.t_ns is None

    def published(self, t_ns: int, frame_stamps_ns=(), wall_s: float = 0.0, frames_pending: bool = False) -> None:
        """The state at ``t_ns`` went out, with the frames stamped ``frame_stamps_ns``; ``frames_pending``: the
        frames due at ``t_ns`` go out later (:meth:`frames_published`), once the executor has answered the tick."""
        self.t_ns = int(t_ns)
        if self.first_ns is None:
            self.first_ns = self.t_ns
        self.waiting_since_s = wall_s
        self.tick_acked = self.command_sent = self.command_arrived = False
        self.batch_until_ns = self.batch_points = None
        self.batch_steps = 0
        self.frames_pending = bool(frames_pending)
        self.chunks_held = {s for s in self.chunks_held if s <= self.t_ns}
        self.frames_waiting = (self.frames_waiting | {int(s) for s in frame_stamps_ns}) - self.chunks_held
        self.frame_ask.asked(wall_s)

    @property
    def reask_waited_s(self) -> float:
        """How long the last ask for frames had waited for their chunk (for the log)."""
        return self.frame_ask.waited_s

    def blocking(self) -> list[int]:
        """The frames waited for whose chunk is needed before the next step (rule 4; in a batch, rule 7, the next
        step into it), oldest first."""
        step_ns = int(round(self.settings.step_s * 1e9))
        latency_ns = int(round(self.settings.chunk_latency_s * 1e9))
        next_ns = (self.t_ns or 0) + step_ns * (1 + self.batch_steps)  # the step to take next (rule 7: in a batch)
        return sorted(
            s
            for s in self.frames_waiting
            if next_ns >= s + (0 if s == self.first_ns else latency_ns) - step_ns // 2  # the first instant: at once
        )

    def steps_until_blocked(self, pending_frames_ns=()) -> int | None:
        """Rule 7: how many steps from the current instant the simulator may take before a chunk it does not hold
        yet is needed (the first ``k >= 1`` such that stepping to ``t + k * step`` waits for one, by the rule of
        :meth:`blocking`), counting the frames due now that go out after the tick (``pending_frames_ns``); None when no
        frame is waited for."""
        step_ns = int(round(self.settings.step_s * 1e9))
        latency_ns = int(round(self.settings.chunk_latency_s * 1e9))
        best = None
        for s in self.frames_waiting | {int(f) for f in pending_frames_ns}:
            need_ns = s + (0 if s == self.first_ns else latency_ns) - step_ns // 2 - self.t_ns
            k = max(1, -(-need_ns // step_ns))  # the first k with k * step >= need (ceil)
            best = k if best is None else min(best, k)
        return best

    def batch_step_taken(self) -> None:
        """One step into the batch was taken (to an instant whose state is not published)."""
        self.batch_steps += 1

    def expect_batch(self, until_ns: int, wall_s: float = 0.0) -> None:
        """A horizon ``until_ns`` went out with the current instant at ``wall_s``: the executor's batch is waited
        for too."""
        self.batch_until_ns = int(until_ns)
        self.horizon_ask.asked(wall_s)

    def due_horizon_reask(self, wall_s: float) -> bool:
        """Whether to publish the current instant's horizon again now (rule 5 for the batch): its batch has not come
        ``reask_s`` after the executor answered the tick, then twice as long each time. A horizon or a batch lost on
        its way (a reliable writer drops what it sends before it has matched the reader: the first batch of a graph
        just started on a loaded machine) would otherwise hold the simulator until its timeout."""
        if self.fault or self.batch_until_ns is None or self.batch_points is not None or not self.tick_answered():
            return False
        return self.horizon_ask.due(wall_s)

    def on_batch(self, t_ns: int, points: list) -> None:
        """The executor's batch answering the horizon of ``t_ns``: the commands of its ticks after ``t_ns``, one entry
        per tick (None: that tick sent nothing). One for another instant (before a reset) is ignored; ValueError for
        more ticks than the horizon allowed."""
        if self.batch_until_ns is None or t_ns != self.t_ns:
            return
        step_ns = int(round(self.settings.step_s * 1e9))
        allowed = (self.batch_until_ns - self.t_ns) // step_ns - 1
        if len(points) > allowed:
            raise ValueError(
                f"lockstep batch of t={t_ns / 1e9:.3f} s: {len(points)} ticks, the horizon allowed {allowed}"
            )
        self.batch_points = list(points)

    def frames_published(self, frame_stamps_ns, wall_s: float | None = None) -> None:
        self.frames_pending = False
        self.frames_waiting |= {int(s) for s in frame_stamps_ns} - self.chunks_held
        if wall_s is not None:
            self.frame_ask.asked(wall_s)

    def due_reask(self, wall_s: float, every_waiting: bool = False) -> list[int]:
        """The stamps of the frames to publish again now (rule 5 of the module docstring), oldest first; empty while
        their chunks may still be on their way. Each call that returns stamps doubles the interval to the next.
        ``every_waiting``: every frame whose chunk has not come, not only those the next step needs (the simulator
        held at ``lockstep_run_until_s`` waits for all of them before it says it is held)."""
        if self.fault or self.frames_pending or not self.tick_answered():
            return []
        blocking = sorted(self.frames_waiting) if every_waiting else self.blocking()
        if not blocking or not self.frame_ask.due(wall_s):
            return []
        return blocking

    def tick_answered(self) -> bool:
        """The executor ticked on the current instant and its command (if any) arrived."""
        return self.tick_acked and (not self.command_sent or self.command_arrived)

    def on_ack(self, data) -> None:
        """An acknowledgement from the executor (:func:`parse_ack`). Ones for an instant not yet published are from
        before a reset (times restart at 0) and are ignored."""
        kind, t_ns, value = parse_ack(data)
        if self.t_ns is None or t_ns > self.t_ns:
            return
        if kind == ACK_TICK:
            if t_ns == self.t_ns:
                self.tick_acked = True
                self.command_sent = bool(value)
        else:  # a chunk held, or no chunk to come: the frame is answered either way
            self.chunks_held.add(t_ns)
            self.frames_waiting.discard(t_ns)

    def on_command(self) -> None:
        """A command (trajectory) arrived; after :meth:`published` it can only be the current tick's."""
        if self.t_ns is not None:
            self.command_arrived = True

    def missing(self) -> list[str]:
        """What the simulator still waits for at ``t`` (empty: it may step)."""
        out = []
        t = "?" if self.t_ns is None else f"{self.t_ns / 1e9:.3f}"
        if not self.tick_acked:
            out.append(f"the executor's tick at t={t} s")
        elif self.command_sent and not self.command_arrived:
            out.append(f"the executor's command of the tick at t={t} s")
        if self.batch_until_ns is not None and self.batch_points is None:
            out.append(f"the executor's batch of the ticks after t={t} s (rule 7)")
        out += [f"the chunk predicted from the camera frame of t={s / 1e9:.3f} s" for s in self.blocking()]
        if self.frames_pending and not out:
            out.append(f"the camera frames of t={t} s to go out")
        return out

    def ready(self) -> bool:
        return self.t_ns is not None and not self.fault and not self.missing()

    def check_timeout(self, wall_s: float) -> str:
        """The fault text once the current wait has lasted longer than ``timeout_s`` (sets :attr:`fault`), else ""."""
        if self.fault or self.t_ns is None:
            return self.fault
        missing = self.missing()
        if missing and wall_s - self.waiting_since_s > self.settings.timeout_s:
            self.fault = f"lockstep: no {' and no '.join(missing)} within {self.settings.timeout_s:g} s of wall time"
        return self.fault


class ChunkRelease:
    """The executor's side: chunks kept aside until ``stamp + latency_s`` of simulated time (rule 3 of the module
    docstring). ``due(now_s)`` returns, in arrival order, every chunk whose release time has come."""

    def __init__(self, latency_s: float = DEFAULT_LATENCY_S):
        if not 0.0 <= float(latency_s) <= 10.0:
            raise ValueError(f"lockstep_latency_s={latency_s}: use 0..10 s of simulated time")
        self.latency_s = float(latency_s)
        self._pending: list[tuple[float, object]] = []

    def add(self, chunk, stamp_s: float) -> None:
        self._pending.append((float(stamp_s) + self.latency_s, chunk))

    def due(self, now_s: float) -> list:
        ready = [c for t, c in self._pending if t <= now_s + 1e-6]
        self._pending = [(t, c) for t, c in self._pending if t > now_s + 1e-6]
        return ready

    def clear(self) -> None:
        """Drop every chunk kept (the clock jumped back: they belong to the old run)."""
        self._pending = []

    def __len__(self) -> int:
        return len(self._pending)


def add_lockstep_argument(p) -> None:
    """``--lockstep`` of ``para-sim eval`` and ``para-sim sweep`` (one help text for both)."""
    p.add_argument(
        "--lockstep",
        action="store_true",
        help="lockstep evaluation: the simulator runs on /clock and steps only once the graph has answered "
        f"(each frame's chunk, each executor tick), chunks take effect after a fixed simulated latency "
        f"(chunk_executor lockstep_latency_s, default {DEFAULT_LATENCY_S} s, a GPU's); outcomes then depend on "
        "the seeds, not on the machine's load; --time-limit, --settle are simulated seconds (para_ros.sim.lockstep)",
    )
