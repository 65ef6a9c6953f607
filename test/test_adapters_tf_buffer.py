"""tf Buffer contract (para_ros.adapters.tf, whichever implementation is active) against hand-composed matrices and
scipy's Slerp. No DDS here: transforms are inserted directly, as the listener would."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from geometry_msgs.msg import TransformStamped
from rclpy.duration import Duration
from rclpy.time import Time
from scipy.spatial.transform import Rotation, Slerp

from para_ros.adapters.tf import (
    Buffer,
    ConnectivityException,
    ExtrapolationException,
    LookupException,
    TransformException,
)
from para_ros.adapters.transforms import invert_matrix, make_matrix, transform_to_matrix

pytestmark = pytest.mark.ros  # uses rclpy's Time/Duration (no DDS traffic)


def random_T(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return make_matrix(rng.normal(size=3), Rotation.random(random_state=seed).as_quat())


def stamped(parent: str, child: str, T: np.ndarray, t_s: float = 0.0) -> TransformStamped:
    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = parent, child
    msg.header.stamp = Time(nanoseconds=int(round(t_s * 1e9))).to_msg()
    q = Rotation.from_matrix(T[:3, :3]).as_quat()
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = T[:3, 3]
    msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z, msg.transform.rotation.w = q
    return msg


def at(t_s: float) -> Time:
    return Time(nanoseconds=int(round(t_s * 1e9)))


@pytest.fixture
def tree():
    """base -> arm -> wrist -> wrist_cam (dynamic arm/wrist), base -> table -> scene_cam (static); map -> odom apart."""
    T = {
        name: random_T(i)
        for i, name in enumerate(["base_arm", "arm_wrist", "wrist_cam", "base_table", "table_scene", "map_odom"])
    }
    buf = Buffer()
    for t_s in (1.0, 2.0):  # the same value at both stamps: lookups anywhere in [1, 2] see exactly these
        assert buf.set_transform(stamped("base", "arm", T["base_arm"], t_s), "test")
        assert buf.set_transform(stamped("arm", "wrist", T["arm_wrist"], t_s), "test")
    assert buf.set_transform_static(stamped("wrist", "wrist_cam", T["wrist_cam"]), "test")
    assert buf.set_transform_static(stamped("base", "table", T["base_table"]), "test")
    assert buf.set_transform_static(stamped("table", "scene_cam", T["table_scene"]), "test")
    assert buf.set_transform_static(stamped("map", "odom", T["map_odom"]), "test")
    return buf, T


def test_chain_through_common_ancestor_matches_hand_composition(tree):
    buf, T = tree
    T_base_wristcam = T["base_arm"] @ T["arm_wrist"] @ T["wrist_cam"]
    T_base_scenecam = T["base_table"] @ T["table_scene"]
    result = buf.lookup_transform("scene_cam", "wrist_cam", at(1.5))
    assert result.header.frame_id == "scene_cam" and result.child_frame_id == "wrist_cam"
    assert Time.from_msg(result.header.stamp).nanoseconds == at(1.5).nanoseconds
    np.testing.assert_allclose(transform_to_matrix(result), invert_matrix(T_base_scenecam) @ T_base_wristcam, atol=1e-9)
    # Down the tree, up the tree, and the identity.
    np.testing.assert_allclose(
        transform_to_matrix(buf.lookup_transform("base", "wrist_cam", at(1.5))), T_base_wristcam, atol=1e-9
    )
    np.testing.assert_allclose(
        transform_to_matrix(buf.lookup_transform("wrist_cam", "base", at(1.5))),
        np.linalg.inv(T_base_wristcam),
        atol=1e-9,
    )
    np.testing.assert_allclose(transform_to_matrix(buf.lookup_transform("arm", "arm", at(1.5))), np.eye(4))


def test_lookup_matrix_is_lookup_transform_as_a_matrix(tree):
    """``lookup_matrix`` (what the nodes call): the hand-composed chain, the same numbers as ``lookup_transform``'s
    message, the same exceptions; its static links' cached matrices are not handed out (a caller's edit of one
    result must not change the next)."""
    buf, T = tree
    T_base_wristcam = T["base_arm"] @ T["arm_wrist"] @ T["wrist_cam"]
    got = buf.lookup_matrix("base", "wrist_cam", at(1.5))
    np.testing.assert_allclose(got, T_base_wristcam, atol=1e-9)
    np.testing.assert_allclose(got, transform_to_matrix(buf.lookup_transform("base", "wrist_cam", at(1.5))), atol=1e-12)
    static = buf.lookup_matrix("table", "scene_cam", at(1.5))
    np.testing.assert_allclose(static, T["table_scene"], atol=1e-9)
    static[:3, 3] += 1.0
    np.testing.assert_allclose(buf.lookup_matrix("table", "scene_cam", at(1.5)), T["table_scene"], atol=1e-9)
    with pytest.raises(ExtrapolationException):
        buf.lookup_matrix("base", "wrist_cam", at(2.5))
    with pytest.raises(ConnectivityException):
        buf.lookup_matrix("base", "odom", at(1.5))


def test_interpolation_matches_linear_and_slerp():
    T0, T1 = random_T(10), random_T(11)
    buf = Buffer()
    buf.set_transform(stamped("base", "tool", T0, 10.0), "test")
    buf.set_transform(stamped("base", "tool", T1, 10.4), "test")
    slerp = Slerp([10.0, 10.4], Rotation.from_matrix(np.stack([T0[:3, :3], T1[:3, :3]])))
    for t_s in (10.0, 10.1, 10.2, 10.37, 10.4):
        fraction = (t_s - 10.0) / 0.4
        result = transform_to_matrix(buf.lookup_transform("base", "tool", at(t_s)))
        np.testing.assert_allclose(result[:3, 3], (1 - fraction) * T0[:3, 3] + fraction * T1[:3, 3], atol=1e-9)
        np.testing.assert_allclose(result[:3, :3], slerp([t_s])[0].as_matrix(), atol=1e-9)


def test_time_zero_is_latest_common_time():
    buf = Buffer()
    for t_s in (1.0, 2.0, 3.0):
        buf.set_transform(stamped("base", "arm", random_T(int(t_s)), t_s), "test")
    for t_s in (1.5, 2.5):
        buf.set_transform(stamped("arm", "hand", random_T(int(10 * t_s)), t_s), "test")
    buf.set_transform_static(stamped("hand", "cam", random_T(99)), "test")
    result = buf.lookup_transform("base", "cam", Time())
    assert Time.from_msg(result.header.stamp).nanoseconds == at(2.5).nanoseconds
    np.testing.assert_allclose(
        transform_to_matrix(result), transform_to_matrix(buf.lookup_transform("base", "cam", at(2.5))), atol=1e-12
    )
    # Only static links: time 0 works and gives the static value.
    only_static = buf.lookup_transform("hand", "cam", Time())
    np.testing.assert_allclose(transform_to_matrix(only_static), random_T(99), atol=1e-9)


def test_static_transforms_hold_at_all_times_dynamic_do_not(tree):
    buf, T = tree
    for t_s in (0.001, 1e6):
        np.testing.assert_allclose(
            transform_to_matrix(buf.lookup_transform("base", "scene_cam", at(t_s))),
            T["base_table"] @ T["table_scene"],
            atol=1e-9,
        )
    assert not buf.can_transform("base", "wrist_cam", at(1e6))
    assert buf.can_transform("base", "wrist_cam", at(1.0))


def test_extrapolation_into_future_and_past(tree):
    buf, _ = tree
    with pytest.raises(ExtrapolationException, match="extrapolation into the future"):
        buf.lookup_transform("base", "wrist", at(2.0 + 1e-6))
    with pytest.raises(ExtrapolationException, match="extrapolation into the past"):
        buf.lookup_transform("base", "wrist", at(1.0 - 1e-6))
    # One sample only: any other time is an extrapolation.
    buf.set_transform(stamped("base", "lone", random_T(5), 3.0), "test")
    buf.lookup_transform("base", "lone", at(3.0))
    with pytest.raises(ExtrapolationException):
        buf.lookup_transform("base", "lone", at(3.1))


def test_data_older_than_cache_time_is_dropped_by_tf2s_rule():
    check_cache_window_rule(Buffer)


def check_cache_window_rule(buffer_class):
    """tf2's ``TimeCache::insertData`` (upstream is the contract): with L the newest stamp held BEFORE an insert, the
    insert first drops every stamp older than L - cache_time (one exactly cache_time older stays), then refuses new
    data older than that bound (returning False with the reason; the drop has happened anyway), else stores it. So the
    drop lags one insert behind a new newest stamp. (Also run on the upstream path: test_faults_tf_upstream_path.)"""
    buf = buffer_class(cache_time=Duration(seconds=2))
    for t_s in np.arange(0.0, 5.01, 0.5):
        assert buf.set_transform(stamped("base", "arm", random_T(1), float(t_s)), "test")
    # Inserting 5.0 pruned against 4.5: 2.5 (= 4.5 - 2) is still held, older stamps are gone.
    buf.lookup_transform("base", "arm", at(2.5))
    with pytest.raises(ExtrapolationException, match="past"):
        buf.lookup_transform("base", "arm", at(2.45))
    # The next insert prunes against 5.0: 2.5 goes, 3.0 (= 5.0 - 2, exactly the cache time) stays.
    assert buf.set_transform(stamped("base", "arm", random_T(1), 5.5), "test")
    buf.lookup_transform("base", "arm", at(3.0))
    with pytest.raises(ExtrapolationException, match="past"):
        buf.lookup_transform("base", "arm", at(2.75))
    assert buf.last_rejection is None
    # Older than 5.5 - 2 = 3.5: refused and not stored, with the reason; the prune against 5.5 still took 3.0.
    assert buf.set_transform(stamped("base", "arm", random_T(2), 3.4), "test") is False
    assert "old data in TF from 'base' to 'arm'" in buf.last_rejection and "arm" in buf.rejections_by_child
    with pytest.raises(ExtrapolationException, match="past"):
        buf.lookup_transform("base", "arm", at(3.45))
    np.testing.assert_allclose(
        transform_to_matrix(buf.lookup_transform("base", "arm", at(3.5))), random_T(1), atol=1e-9
    )
    # Exactly the cache time old is not "older": accepted (and a good transform clears the child's refusal).
    assert buf.set_transform(stamped("base", "arm", random_T(1), 3.5), "test")
    assert "arm" not in buf.rejections_by_child


def test_unknown_and_disconnected_frames(tree):
    buf, _ = tree
    with pytest.raises(LookupException, match="nowhere"):
        buf.lookup_transform("base", "nowhere", at(1.5))
    with pytest.raises(LookupException, match="nowhere"):
        buf.lookup_transform("nowhere", "base", at(1.5))
    with pytest.raises(ConnectivityException):
        buf.lookup_transform("odom", "wrist_cam", at(1.5))
    for error in (LookupException, ConnectivityException, ExtrapolationException):
        assert issubclass(error, TransformException)
    assert not buf.can_transform("odom", "wrist_cam", at(1.5))


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("rotation.w", 1.2, "non-unit quaternion in TF from 'base' to 'cam'"),
        ("rotation.w", 0.0, "non-unit quaternion"),
        ("rotation.x", float("nan"), "non-finite"),
        ("translation.y", float("inf"), "non-finite"),
        ("translation.z", float("-inf"), "non-finite"),
    ],
)
def test_bad_transforms_are_refused_with_a_reason(field, value, words):
    buf = Buffer()
    good = stamped("base", "cam", np.eye(4), 1.0)
    assert buf.set_transform(good, "test")
    bad = stamped("base", "cam", np.eye(4), 1.0)
    part, attr = field.split(".")
    setattr(getattr(bad.transform, part), attr, value)
    assert buf.set_transform(bad, "test") is False
    assert words in buf.last_rejection
    assert words in buf.rejections_by_child["cam"]
    # The good data at the same stamp is still there, untouched.
    np.testing.assert_allclose(transform_to_matrix(buf.lookup_transform("base", "cam", at(1.0))), np.eye(4))
    # Refused static transforms are not stored either.
    bad.child_frame_id = "other"
    assert buf.set_transform_static(bad, "test") is False
    with pytest.raises(LookupException):
        buf.lookup_transform("base", "other", Time())
    # A good transform for the child clears its entry.
    assert buf.set_transform(stamped("base", "cam", np.eye(4), 2.0), "test")
    assert "cam" not in buf.rejections_by_child


def test_frame_id_checks_and_huge_finite_translations():
    """The refusal check's quick path (all fine) and its slow path (which reason) agree at their edges: finite
    translations whose sum overflows are still fine; +inf and -inf together are not finite; empty and equal frame ids
    are named."""
    buf = Buffer()
    huge = stamped("base", "cam", np.eye(4), 1.0)
    huge.transform.translation.x = huge.transform.translation.y = 1e308  # their sum is inf; each is finite
    assert buf.set_transform(huge, "test") and buf.last_rejection is None
    assert buf.lookup_matrix("base", "cam", at(1.0))[0, 3] == 1e308
    both = stamped("base", "cam2", np.eye(4), 1.0)
    both.transform.translation.x, both.transform.translation.y = float("inf"), float("-inf")
    assert buf.set_transform(both, "test") is False and "non-finite" in buf.last_rejection
    assert buf.set_transform(stamped("", "cam3", np.eye(4), 1.0), "test") is False
    assert "empty frame id" in buf.last_rejection
    assert buf.set_transform(stamped("cam4", "cam4", np.eye(4), 1.0), "test") is False
    assert "self transform" in buf.last_rejection


def test_slightly_off_quaternion_within_tolerance_is_accepted():
    buf = Buffer()
    msg = stamped("base", "cam", np.eye(4), 1.0)
    msg.transform.rotation.w = 1.0005
    assert buf.set_transform(msg, "test")
    assert buf.last_rejection is None


def test_lookup_waits_for_data_up_to_timeout():
    buf = Buffer()
    buf.set_transform(stamped("base", "arm", np.eye(4), 1.0), "test")
    T_late = random_T(7)

    def publish_later():
        time.sleep(0.3)
        buf.set_transform(stamped("base", "arm", T_late, 2.0), "test")

    with pytest.raises(ExtrapolationException):
        buf.lookup_transform("base", "arm", at(2.0))  # no timeout: fails at once
    thread = threading.Thread(target=publish_later)
    thread.start()
    result = buf.lookup_transform("base", "arm", at(2.0), timeout=Duration(seconds=10))
    thread.join()
    np.testing.assert_allclose(transform_to_matrix(result), T_late, atol=1e-9)
    # Data that never comes: the original error after the timeout.
    with pytest.raises(ExtrapolationException):
        buf.lookup_transform("base", "arm", at(3.0), timeout=Duration(seconds=0.2))
    assert not buf.can_transform("base", "arm", at(3.0), timeout=Duration(seconds=0.1))


def test_concurrent_inserts_and_lookups_stay_consistent():
    """A writer thread streams a link whose value is a known function of its stamp while this thread looks up."""
    buf = Buffer(cache_time=Duration(seconds=1))
    buf.set_transform_static(stamped("base", "table", random_T(3)), "test")

    def value_at(t_s: float) -> np.ndarray:
        return make_matrix([t_s, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])  # translation x = stamp: linear in time

    stop = threading.Event()

    def writer():
        k = 0
        while not stop.is_set() and k < 20000:
            t_s = 1.0 + 0.001 * k
            buf.set_transform(stamped("base", "arm", value_at(t_s), t_s), "test")
            k += 1

    thread = threading.Thread(target=writer)
    thread.start()
    checked = 0
    try:
        for _ in range(200000):
            if checked >= 300:
                break
            try:
                result = buf.lookup_transform("table", "arm", Time())
            except (LookupException, ExtrapolationException):
                continue  # nothing inserted yet
            t_s = Time.from_msg(result.header.stamp).nanoseconds / 1e9
            np.testing.assert_allclose(
                transform_to_matrix(result), invert_matrix(random_T(3)) @ value_at(t_s), atol=1e-6
            )
            checked += 1
    finally:
        stop.set()
        thread.join()
    assert checked >= 300


def test_a_changed_tree_changes_the_answer_of_a_pair_looked_up_before(tree):
    """Look-ups of a pair of frames follow the tree as it is NOW: a frame moved under another parent, a new frame
    above one, or a history cleared are seen at the next look-up of a pair that was looked up before."""
    buf, T = tree
    first = buf.lookup_matrix("base", "wrist_cam", at(1.5))
    np.testing.assert_allclose(first, T["base_arm"] @ T["arm_wrist"] @ T["wrist_cam"], atol=1e-12)
    # wrist_cam moves from the wrist onto the table (a static re-parent): the same pair, another chain
    assert buf.set_transform_static(stamped("table", "wrist_cam", T["map_odom"]), "test")
    np.testing.assert_allclose(
        buf.lookup_matrix("base", "wrist_cam", at(1.5)), T["base_table"] @ T["map_odom"], atol=1e-12
    )
    # the other way round, and from a frame below the target: the target side of the chain is inverted
    np.testing.assert_allclose(
        buf.lookup_matrix("scene_cam", "wrist_cam", at(1.5)),
        invert_matrix(T["table_scene"]) @ T["map_odom"],
        atol=1e-12,
    )
    # base gets a parent: a look-up from base's new root goes through it
    assert buf.set_transform_static(stamped("world", "base", T["arm_wrist"]), "test")
    np.testing.assert_allclose(
        buf.lookup_matrix("world", "wrist_cam", at(1.5)), T["arm_wrist"] @ T["base_table"] @ T["map_odom"], atol=1e-12
    )
    # clear() drops the dynamic history: a pair through a dynamic link no longer resolves
    np.testing.assert_allclose(buf.lookup_matrix("base", "wrist", at(1.5)), T["base_arm"] @ T["arm_wrist"], atol=1e-12)
    buf.clear()
    with pytest.raises(TransformException):  # fallback: LookupException; tf2: the frame is there without data
        buf.lookup_matrix("base", "wrist", at(1.5))
