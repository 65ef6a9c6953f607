"""One pick-and-place episode in lockstep mode (``para-sim eval --lockstep``, ``para-deploy --backend sim
--lockstep``): the episode procedure of :mod:`para_ros.deploy.closed_loop` on simulated time.

Every moment that decides the outcome is a simulated instant, so the episode does not depend on how fast this machine
answers:

1. ``/chunk_executor/stop``; ``lockstep_run_until_s`` = ``settle_s`` (the simulator holds where it is), then the task
   reset (simulated time restarts at 0);
2. the simulator runs to ``settle_s`` and holds there; the evaluator waits until ``~/task_state`` says it is held with
   every answer for that instant in (``lockstep_held``), then calls ``/chunk_executor/resume``: the executor takes
   the arm between two simulated instants, always the same two;
3. ``lockstep_run_until_s`` = ``settle_s + time_limit_s``; the episode is judged on the task states' simulated times:
   success once the cube has rested released on the pad for ``success_hold_s`` of simulated time, else the outcome
   at the time limit (:class:`para_ros.sim.pick_place.EpisodeMonitor`);
4. ``fault`` when the simulator reports a lockstep fault (an answer that did not come within its wall-time limit; the
   reason is kept in the row) or stops publishing altogether; the evaluation goes on with the next episode.
"""
from __future__ import annotations

import time

from para_ros.sim.pick_place import EpisodeMonitor, Judgement

HALF_STEP_S = 0.005  # simulated instants are compared with half the simulator's 0.01 s step of slack
SILENT_MARGIN_S = 30.0  # wall seconds beyond the simulator's own answer timeout before a silent simulator is a fault
DIAGNOSTICS_WAIT_S = 0.6  # the executor's counters come on /diagnostics at 2 Hz: wait for one after a time limit


def set_run_until(ev, run_until_s: float, timeout_s: float = 10.0) -> None:
    """Set ``lockstep_run_until_s`` on ``/sim_node`` (RuntimeError when refused)."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    req = SetParameters.Request()
    req.parameters = [Parameter(name="lockstep_run_until_s", value=ParameterValue(
        type=ParameterType.PARAMETER_DOUBLE, double_value=float(run_until_s)))]
    res = ev.call("params", req, timeout_s)
    if not res.results[0].successful:
        raise RuntimeError(f"sim_node refused lockstep_run_until_s={run_until_s}: {res.results[0].reason} (is it "
                           "running with lockstep:=true?)")


def _next_states(ev, seed: int) -> list[dict]:
    with ev.lock:
        states, ev.states = ev.states, []
    return [st for st in states if st.get("seed") == seed]


def run_lockstep_episode(ev, settings, k: int, seed: int, stop, record: bool, timeout_s: float = 60.0):
    """Episode ``k`` (layout ``seed``) in lockstep; an :class:`para_ros.deploy.closed_loop.EpisodeRow` whose
    ``duration_s`` is simulated time and ``wall_s`` the wall time the episode took. ``timeout_s``: the simulator's
    ``lockstep_timeout_s`` (a simulator silent for that plus a margin is a fault)."""
    from para_ros.deploy.closed_loop import EpisodeRow

    wall0 = time.monotonic()
    ev.call("stop")
    set_run_until(ev, settings.settle_s)
    with ev.lock:
        ev.states.clear()
    layout = ev.reset_task(seed)
    silent_s = timeout_s + SILENT_MARGIN_S
    fault = ""
    # 2. run to the settle time, hand the arm over there
    last_heard = time.monotonic()
    held = False
    while not held and not fault:
        if stop.is_set():
            break
        time.sleep(0.02)
        for st in _next_states(ev, seed):
            last_heard = time.monotonic()
            fault = fault or st.get("lockstep_fault", "")
            held = held or (st.get("lockstep_held", False) and st["sim_time_s"] >= settings.settle_s - HALF_STEP_S)
        if time.monotonic() - last_heard > silent_s:
            fault = f"lockstep: the simulator published no task state for {silent_s:.0f} s of wall time"
    with ev.lock:
        chunks0, rejected0, truncated0 = ev.chunks, ev.rejected, ev.truncated
    ev.frames = []
    ev.record_frames = record
    start_s = settings.settle_s
    end_s = settings.settle_s + settings.time_limit_s
    monitor = EpisodeMonitor()
    success_since = None
    outcome = None
    sim_now = start_s
    if not fault and not stop.is_set():
        ev.call("resume")
        set_run_until(ev, end_s)
        last_heard = time.monotonic()
    while outcome is None and not fault:
        if stop.is_set():
            break
        time.sleep(0.02)
        for st in _next_states(ev, seed):
            last_heard = time.monotonic()
            if st.get("lockstep_fault"):
                fault = st["lockstep_fault"]
                break
            if st["sim_time_s"] < start_s - HALF_STEP_S:
                continue
            sim_now = st["sim_time_s"]
            j = monitor.update(Judgement(st["state"], st["place_error_m"], st["cube_height_m"], st["held"]))
            if j.success:
                success_since = sim_now if success_since is None else success_since
            else:
                success_since = None
            if success_since is not None and sim_now - success_since >= settings.success_hold_s - HALF_STEP_S:
                outcome = "success"
                break
            if sim_now >= end_s - HALF_STEP_S:
                time.sleep(DIAGNOSTICS_WAIT_S)  # the executor's rejection count at the limit, for "limits"
                with ev.lock:
                    chunks, rejected = ev.chunks - chunks0, ev.rejected - rejected0
                outcome = monitor.outcome(limits_hit=chunks > 0 and rejected > 0.5 * chunks)
                break
        if outcome is None and not fault and time.monotonic() - last_heard > silent_s:
            fault = f"lockstep: the simulator published no task state for {silent_s:.0f} s of wall time"
    if stop.is_set() and outcome is None and not fault:
        outcome = monitor.outcome()
    ev.record_frames = False
    try:
        set_run_until(ev, 0.0)  # hold the simulator until the next episode
    except RuntimeError:
        pass
    with ev.lock:
        chunks, rejected, truncated = ev.chunks - chunks0, ev.rejected - rejected0, ev.truncated - truncated0
    last = monitor.last
    return EpisodeRow(k, seed, "fault" if fault else outcome, max(0.0, sim_now - start_s),
                      last.place_error_m if last else float("nan"), monitor.max_lift_m, chunks, rejected, layout,
                      truncated, fault=fault, wall_s=time.monotonic() - wall0)
