"""Lockstep's rules and the A/B statistics, ROS-free: the simulator's gate, the executor's chunk release, the exact
McNemar test against hand-computed binomial tails (and scipy), the interleaving order, the --compare parsing."""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import pytest

from para_ros.deploy.ab_compare import interleaved_order, parse_compare
from para_ros.deploy.episodes import EpisodeRow
from para_ros.deploy.paired_stats import mcnemar_exact, paired_outcomes
from para_ros.sim.lockstep import (
    ChunkRelease,
    LockstepGate,
    LockstepSettings,
    chunk_ack,
    horizon_msg,
    parse_ack,
    parse_horizon,
    tick_ack,
)

T0 = 1_000_000_000_000  # an instant, ns
STEP = 10_000_000  # one 0.01 s step, ns


def gate(timeout_s: float = 5.0) -> LockstepGate:
    return LockstepGate(LockstepSettings(step_s=0.01, timeout_s=timeout_s))


def test_gate_waits_for_the_tick_its_command_and_the_frames_chunk():
    g = gate()
    assert g.needs_publish and not g.ready()
    g.published(T0, [T0], wall_s=0.0)
    assert not g.ready()
    g.on_ack(tick_ack(T0 - 10_000_000, True))  # an older tick: not this instant's
    assert not g.tick_acked
    g.on_ack(tick_ack(T0, True))
    assert not g.ready() and "command" in g.missing()[0]  # it said it sent one: wait for it
    g.on_command()
    assert not g.ready() and "chunk predicted from the camera frame" in g.missing()[0]
    g.on_ack(chunk_ack(T0))
    assert g.ready()
    # the next instant: no frame, a tick that sent nothing needs no command
    g.published(T0 + 10_000_000, [], wall_s=1.0)
    assert not g.ready()
    g.on_ack(tick_ack(T0 + 10_000_000, False))
    assert g.ready()


def test_gate_ignores_answers_from_before_a_reset_and_a_chunk_that_came_first_counts():
    g = gate()
    g.published(T0 + 5_000_000_000, [], wall_s=0.0)
    g.reset()  # simulated time restarts
    g.on_ack(tick_ack(T0 + 5_000_000_000, True))  # late answer from the old run: nothing is published yet
    g.published(T0, [T0], wall_s=0.0)
    g.on_ack(tick_ack(T0 + 5_000_000_000, False))  # from the old run (later than now): ignored
    assert not g.tick_acked
    g.on_ack(chunk_ack(T0))
    g.on_ack(tick_ack(T0, False))
    assert g.ready()


def test_gate_fault_names_what_never_came_after_the_timeout():
    g = gate(timeout_s=2.0)
    g.published(T0, [T0], wall_s=10.0)
    g.on_ack(tick_ack(T0, False))
    assert g.check_timeout(11.9) == "" and not g.fault
    text = g.check_timeout(12.1)
    assert "chunk predicted from the camera frame of t=1000.000 s" in text and "2 s of wall time" in text
    assert not g.ready()  # a fault holds until the reset
    g.on_ack(chunk_ack(T0))
    assert not g.ready()
    g.reset()
    assert g.fault == ""


def test_gate_asks_again_for_a_frame_whose_chunk_has_not_come_at_doubling_intervals():
    g = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, reask_s=2.0))
    g.published(T0, [], wall_s=100.0, frames_pending=True)
    assert g.due_reask(200.0) == []  # the frames have not gone out yet (they follow the tick)
    g.on_ack(tick_ack(T0, False))
    g.frames_published([T0], wall_s=101.0)
    assert g.due_reask(102.9) == []  # within reask_s of going out: the chunk may be on its way
    assert g.due_reask(103.1) == [T0]
    assert g.reask_waited_s == pytest.approx(2.1)  # what the simulator's log says it waited
    asks = [w for w in (104.0, 105.0, 107.2, 110.0, 115.0, 115.3, 131.0, 131.5) if g.due_reask(w)]
    assert asks == [107.2, 115.3, 131.5], "each interval twice the one before (4, 8, 16 s after 2)"
    g.on_ack(chunk_ack(T0))
    assert g.due_reask(1000.0) == [] and g.ready()
    # the next instant's frames start again at reask_s; a fault asks no more
    g.published(T0 + 10_000_000, [T0 + 10_000_000], wall_s=2000.0)
    g.on_ack(tick_ack(T0 + 10_000_000, False))
    assert g.due_reask(2002.5) == [T0 + 10_000_000]
    assert g.check_timeout(2601.0) and g.due_reask(2700.0) == []
    with pytest.raises(ValueError, match="lockstep_reask_s"):
        LockstepSettings(reask_s=0.0)


def test_held_at_the_run_limit_the_gate_asks_again_for_a_chunk_the_next_step_does_not_need_yet():
    """At ``lockstep_run_until_s`` the simulator waits for every chunk still on its way before it says it is held
    (the evaluator hands the arm over then): a frame lost there must be asked for again too, though no step needs its
    chunk yet (with a latency it is needed only 0.1 s on)."""
    g = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, reask_s=2.0, chunk_latency_s=0.1))
    g.published(T0 - STEP, [], wall_s=0.0)  # the first instant after the reset
    g.on_ack(tick_ack(T0 - STEP, False))
    g.published(T0, [], wall_s=100.0, frames_pending=True)
    g.on_ack(tick_ack(T0, False))
    g.frames_published([T0], wall_s=100.0)
    assert g.ready() and g.blocking() == [] and g.frames_waiting == {T0}
    assert g.due_reask(103.0) == [], "the next step does not need the chunk: no ask without every_waiting"
    assert g.due_reask(103.0, every_waiting=True) == [T0]
    assert g.due_reask(105.0, every_waiting=True) == [] and g.due_reask(107.1, every_waiting=True) == [T0]


def test_with_a_chunk_latency_the_gate_steps_on_until_the_chunk_is_needed():
    """chunk_latency_s 0.05: a frame at T0 holds only the step to T0 + 0.05 s (the executor's tick that releases its
    chunk); the chunk coming earlier lets it through; with 0 the frame holds at once."""
    g = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, chunk_latency_s=0.05))
    g.published(T0 - STEP, [], wall_s=0.0, frames_pending=True)  # the first instant after a reset, no frame
    g.on_ack(tick_ack(T0 - STEP, False))
    g.frames_published([], wall_s=0.0)
    g.published(T0, [], wall_s=0.0, frames_pending=True)
    g.on_ack(tick_ack(T0, False))
    g.frames_published([T0], wall_s=0.0)
    for k in range(1, 5):  # instants T0 + 0.01 .. T0 + 0.04 may be published: the chunk is not needed yet
        assert g.ready(), f"held at T0 + {k - 1} steps"
        g.published(T0 + k * STEP, [], wall_s=0.0)
        g.on_ack(tick_ack(T0 + k * STEP, False))
    assert not g.ready() and g.blocking() == [T0]  # stepping to T0 + 0.05 needs it
    assert "camera frame of t=1000.000 s" in g.missing()[0]
    g.on_ack(chunk_ack(T0))
    assert g.ready() and not g.frames_waiting
    now = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0))
    now.published(T0, [T0], wall_s=0.0)
    now.on_ack(tick_ack(T0, False))
    assert not now.ready() and now.blocking() == [T0]
    # the first instant after a reset holds at once whatever the latency (it may be sent again after a /clock hop)
    first = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, chunk_latency_s=0.05))
    first.published(T0, [T0], wall_s=0.0)
    first.on_ack(tick_ack(T0, False))
    assert not first.ready() and first.blocking() == [T0]
    with pytest.raises(ValueError, match="lockstep_chunk_latency_s"):
        LockstepSettings(chunk_latency_s=-0.1)


def test_a_batch_is_waited_for_and_holds_for_a_chunk_needed_by_its_end():
    """Rule 7: with a horizon out, the gate waits for the batch too; the simulator steps into the batch while the
    chunks it holds allow, and a frame's chunk needed by a step inside it holds it there."""
    g = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, chunk_latency_s=0.1))
    g.published(T0 - STEP, [], wall_s=0.0)  # the first instant after the reset: none of the frames below
    g.published(T0, [], wall_s=0.0, frames_pending=True)
    assert g.steps_until_blocked([T0]) == 10  # the frame going out at T0 is needed by T0 + 0.1 s
    g.expect_batch(T0 + 10 * STEP)
    g.on_ack(tick_ack(T0, False))
    g.frames_published([T0], wall_s=0.0)
    assert not g.ready() and "batch of the ticks after t=1000.000 s" in g.missing()[0]
    g.on_batch(T0 - STEP, [None] * 3)  # another instant's (before a reset): ignored
    assert g.batch_points is None
    with pytest.raises(ValueError, match="the horizon allowed 9"):
        g.on_batch(T0, [None] * 10)
    g.on_batch(T0, [None] * 9)  # its ticks T0 + 0.01 .. 0.09 s, then the state of T0 + 0.1 s
    for k in range(9):  # into the batch while the model computes: the chunk is not needed yet
        assert g.ready(), f"held {k} steps into the batch"
        g.batch_step_taken()
    assert not g.ready() and g.blocking() == [T0]  # the step to T0 + 0.1 s needs it
    g.on_ack(chunk_ack(T0))
    assert g.ready()
    short = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, chunk_latency_s=0.1))
    short.published(T0 - STEP, [], wall_s=0.0)
    short.published(T0, [T0], wall_s=0.0)
    short.expect_batch(T0 + 10 * STEP)
    short.on_ack(tick_ack(T0, False))
    short.on_batch(T0, [None] * 8)  # stopped early (a tick needed its state): to T0 + 0.09 s, the chunk not yet
    assert short.ready()
    assert short.steps_until_blocked() == 10
    first = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, chunk_latency_s=0.1))
    first.published(T0, [], wall_s=0.0, frames_pending=True)
    assert first.steps_until_blocked([T0]) == 1  # the first instant's frames hold at once: no batch there
    assert parse_horizon(horizon_msg(T0, T0 + 10 * STEP, STEP)) == (T0, T0 + 10 * STEP, STEP)
    for bad in ([T0, T0], [T0, T0, STEP], [T0, T0 + STEP, 0]):
        with pytest.raises(ValueError, match="lockstep horizon"):
            parse_horizon(bad)


def test_episode_chunks_counts_the_frames_strictly_inside_the_episode():
    from para_ros.deploy.episodes import episode_chunks

    offset_s = 1000.0  # graph clock minus episode time
    stamps = [int(round((offset_s + t) * 1e9)) for t in (1.4, 1.5, 1.6, 3.0, 5.4, 5.5)]
    assert episode_chunks(stamps, offset_s, 1.5, 5.5) == 3  # 1.6, 3.0, 5.4: not the hand-over's, not the end's
    assert episode_chunks(stamps, offset_s, 1.5, 3.0) == 1


def test_a_lockstep_graph_gives_the_simulator_the_executors_latency():
    from para_ros.deploy import graph
    from para_ros.deploy.closed_loop import EvalSettings, deploy_settings

    def tied(executor_extra=None, sim_extra=None, lockstep=True):
        plan = graph.plan(deploy_settings(EvalSettings(checkpoint="checkpoints/pick_place", lockstep=lockstep)))
        merged = [(spec, {**o, **({"chunk_executor": executor_extra or {}, "sim_node": sim_extra or {}}).get(spec.name, {})})
                  for spec, o in plan]  # fmt: skip
        graph.tie_lockstep_latency(merged)
        return dict((spec.name, o) for spec, o in merged)["sim_node"]

    import yaml

    shipped = yaml.safe_load(open("config/executor.yaml"))["chunk_executor"]["ros__parameters"]["lockstep_latency_s"]
    assert tied()["lockstep_chunk_latency_s"] == shipped
    assert tied({"lockstep_latency_s": 0.2})["lockstep_chunk_latency_s"] == 0.2
    assert tied(sim_extra={"lockstep_chunk_latency_s": 0.0})["lockstep_chunk_latency_s"] == 0.0  # the user's wins
    assert "lockstep_chunk_latency_s" not in tied(lockstep=False)


def test_the_tf_grid_holds_every_frame_and_every_policy_step_against_a_brute_force_search():
    from para_ros.sim.lockstep import tf_grid_steps

    step_s = 0.01

    def brute(periods_s):
        """The largest n such that every multiple of every period is a multiple of n steps (over 2 s of instants)."""
        instants = {round(k * p / step_s, 6) for p in periods_s for k in range(int(2.0 / p) + 1)}
        if any(abs(i - round(i)) > 1e-6 for i in instants):
            return 1
        return max(n for n in range(1, 201) if all(round(i) % n == 0 for i in instants))

    for periods in ([0.1, 0.1, 0.2], [0.1, 0.1, 0.05], [0.1, 0.15], [0.3, 0.2], [0.1, 4 / 30], [1 / 30, 0.1], [0.07]):
        assert tf_grid_steps(step_s, periods) == brute(periods), periods
    for bad in ([0.0], [float("nan")], [-0.1]):
        with pytest.raises(ValueError, match="positive"):
            tf_grid_steps(step_s, bad)


def test_lockstep_settings_take_a_tf_period_of_whole_steps_only():
    assert LockstepSettings(tf_period_s=0.1).tf_period_steps == 10
    assert LockstepSettings(tf_period_s=0.07).tf_period_steps == 7
    assert LockstepSettings().tf_period_steps == 1  # 0: every instant
    for bad in (0.015, -0.1, 0.105, 11.0):
        with pytest.raises(ValueError, match="lockstep_tf_period_s"):
            LockstepSettings(tf_period_s=bad)


def test_a_lockstep_graph_gives_the_simulator_the_tf_grid_of_its_cameras_and_its_policy(tmp_path):
    import json
    import shutil

    from para_ros.deploy import graph
    from para_ros.deploy.closed_loop import EvalSettings, deploy_settings

    def tied(checkpoint="checkpoints/pick_place", sim_extra=None, lockstep=True):
        plan = graph.plan(deploy_settings(EvalSettings(checkpoint=checkpoint, lockstep=lockstep)))
        merged = [(spec, {**o, **({"sim_node": sim_extra or {}}).get(spec.name, {})}) for spec, o in plan]
        graph.tie_lockstep(merged)
        return dict((spec.name, o) for spec, o in merged)["sim_node"]

    # the shipped policy steps 0.2 s (frame_stride 2 at 10 Hz), the cameras run at 10 Hz: every 0.1 s
    assert tied()["lockstep_tf_period_s"] == pytest.approx(0.1)
    assert tied(sim_extra={"wrist_cam_rate_hz": 20.0})["lockstep_tf_period_s"] == pytest.approx(0.05)
    assert tied(sim_extra={"lockstep_tf_period_s": 0.0})["lockstep_tf_period_s"] == 0.0  # the user's wins
    assert tied(sim_extra={"lockstep_batch": False}).get("lockstep_tf_period_s") is None  # per tick: every instant
    assert "lockstep_tf_period_s" not in tied(lockstep=False)
    # a policy stepping 4/30 s: its past steps fall between the 10 ms instants' grid of 0.1 s -> every instant
    odd = tmp_path / "odd"
    shutil.copytree("checkpoints/pick_place", odd)
    meta = json.loads((odd / "config.json").read_text())
    meta["config"].update(frame_stride=4, dataset_fps=30.0)
    (odd / "config.json").write_text(json.dumps(meta))
    assert tied(str(odd))["lockstep_tf_period_s"] == pytest.approx(0.01)
    (odd / "config.json").write_text("{")  # unreadable: left to the inference node, which says why
    assert "lockstep_tf_period_s" not in tied(str(odd))


def test_parse_ack_refuses_other_layouts():
    assert parse_ack([0, 5, 1]) == (0, 5, 1)
    with pytest.raises(ValueError, match="expected"):
        parse_ack([3, 5, 1])
    with pytest.raises(ValueError, match="expected"):
        parse_ack([0, 5])


def test_chunk_release_after_the_latency_in_arrival_order():
    r = ChunkRelease(latency_s=0.05)
    r.add("a", 1000.00)
    r.add("b", 1000.01)
    assert r.due(1000.04) == []
    assert r.due(1000.05) == ["a"]  # at stamp + latency exactly
    assert r.due(1000.10) == ["b"]
    r.add("c", 1000.2)
    r.clear()
    assert r.due(2000.0) == [] and len(r) == 0
    with pytest.raises(ValueError, match="lockstep_latency_s"):
        ChunkRelease(-0.1)


def binomial_two_sided_by_hand(b: int, c: int) -> float:
    n, k = b + c, min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


@pytest.mark.parametrize(
    "b, c, p",
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),  # 2 * 0.5^5 = 0.0625
        (1, 6, 2 * 8 / 128),  # 2 * (1 + 7) / 2^7 = 0.125
        (8, 2, 2 * 56 / 1024),  # 2 * (1 + 10 + 45) / 2^10 = 0.109375
        (3, 3, 1.0),  # 2 * 42/64 > 1: clipped
        (0, 10, 2 / 1024),  # 0.001953125
    ],
)
def test_mcnemar_exact_against_hand_computed_tails(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(p, abs=1e-12)  # symmetric


def test_mcnemar_exact_against_scipy_binomtest():
    stats = pytest.importorskip("scipy.stats")
    for b, c in ((2, 9), (4, 11), (7, 7), (0, 3), (12, 30)):
        assert mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_paired_outcomes_counts_discordant_seeds():
    def rows(outcomes):
        return [EpisodeRow(k, 100 + k, o, 1.0, 0.0, 0.0, 0, 0) for k, o in enumerate(outcomes)]

    a = rows(["success", "success", "timeout", "success", "no_grasp", "success"])
    b = rows(["success", "no_grasp", "success", "timeout", "no_grasp", "fault"])
    p = paired_outcomes(a, b)
    assert (p["both"], p["a_only"], p["b_only"], p["neither"]) == (1, 3, 1, 1)
    assert p["a_only_seeds"] == [101, 103, 105] and p["b_only_seeds"] == [102]
    assert p["mcnemar_p"] == pytest.approx(binomial_two_sided_by_hand(3, 1))  # 2 * 5/16 = 0.625
    assert p["difference"] == pytest.approx(2 / 6)
    # only the seeds both variants finished are paired
    assert paired_outcomes(a, b[:3])["seeds"] == 3


def test_interleaved_order_runs_every_variant_on_a_seed_before_the_next_seed():
    assert interleaved_order([7, 8], 3) == [(7, 0), (7, 1), (7, 2), (8, 0), (8, 1), (8, 2)]


def test_parse_compare_values_checked_by_the_node_table():
    node, name, values = parse_compare("chunk_executor:blend_mode=latest,ensemble")
    assert (node, name, values) == ("chunk_executor", "blend_mode", ["latest", "ensemble"])
    _, _, numbers = parse_compare("chunk_executor:lockstep_latency_s=0.05, 0.2")
    assert numbers == [0.05, 0.2]
    for bad, match in (
        ("blend_mode=latest,ensemble", "NODE:PARAM"),
        ("chunk_executor:blend_mode=latest", "two"),
        ("chunk_executor:blend_mode=latest,latest", "distinct"),
        ("chunk_executor:blend_mode=latest,nope", "nope"),
        ("chunk_executor:no_such=1,2", "no_such"),
    ):
        with pytest.raises(ValueError, match=match):
            parse_compare(bad)


def test_lockstep_graph_puts_every_node_on_the_simulators_clock_and_only_for_the_sim():
    from para_ros.deploy import graph

    plan = {spec.name: o for spec, o in graph.plan(graph.DeploySettings(robot="sim", checkpoint="/x", lockstep="true"))}
    assert plan["sim_node"] == {"publish_clock": True, "lockstep": True}
    assert plan["inference_node"] == {
        "checkpoint": "/x",
        "use_sim_time": True,
        "tf_timeout_s": graph.LOCKSTEP_TF_TIMEOUT_S,
        "lockstep_ack_topic": "/chunk_executor/lockstep_ack",  # a refused frame answered where the simulator listens
    }
    assert plan["chunk_executor"] == {
        "backend": "joint_trajectory",
        "auto_engage": True,
        "use_sim_time": True,
        "lockstep": True,
    }
    plain = {spec.name: o for spec, o in graph.plan(graph.DeploySettings(robot="sim", checkpoint="/x"))}
    assert "use_sim_time" not in plain["inference_node"] and "lockstep" not in plain["sim_node"]
    with pytest.raises(ValueError, match="robot sim only"):
        graph.DeploySettings(robot="i2rt", lockstep=True)


def test_eval_and_deploy_take_lockstep_and_compare():
    from para_ros.commands.deploy import build_parser
    from para_ros.commands.sim import build_parser as sim_parser

    args = sim_parser().parse_args(
        ["eval", "--checkpoint", "c", "--lockstep", "--compare", "inference_node:fast_path=false,true"]
    )
    assert args.lockstep and args.compare == "inference_node:fast_path=false,true"
    assert build_parser().parse_args(["--lockstep"]).lockstep
    assert parse_compare(args.compare)[2] == [False, True]


def test_gate_holds_the_frames_until_the_tick_is_answered():
    g = gate()
    g.published(T0, [], wall_s=0.0, frames_pending=True)
    g.on_ack(tick_ack(T0, True))
    assert not g.tick_answered()  # its command is not in yet
    g.on_command()
    assert g.tick_answered() and not g.ready()  # the frames have not gone out
    assert g.missing() == ["the camera frames of t=1000.000 s to go out"]
    g.frames_published([T0])
    assert not g.ready()
    g.on_ack(chunk_ack(T0))
    assert g.ready()
    g.published(T0 + STEP, [], wall_s=0.0, frames_pending=True)
    g.on_ack(tick_ack(T0 + STEP, False))
    g.frames_published([])  # none due at this instant
    assert g.ready()


def test_a_lockstep_fault_is_no_attempt_of_the_policy():
    """Faults (the evaluation's own failure) stay out of the rate: 3 successes of 4 judged, 2 faults aside."""
    from para_ros.deploy.episodes import summarise
    from para_ros.sim.pick_place import wilson_interval

    outcomes = ["success", "fault", "success", "no_grasp", "fault", "success"]
    s = summarise([EpisodeRow(k, 100 + k, o, 1.0, 0.0, 0.0, 0, 0) for k, o in enumerate(outcomes)])
    assert (s["episodes"], s["successes"], s["faults"]) == (4, 3, 2)
    assert s["success_rate"] == pytest.approx(0.75) and s["wilson95"] == pytest.approx(list(wilson_interval(3, 4)))
    assert s["outcomes"]["fault"] == 2 and s["outcomes"]["no_grasp"] == 1


class _FakeEvaluator:
    """A TaskClient stand-in: counts the chunks it saw, records each lockstep_run_until_s it set on the simulator; the
    chunk comes once the simulator has been let run ``chunk_after_nudges`` times."""

    def __init__(self, chunk_after_nudges: int | None):
        self.chunks, self.run_until, self.chunk_after = 0, [], chunk_after_nudges

    def call(self, name, request=None, timeout_s=10.0):
        assert name == "params"
        (param,) = request.parameters
        assert param.name == "lockstep_run_until_s"
        self.run_until.append(param.value.double_value)
        if self.chunk_after is not None and len(self.run_until) >= self.chunk_after:
            self.chunks = 1
        return SimpleNamespace(results=[SimpleNamespace(successful=True, reason="")])


def test_waiting_for_the_first_chunk_in_lockstep_lets_the_held_simulator_run_one_frame_at_a_time():
    """A first chunk the evaluator missed is never followed by another while the simulator holds at its first
    instant: in lockstep the wait lets it run LOCKSTEP_NUDGE_S further every nudge_after_s until a chunk is seen;
    in real time, or once a chunk came, it sets nothing."""
    from para_ros.deploy.episodes import LOCKSTEP_NUDGE_S, wait_for_first_chunk

    ev = _FakeEvaluator(chunk_after_nudges=3)
    wait_for_first_chunk(ev, None, threading.Event(), timeout_s=10.0, lockstep=True, nudge_after_s=0.05)
    assert ev.chunks == 1
    assert ev.run_until == pytest.approx([LOCKSTEP_NUDGE_S, 2 * LOCKSTEP_NUDGE_S, 3 * LOCKSTEP_NUDGE_S])

    real_time = _FakeEvaluator(chunk_after_nudges=None)
    with pytest.raises(RuntimeError, match="no action chunk within 0 s"):
        wait_for_first_chunk(real_time, None, threading.Event(), timeout_s=0.3, lockstep=False, nudge_after_s=0.05)
    assert real_time.run_until == []

    seen = _FakeEvaluator(chunk_after_nudges=None)
    seen.chunks = 1
    wait_for_first_chunk(seen, None, threading.Event(), timeout_s=10.0, lockstep=True, nudge_after_s=0.0)
    assert seen.run_until == []
