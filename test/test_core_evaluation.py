"""para_core.eval.metrics against hand-computed numbers."""

import math

import numpy as np
import pytest

from para_core.eval import metrics as ev


def rz(deg):
    a = math.radians(deg)
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])


def test_interpolate_positions_by_hand():
    stamps = np.array([1000, 2000, 4000], dtype=np.int64)
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 4.0], [3.0, 2.0, 0.0]])
    out = ev.interpolate_positions(stamps, pos, np.array([1250, 2000, 3000, 999, 4001, 4000]))
    np.testing.assert_allclose(out[0], [0.25, 0.5, 1.0])
    np.testing.assert_allclose(out[1], [1.0, 2.0, 4.0])
    np.testing.assert_allclose(out[2], [2.0, 2.0, 2.0])
    assert np.all(np.isnan(out[3])) and np.all(np.isnan(out[4]))  # outside the recording: no ground truth
    np.testing.assert_allclose(out[5], [3.0, 2.0, 0.0])
    # Shapes: (C, T) queries -> (C, T, 3); nanosecond epochs stay exact.
    big = stamps + 1_700_000_000_000_000_000
    out2 = ev.interpolate_positions(big, pos, (np.array([[1250, 3000]]) + 1_700_000_000_000_000_000))
    assert out2.shape == (1, 2, 3)
    np.testing.assert_allclose(out2[0, 1], [2.0, 2.0, 2.0], atol=1e-12)


def test_interpolate_rotations_slerp_by_hand():
    out = ev.interpolate_rotations(np.array([0, 100]), np.stack([rz(0), rz(90)]), np.array([50, 25, 101]))
    np.testing.assert_allclose(out[0], rz(45), atol=1e-12)
    np.testing.assert_allclose(out[1], rz(22.5), atol=1e-12)
    assert np.all(np.isnan(out[2]))


def test_bad_stamps_are_refused():
    with pytest.raises(ValueError, match="strictly increasing"):
        ev.interpolate_positions(np.array([0, 0]), np.zeros((2, 3)), np.array([0]))
    with pytest.raises(ValueError, match="one int64 stamp per sample"):
        ev.interpolate_positions(np.array([0, 1, 2]), np.zeros((2, 3)), np.array([0]))


def test_position_and_rotation_errors_by_hand():
    assert ev.position_errors_m(np.array([3.0, 4.0, 0.0]), np.zeros(3)) == pytest.approx(5.0)
    e = ev.position_errors_m(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), np.array([[1.0, 1.0, 3.0], [np.nan] * 3]))
    assert e[0] == pytest.approx(2.0) and np.isnan(e[1])
    assert ev.rotation_errors_deg(rz(30), np.eye(3)) == pytest.approx(30.0)
    assert ev.rotation_errors_deg(rz(-170), rz(170)) == pytest.approx(20.0)  # the short way round
    rx180 = np.diag([1.0, -1.0, -1.0])
    assert ev.rotation_errors_deg(rx180, np.eye(3)) == pytest.approx(180.0)
    assert ev.rotation_errors_deg(rz(12), rz(12)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="same"):
        ev.position_errors_m(np.zeros((2, 3)), np.zeros((3, 3)))


def test_gripper_accuracy_by_hand():
    assert ev.gripper_accuracy([0.9, 0.2, 0.6, 0.4], [1.0, 0.0, 0.0, 1.0]) == pytest.approx(0.5)
    assert ev.gripper_accuracy([0.9, 0.2, 0.6], [1.0, np.nan, 1.0]) == pytest.approx(1.0)
    assert ev.gripper_accuracy([0.5], [0.5]) == 1.0  # the threshold counts as open on both sides
    assert math.isnan(ev.gripper_accuracy([0.1], [np.nan]))


def test_per_step_summary_by_hand():
    errors = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 6.0]])
    s = ev.per_step_summary(errors)
    assert s[0] == {"mean": 3.0, "median": 3.0, "p90": pytest.approx(4.6), "max": 5.0, "count": 3}
    assert s[1] == {"mean": 4.0, "median": 4.0, "p90": pytest.approx(5.6), "max": 6.0, "count": 2}
    assert ev.summarize(np.array([np.nan]))["count"] == 0


def test_chunk_errors_and_metrics_dict_by_hand():
    # 2 chunks x 2 steps; chunk 1 step 1 has no ground truth.
    pred_pos = np.array([[[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]], [[0.0, 0.3, 0.4], [1.0, 1.0, 1.0]]])
    gt_pos = np.array([[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [np.nan] * 3]])
    pred_rot = np.stack([np.stack([rz(10), rz(20)]), np.stack([rz(0), rz(0)])])
    gt_rot = np.stack([np.stack([rz(0), rz(0)]), np.stack([rz(0), np.full((3, 3), np.nan)])])
    pred_g = np.array([[1.0, 0.0], [0.2, 0.9]])
    gt_g = np.array([[1.0, 1.0], [0.0, np.nan]])
    errs = ev.chunk_errors(pred_pos, pred_rot, pred_g, gt_pos, gt_rot, gt_g)
    np.testing.assert_allclose(errs.position_m[:, 0], [0.0, 0.5])
    assert errs.position_m[0, 1] == pytest.approx(0.1) and np.isnan(errs.position_m[1, 1])
    np.testing.assert_allclose(errs.rotation_deg[0], [10.0, 20.0])
    m = ev.metrics_dict(errs, [0.0, 0.1333], model_id="m")
    assert m["chunks_evaluated"] == 2 and m["steps"] == 2 and m["model_id"] == "m"
    assert m["position_error_m"]["per_step"][0]["mean"] == pytest.approx(0.25)
    assert m["position_error_m"]["per_step"][1] == {
        "mean": pytest.approx(0.1),
        "median": pytest.approx(0.1),
        "p90": pytest.approx(0.1),
        "max": pytest.approx(0.1),
        "count": 1,
    }
    assert m["position_error_m"]["all"]["mean"] == pytest.approx(0.6 / 3)
    assert m["rotation_error_deg"]["all"]["mean"] == pytest.approx(10.0)
    # gripper: (1 vs 1) ok, (0 vs 1) wrong, (0.2 vs 0) ok, (0.9 vs NaN) not counted -> 2/3
    assert m["gripper_accuracy"]["all"] == pytest.approx(2 / 3)
    assert m["gripper_accuracy"]["per_step"] == [pytest.approx(1.0), pytest.approx(0.0)]
