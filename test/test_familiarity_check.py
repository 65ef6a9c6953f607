"""The familiarity check (para_ros.inference.familiarity_check) by hand, and in the inference pipeline: an unfamiliar
scene's chunks withheld, named and answered for lockstep; chunks again once it looks familiar."""

import numpy as np
import torch
from test_inference_pipeline import IMAGES, ee_pose, feed, image, lookup, make

from para_core.model.familiarity import Familiarity, FamiliaritySettings
from para_ros.inference.familiarity_check import FamiliarityCheck, FamiliarityCheckSettings

S = 1_000_000_000
VIEWS = ("scene", "wrist")


def test_the_median_of_the_window_decides_and_the_message_names_the_view():
    """Window 3: one novel frame among familiar ones passes; two of three make the median novel (and keep it so while
    they are in the window); the message names the worst view with its figure, and the other view's."""
    check = FamiliarityCheck(FamiliarityCheckSettings(window_frames=3))
    assert check.check(VIEWS, np.array([0.5, 0.6])) is None
    assert check.check(VIEWS, np.array([0.5, 0.6])) is None
    assert check.check(VIEWS, np.array([0.5, 3.0])) is None  # wrist [0.6, 0.6, 3.0]: median 0.6
    msg = check.check(VIEWS, np.array([0.4, 1.5]))  # wrist [0.6, 3.0, 1.5]: median 1.5
    assert msg is not None and "the wrist camera" in msg and "1.50x" in msg and "the scene camera 0.50x" in msg
    assert check.check(VIEWS, np.array([0.4, 0.2])) is not None  # wrist [3.0, 1.5, 0.2]: median 1.5
    np.testing.assert_allclose(check.last_medians, [0.4, 1.5])
    assert check.check(VIEWS, np.array([0.4, 0.2])) is None  # wrist [1.5, 0.2, 0.2]: median 0.2


def test_two_frames_average_in_the_median_and_bad_ratios_are_unfamiliar():
    check = FamiliarityCheck(FamiliarityCheckSettings(window_frames=2))
    assert check.check(VIEWS, np.array([0.5, 0.5])) is None
    assert check.check(VIEWS, np.array([2.0, 0.5])) is not None  # median of (0.5, 2.0) = 1.25
    check.reset()
    assert check.check(VIEWS, np.array([np.nan, 0.1])) is not None  # a NaN is never familiar
    assert "2 views" in check.check(VIEWS, np.array([0.1]))
    assert FamiliarityCheck(FamiliarityCheckSettings(enabled=False)).check(VIEWS, np.array([9.0, 9.0])) is None
    assert FamiliarityCheck().check(VIEWS, np.zeros(0)) is None  # a policy without a memory


def test_an_unfamiliar_wrist_view_withholds_the_chunk_and_a_familiar_one_brings_it_back():
    """The tiny policy remembers the synthetic scene's patches (limit 0.05): the same frames give chunks; a green
    square in the wrist image gives none, ``familiarity`` names the wrist camera, ``dropped.unfamiliar`` counts it and
    its stamp is handed out for lockstep; the familiar frames again, a chunk and the problem gone."""
    pipe, report = make()
    policy = pipe.policy
    cams, state = pipe.build_observation(_pair(pipe, 1 * S), dict(pipe.camera_info), lookup, ee_pose)
    inputs = policy.preprocess(cams, state)
    with torch.no_grad():
        patches, _ = policy.model.patch_features(inputs.images)
    memory = {v: patches[0, i].flatten(1).T.contiguous() for i, v in enumerate(policy.view_names)}
    settings = FamiliaritySettings(memory_size=16, candidates=16, top_patches=2, window_frames=1)
    policy.set_familiarity(
        Familiarity(policy.view_names, memory, {"scene": 0.05, "wrist": 0.05}, settings, policy.model_id)
    )
    pipe.familiarity_check.reset()

    stamp = 2 * S
    feed(pipe, stamp)
    assert pipe.step(stamp + 50_000_000, lookup, ee_pose) is not None
    assert "familiarity" not in report.problems and report.values["novelty_ratio.wrist"] < 0.05

    stamp = 3 * S
    pipe.add_joint_states(stamp, ["gripper"], [0.8])
    pipe.add_image("scene", stamp, image("scene", stamp), stamp)
    odd = image("wrist", stamp)
    rgb = IMAGES["wrist"].copy()
    rgb[8:40, 8:40] = (0, 255, 0)
    odd.data = rgb.tobytes()
    pipe.add_image("wrist", stamp, odd, stamp)
    assert pipe.step(stamp + 50_000_000, lookup, ee_pose) is None
    assert "the wrist camera sees what the policy never saw" in report.problems["familiarity"][0]
    assert report.counts["dropped.unfamiliar"] == 1 and pipe.take_refused() == [stamp]

    stamp = 4 * S
    feed(pipe, stamp)
    assert pipe.step(stamp + 50_000_000, lookup, ee_pose) is not None
    assert "familiarity" not in report.problems and pipe.take_refused() == []


def _pair(pipe, stamp_ns):
    feed(pipe, stamp_ns)
    with pipe._lock:
        pair = pipe.pairer.newest_pair(stamp_ns + 50_000_000)
        pipe.pairer.mark_used(pair)
    return pair
