"""Camera pairing takes each other's nearest frames (para_ros.observation.pairing), checked against a brute-force
look at the whole stream: every pair handed out must be the pair a person with the full recording would choose."""

import numpy as np
import pytest

from para_ros.observation.pairing import Frame, ObservationPairer, nearest_pair

MS = 1_000_000
PERIOD_30HZ_NS = 33_333_333


def run_pairer(arrivals, slop_ns=50 * MS, history=4):
    """Feed ``arrivals`` [(camera, stamp_ns)] in order, ask for the newest pair after each frame as the node does;
    returns the pairs handed out as (scene stamp, wrist stamp)."""
    p = ObservationPairer(("scene", "wrist"), slop_ns=slop_ns, max_age_ns=10**12, history=history)
    out = []
    for camera, stamp in arrivals:
        assert p.add(camera, stamp, stamp) is None
        pair = p.newest_pair(now_ns=stamp)
        if pair.frames is not None:
            p.mark_used(pair)
            out.append(tuple(f.stamp_ns for f in pair.frames))
            assert pair.gap_ns == abs(out[-1][0] - out[-1][1])
    return out


def nearest_by_brute_force(stamp, others):
    """The stamp of ``others`` nearest to ``stamp`` (ties: the newer), by a plain scan of the whole stream."""
    best = None
    for o in others:
        d = abs(o - stamp)
        if best is None or d < abs(best - stamp) or (d == abs(best - stamp) and o > best):
            best = o
    return best


def in_arrival_order(scene, wrist, scene_latency_ns=0, wrist_latency_ns=0):
    events = [(s + scene_latency_ns, 0, "scene", s) for s in scene] + [
        (w + wrist_latency_ns, 1, "wrist", w) for w in wrist
    ]
    return [(cam, stamp) for _, _, cam, stamp in sorted(events)]


def test_two_cameras_10_5_ms_apart_at_30_hz_pair_with_their_nearest_partner():
    scene = [k * PERIOD_30HZ_NS for k in range(90)]
    wrist = [s + 10_500_000 for s in scene]
    pairs = run_pairer(in_arrival_order(scene, wrist))
    assert len(pairs) == len(scene)  # one pair per scene frame: (scene k, wrist k)
    for s, w in pairs:
        assert nearest_by_brute_force(s, wrist) == w and nearest_by_brute_force(w, scene) == s
    gaps_ns = [abs(s - w) for s, w in pairs]
    assert max(gaps_ns) == 10_500_000 == min(gaps_ns)


def test_the_old_first_found_rule_would_fail_this_stream():
    """The independent check bites: the pairs a first-found rule gives (the scene frame 22.8 ms before the wrist,
    or 43.8 ms) are not the brute-force nearest."""
    scene = [k * PERIOD_30HZ_NS for k in range(6)]
    wrist = [s + 10_500_000 for s in scene]
    wrong = (scene[0], wrist[1])  # 43.8 ms apart, both within the 50 ms slop
    assert nearest_by_brute_force(wrong[1], scene) != wrong[0]
    assert (scene[0], wrist[1]) not in run_pairer(in_arrival_order(scene, wrist))


def test_same_stamps_logged_apart_pair_with_the_same_instant():
    """A simulator renders both cameras at one instant; the wrist image is logged 0.7 ms after the scene image. The
    scene frame must not take the wrist frame of the previous instant (30 ms older) in the meantime."""
    stamps = [k * 30 * MS for k in range(20)]
    pairs = run_pairer(in_arrival_order(stamps, stamps, wrist_latency_ns=700_000))
    assert pairs == [(t, t) for t in stamps]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jitter_and_arrival_order_keep_every_pair_the_nearest(seed):
    rng = np.random.default_rng(seed)
    n = 120
    scene = np.round(np.arange(n) * PERIOD_30HZ_NS + rng.uniform(-3, 3, n) * MS).astype(np.int64)
    wrist = np.round(np.arange(n) * PERIOD_30HZ_NS + 10.5 * MS + rng.uniform(-3, 3, n) * MS).astype(np.int64)
    # Each frame reaches the node 1..20 ms after its stamp (transport jitter): the arrival order interleaves.
    events = [(int(s + rng.uniform(1, 20) * MS), "scene", int(s)) for s in scene]
    events += [(int(w + rng.uniform(1, 20) * MS), "wrist", int(w)) for w in wrist]
    last = {"scene": -1, "wrist": -1}
    arrivals = []
    for _, cam, stamp in sorted(events):
        if stamp > last[cam]:  # a camera's own frames reordered in transport are dropped by the node (tested apart)
            arrivals.append((cam, stamp))
            last[cam] = stamp
    pairs = run_pairer(arrivals)
    scene_in = [s for c, s in arrivals if c == "scene"]
    wrist_in = [w for c, w in arrivals if c == "wrist"]
    assert len(pairs) >= 0.95 * n
    for s, w in pairs:
        assert nearest_by_brute_force(s, wrist_in) == w and nearest_by_brute_force(w, scene_in) == s
    assert max(abs(s - w) for s, w in pairs) <= 16.5 * MS  # 10.5 ms +- two 3 ms jitters


def test_ties_go_to_the_newer_frame_whatever_the_camera_order():
    a = [Frame(20 * MS, "a20")]
    b = [Frame(0, "b0"), Frame(40 * MS, "b40")]  # a20 lies exactly midway
    assert [f.message for f in nearest_pair(a, b, 50 * MS)] == ["a20", "b40"]
    assert [f.message for f in nearest_pair(b, a, 50 * MS)] == ["b40", "a20"]
    # Two candidate partners of the newest frame inside the slop: the nearer wins, whatever the order they are held.
    a = [Frame(0, "a0"), Frame(33 * MS, "a33")]
    b = [Frame(44 * MS, "b44")]
    assert [f.message for f in nearest_pair(a, b, 50 * MS)] == ["a33", "b44"]
    assert [f.message for f in nearest_pair(a[::-1], b, 50 * MS)] == ["a33", "b44"]
    # Frames exactly half a period apart on a regular grid: every frame still pairs, each with its newer partner.
    scene = [k * 40 * MS for k in range(10)]
    wrist = [s + 20 * MS for s in scene]
    pairs = run_pairer(in_arrival_order(scene, wrist))
    assert all(abs(s - w) == 20 * MS for s, w in pairs)
    assert len(pairs) == 2 * len(scene) - 1  # one pair per frame but the first scene frame's


def test_a_partner_outside_the_slop_is_never_taken():
    assert nearest_pair([Frame(0, "a")], [Frame(51 * MS, "b")], 50 * MS) is None
    assert nearest_pair([Frame(0, "a")], [Frame(50 * MS, "b")], 50 * MS) is not None
