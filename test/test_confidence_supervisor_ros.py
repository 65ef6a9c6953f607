"""The confidence supervisor in the chunk executor node over real DDS: very uncertain chunks hold the arm, the reason
is on /diagnostics (mode, confidence_problem), the hold is reported at WARN, ~/resume ends it, and confident chunks
move the arm again. No assertion depends on how promptly the machine schedules anything."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

from executor_helpers import TOP_DOWN_R, ExecutorDriver, ReferenceKinematics, diag_values, pose_arrays  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

NODE = "chunk_executor_confidence"


@pytest.fixture(scope="module")
def rig():
    kin = ReferenceKinematics()
    q_init = kin.ik([0.30, 0.0, 0.15], TOP_DOWN_R)
    drv = ExecutorDriver("/exec_confidence", q_init)
    drv.start_executor(
        NODE,
        command_lookahead_s=0.01,
        joint_state_timeout_s=2.0,
        confidence_supervisor="true",
        confidence_peak_mass_slow_below=0.5,
        confidence_peak_mass_hold_below=0.2,
        confidence_hold_after_s=0.0,
        confidence_resume_after_chunks=2,
    )
    try:
        drv.wait_for_commands(20, timeout_s=90.0)
        yield drv, kin
    finally:
        print(drv.close()[-3000:])


def _stream(drv, kin, peak_mass, seconds, v=(0.03, 0.0, 0.0)):
    """Chunks from the arm's pose now, moving at ``v`` m/s, with this peak mass, every 0.1 s for ``seconds``."""
    t0 = time.time()
    with drv.lock:
        q = drv.q_arm.copy()
    p0 = kin.fk(q)[:3, 3]
    quat = Rotation.from_matrix(TOP_DOWN_R).as_quat()
    while time.time() - t0 < seconds:
        stamp = time.time() - 0.05
        t_from = np.arange(10) * 0.1
        positions = p0 + np.outer(t_from + (stamp - t0), v)
        drv.publish_chunk(stamp, t_from, positions, np.tile(quat, (10, 1)), np.full(10, 0.5), np.full(10, peak_mass))
        time.sleep(0.1)


def _latest_diag(drv) -> dict:
    """The newest executor status: its key/values, and its level (an int) and message."""
    _, _, diags = drv.snapshot()
    d = diags[-1]
    level = d.level[0] if isinstance(d.level, bytes) else int(d.level)
    return diag_values(d) | {"_level": level, "_message": d.message}


def test_very_uncertain_chunks_hold_with_the_reason_on_diagnostics_and_resume_ends_it(rig):
    drv, kin = rig
    _stream(drv, kin, 1.0, 0.6)  # confident: the arm follows
    _stream(drv, kin, 0.05, 0.6)  # very uncertain: holding
    t_held = time.time()
    time.sleep(0.5)
    _, poses, _ = drv.snapshot()
    t_pose, p, _ = pose_arrays(poses)
    after = p[t_pose > t_held]
    assert len(after) > 10 and np.all(after == after[0]), "the arm moved while holding"
    values = _latest_diag(drv)
    assert values["state"] == "holding_uncertain"
    assert values["confidence_problem"].startswith("policy uncertain: peak mass 0.05 at step 0")
    assert "confidence: policy uncertain" in values["_message"] and values["_level"] >= 1  # at least WARN
    assert int(values["chunks_held_uncertain"]) > 0
    resp = drv.call_trigger(NODE, "resume")
    assert resp.success and "confidence hold ended" in resp.message
    t_resume = time.time()
    _stream(drv, kin, 1.0, 0.6)
    _, poses, _ = drv.snapshot()
    t_pose, p, _ = pose_arrays(poses)
    assert np.any(np.diff(p[t_pose > t_resume], axis=0) != 0), "no motion after ~/resume and confident chunks"
    time.sleep(0.4)
    values = _latest_diag(drv)
    assert values["state"] == "following" and values["confidence_problem"] == ""
    assert drv.proc.poll() is None
