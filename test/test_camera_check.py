"""The camera check (para_ros.observation.camera_check): a covered camera by its grey-level spread against numpy's own
standard deviation, a frozen one by identical bytes while the tool moves (and not while it holds still), the
inference pipeline refusing such an observation, and lockstep's answer for a refused frame."""

from __future__ import annotations

import numpy as np
import pytest

from para_ros.observation.camera_check import CameraCheck, CameraCheckSettings, grey_level_spread
from para_ros.sim.lockstep import ACK_NO_CHUNK, LockstepGate, LockstepSettings, chunk_ack, no_chunk_ack, parse_ack

RNG = np.random.default_rng(0)
SCENE = RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)  # a textured image
TOOL = np.array([0.3, 0.0, 0.1])


def test_grey_level_spread_is_the_standard_deviation_on_the_grid():
    img = RNG.integers(0, 256, (32, 48, 3), dtype=np.uint8)
    grey = img[::4, ::4].astype(np.float64).mean(axis=-1)
    assert grey_level_spread(img) == pytest.approx(grey.std(), rel=1e-5)
    assert grey_level_spread(np.full((32, 32, 3), 200, np.uint8)) == 0.0


@pytest.mark.parametrize("level", [0, 255])
def test_a_flat_image_is_covered_and_a_textured_or_noisy_one_is_not(level):
    check = CameraCheck()
    flat = np.full((64, 64, 3), level, np.uint8)
    problem = check.check("scene", flat, 1.0, TOOL)
    assert problem and "scene camera shows one flat colour" in problem and f"mean {level}" in problem
    assert check.check("scene", SCENE, 1.1, TOOL) is None
    noise = np.clip(100 + RNG.normal(0, 3.0, (64, 64, 3)), 0, 255).astype(np.uint8)  # grey levels spread about 1.7
    assert grey_level_spread(noise) < 2.0 and check.check("scene", noise, 1.2, TOOL)  # a dark sensor's noise alone
    assert CameraCheck(CameraCheckSettings(enabled=False)).check("scene", flat, 1.0, TOOL) is None


def test_the_same_image_while_the_tool_moves_is_frozen_after_the_set_time():
    check = CameraCheck(CameraCheckSettings(frozen_after_s=0.5, frozen_tool_motion_m=0.02))
    assert check.check("scene", SCENE, 10.0, TOOL) is None
    moved = TOOL + [0.03, 0.0, 0.0]  # 3 cm
    assert check.check("scene", SCENE.copy(), 10.4, moved) is None  # 0.4 s: not yet
    problem = check.check("scene", SCENE.copy(), 10.5, moved)
    assert problem and "not changed for 0.50 s while the tool moved 3.0 cm: frozen" in problem
    other = SCENE.copy()
    other[0, 0, 0] ^= 1  # one level of one pixel: a new image
    assert check.check("scene", other, 10.6, moved) is None
    assert check.check("wrist", SCENE, 10.6, moved) is None  # each camera on its own


def test_the_same_image_while_the_tool_holds_still_is_no_fault():
    check = CameraCheck()
    for k in range(30):  # 3 s of one image, the tool within 1 cm
        assert check.check("scene", SCENE, 5.0 + 0.1 * k, TOOL + [0.0003 * k, 0.0, 0.0]) is None


def test_time_going_back_or_a_reset_starts_afresh():
    check = CameraCheck()
    check.check("scene", SCENE, 10.0, TOOL)
    assert check.check("scene", SCENE, 2.0, TOOL + 0.1) is None  # an earlier stamp: a new run
    assert check.check("scene", SCENE, 2.6, TOOL + 0.1) is None  # since 2.0 the tool did not move
    check.reset()
    assert check.check("scene", SCENE, 3.0, TOOL) is None


@pytest.mark.parametrize(
    "bad", [dict(min_contrast_levels=-1.0), dict(frozen_after_s=0.0), dict(frozen_tool_motion_m=float("nan"))]
)
def test_bad_settings_are_refused_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="camera_"):
        CameraCheckSettings(**bad)


def test_lockstep_takes_a_refused_frame_as_answered():
    gate = LockstepGate(LockstepSettings(step_s=0.01, chunk_latency_s=0.0))
    t0 = 1_000_000_000
    gate.published(t0, frame_stamps_ns=[t0])
    gate.on_ack([0, t0, 0])  # the tick, no command
    assert gate.missing() and not gate.ready()  # the frame's answer is missing
    gate.on_ack(no_chunk_ack(t0))
    assert gate.ready()
    assert parse_ack(no_chunk_ack(t0)) == (ACK_NO_CHUNK, t0, 0) and parse_ack(chunk_ack(t0))[0] != ACK_NO_CHUNK
    with pytest.raises(ValueError):
        parse_ack([3, t0, 0])
