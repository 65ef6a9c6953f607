"""A horizon or a batch lost on its way (rule 5 for the batch, para_ros.sim.lockstep): the simulator's gate asks for
the horizon again at doubling intervals once the tick is answered, and the executor's lockstep answers a horizon asked
again with the batch it already sent (its ticks not run twice), a horizon it never received with the batch it would
have sent, and never answers a new run's horizon with a batch from before a reset. Without it a batch lost once (a
reliable writer drops what it sends before it has matched the reader: the first batch of a graph just started on a
loaded machine) held an evaluation for the simulator's whole timeout, then ended the episode as a fault."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")

import rclpy  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Int64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from para_ros.nodes.lockstep_hooks import ExecutorLockstep, batch_commands  # noqa: E402
from para_ros.sim.lockstep import LockstepGate, LockstepSettings, horizon_msg, tick_ack  # noqa: E402
from para_ros.stamps import set_stamp  # noqa: E402

T0 = 1_000_000_000_000
STEP = 10_000_000


def test_gate_asks_for_the_horizon_again_once_the_tick_is_answered_at_doubling_intervals():
    g = LockstepGate(LockstepSettings(step_s=0.01, timeout_s=600.0, reask_s=2.0))
    g.published(T0, [], wall_s=100.0)
    g.expect_batch(T0 + 5 * STEP, wall_s=100.0)
    assert not g.due_horizon_reask(200.0), "the tick is not answered yet: the state may be what was lost"
    g.on_ack(tick_ack(T0, False))
    assert not g.due_horizon_reask(101.9)
    assert g.due_horizon_reask(102.1)
    asks = [w for w in (103.0, 106.0, 106.2, 110.0, 114.3, 130.0, 130.4) if g.due_horizon_reask(w)]
    assert asks == [106.2, 114.3, 130.4], "each interval twice the one before (4, 8, 16 s after 2)"
    g.on_batch(T0, [None] * 4)
    assert not g.due_horizon_reask(1000.0) and g.ready()
    # the next instant starts again at reask_s; no horizon (one step), nothing to ask; a fault asks no more
    g.published(T0 + 5 * STEP, [], wall_s=2000.0)
    g.on_ack(tick_ack(T0 + 5 * STEP, False))
    assert not g.due_horizon_reask(2100.0)
    g.expect_batch(T0 + 9 * STEP, wall_s=2000.0)
    assert g.due_horizon_reask(2002.5)
    assert g.check_timeout(2601.0) and not g.due_horizon_reask(2700.0)


class _Recorder:
    topic_name = "/recorded"

    def __init__(self):
        self.sent = []

    @staticmethod
    def get_subscription_count() -> int:
        return 1

    def publish(self, msg):
        self.sent.append(msg)


class _Backend:
    gripper_pub = None

    @staticmethod
    def make_msg(position: float) -> JointTrajectory:
        msg = JointTrajectory()
        msg.joint_names = ["j1"]
        msg.points = [JointTrajectoryPoint(positions=[float(position)])]
        return msg

    def send(self, command) -> None:
        pass


class _Core:
    @staticmethod
    def needs_measured_joints() -> bool:
        return False


class _ExecutorStandIn(Node):
    """What ExecutorLockstep reads of the chunk executor: its ticks count and command the tick's time."""

    def __init__(self, context):
        super().__init__("horizon_reask_test", context=context)
        self.backend, self.core, self.state_watch = _Backend(), _Core(), None
        self.ticks: list[float] = []

    def take_chunk(self, chunk, now_s):
        pass

    def command_at(self, now_s: float, read_state: bool = True):
        self.ticks.append(now_s)
        return now_s  # a command that says when it was computed

    def publish_commanded_pose(self, command):
        pass

    def _on_tick_error(self, err):
        raise err


@pytest.fixture
def hooks():
    from ros_helpers import private_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=private_domain_id())
    node = _ExecutorStandIn(ctx)
    p = {
        "lockstep_latency_s": 0.2,
        "lockstep_ack_topic": "/horizon_reask_test/ack",
        "lockstep_batch_topic": "/horizon_reask_test/batch",
        "lockstep_horizon_topic": "/horizon_reask_test/horizon",
        "joint_states_topic": "/horizon_reask_test/joint_states",
    }
    h = ExecutorLockstep(node, p)
    h.pub, h.batch_pub = _Recorder(), _Recorder()
    yield h, node
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)


def _state(t_ns: int) -> JointState:
    msg = JointState(name=["j1"], position=[0.0])
    set_stamp(msg.header.stamp, t_ns)
    return msg


def _horizon(t_ns: int, steps: int) -> Int64MultiArray:
    return Int64MultiArray(data=horizon_msg(t_ns, t_ns + steps * STEP, STEP))


def _batch_times(msg) -> tuple[int, list[float]]:
    t_ns, commands = batch_commands(msg)
    return t_ns, [c.points[0].positions[0] for c in commands]


def test_a_horizon_asked_again_gets_the_same_batch_and_its_ticks_run_once(hooks):
    h, node = hooks
    h._on_joint_state(_state(T0))
    h._on_horizon(_horizon(T0, 5))
    assert len(h.batch_pub.sent) == 1 and len(node.ticks) == 5  # the state's tick and the batch's four
    first = _batch_times(h.batch_pub.sent[0])
    assert first == (T0, pytest.approx([(T0 + k * STEP) * 1e-9 for k in range(1, 5)]))
    h._on_horizon(_horizon(T0, 5))  # asked again: its batch was lost
    assert len(h.batch_pub.sent) == 2 and len(node.ticks) == 5, "the batch's ticks ran again"
    assert _batch_times(h.batch_pub.sent[1]) == first


def test_a_lost_horizon_asked_again_is_answered_as_it_would_have_been(hooks):
    h, node = hooks
    t1 = T0 + 5 * STEP
    h._on_joint_state(_state(T0))
    h._on_horizon(_horizon(T0, 5))
    h._on_joint_state(_state(t1))  # the horizon of t1 is lost: nothing to answer yet
    assert len(h.batch_pub.sent) == 1
    h._on_horizon(_horizon(t1, 4))
    assert _batch_times(h.batch_pub.sent[-1]) == (t1, pytest.approx([(t1 + k * STEP) * 1e-9 for k in range(1, 4)]))


def test_after_a_reset_an_old_batch_never_answers_a_horizon_of_the_same_instant(hooks):
    h, node = hooks
    h._on_joint_state(_state(T0))
    h._on_horizon(_horizon(T0, 5))
    h.clear()  # the clock jumped back: a new run, whose instants restart at the epoch
    h._on_horizon(_horizon(T0, 5))  # the new run's horizon before its state
    assert len(h.batch_pub.sent) == 1, "the old run's batch answered the new run's horizon"
    h._on_joint_state(_state(T0))
    assert len(h.batch_pub.sent) == 2 and len(node.ticks) == 10  # answered once its state came, ticks run anew
