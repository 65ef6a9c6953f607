"""The pick-and-place task: finger collision boxes, seeded layouts, the success detector on hand-placed cubes, the
scripted expert, and the Wilson interval."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from para_ros.deploy.closed_loop import moved_camera_pose
from para_ros.sim.expert import ExpertConfig, min_jerk, plan_pick_place
from para_ros.sim.pick_place import (
    EpisodeMonitor,
    Judgement,
    PickPlaceConfig,
    apply_layout,
    check_seed,
    judge,
    judge_state,
    sample_layout,
    wilson_interval,
)

H = 0.02  # the task cube's half edge, metres


def _pose(xyz, rotvec=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = xyz
    return T


# ---- success rule on plain numbers (hand-placed poses) ---------------------------------------------------------
TARGET = np.array([0.30, 0.05, 0.0])


@pytest.mark.parametrize(
    "case, T, vel, fingers, want",
    [
        ("on target", _pose([0.31, 0.06, H]), np.zeros(6), 0, "on_target"),
        ("on target, yawed 40 deg", _pose([0.30, 0.05, H], (0, 0, math.radians(40))), np.zeros(6), 0, "on_target"),
        ("on target, another face down", _pose([0.30, 0.05, H], (math.pi / 2, 0, 0)), np.zeros(6), 0, "on_target"),
        ("2.9 cm off: inside the 3 cm tolerance", _pose([0.30 + 0.029, 0.05, H]), np.zeros(6), 0, "on_target"),
        ("3.1 cm off", _pose([0.30, 0.05 + 0.031, H]), np.zeros(6), 0, "off_target"),
        ("far off", _pose([0.40, -0.10, H]), np.zeros(6), 0, "off_target"),
        ("still held above the pad", _pose([0.30, 0.05, H + 0.002]), np.zeros(6), 2, "held"),
        ("held by one finger", _pose([0.30, 0.05, H]), np.zeros(6), 1, "held"),
        (
            "fallen over on an edge",
            _pose([0.30, 0.05, H * math.sqrt(2)], (math.pi / 4, 0, 0)),
            np.zeros(6),
            0,
            "fallen",
        ),
        ("off the table", _pose([0.30, 0.05, -0.3]), np.zeros(6), 0, "fallen"),
        ("still sliding", _pose([0.30, 0.05, H]), np.array([0.05, 0, 0, 0, 0, 0]), 0, "moving"),
        ("in the air, released", _pose([0.30, 0.05, H + 0.05]), np.array([0, 0, -0.01, 0, 0, 0]), 0, "moving"),
    ],
)
def test_judge_state_on_hand_placed_poses(case, T, vel, fingers, want):
    j = judge_state(T, vel, fingers, TARGET, H)
    assert j.state == want, case
    assert j.success == (want == "on_target")
    assert j.place_error_m == pytest.approx(np.linalg.norm(T[:2, 3] - TARGET[:2]))


def test_judge_in_the_simulator_hand_placed(sim_task):
    """The same rule on the real MuJoCo state: cube put on / next to the pad and settled by physics."""
    sim = sim_task
    sim.reset()
    sim.set_target_position((0.32, 0.08))
    sim.set_cube_pose(0, (0.325, 0.09, H + 1e-4), 0.3)
    sim.step(0.5)
    j = judge(sim)
    assert j.state == "on_target" and j.place_error_m < 0.012
    sim.set_cube_pose(0, (0.32, -0.02, H + 1e-4), 0.0)  # 10 cm from the pad centre
    sim.step(0.5)
    assert judge(sim).state == "off_target"
    # tipped onto an edge on the pad, at the moment of placing: not resting on a face
    sim.set_cube_pose(
        0,
        (0.32, 0.08, H * math.sqrt(2) + 1e-3),
        quat_wxyz=Rotation.from_euler("x", 45, degrees=True).as_quat(scalar_first=True),
    )
    assert judge(sim).state in ("moving", "fallen")


def test_episode_monitor_names_failure_causes():
    def j(state, err=0.1, height=0.0, held=False):
        return Judgement(state, err, height, held)

    m = EpisodeMonitor()  # never touched
    m.update(j("off_target"))
    assert m.outcome() == "no_grasp"
    m = EpisodeMonitor()  # lifted 5 cm, let go far away
    for s in (j("held", 0.1, 0.05, True), j("moving", 0.12), j("off_target", 0.12)):
        m.update(s)
    assert m.outcome() == "dropped"
    m = EpisodeMonitor()  # lifted, released 4 cm from the centre: near the pad but outside the tolerance
    for s in (j("held", 0.1, 0.05, True), j("held", 0.04, 0.01, True), j("off_target", 0.04)):
        m.update(s)
    assert m.outcome() == "misplaced"
    m = EpisodeMonitor()  # still carrying it at the time limit
    m.update(j("held", 0.05, 0.05, True))
    assert m.outcome() == "timeout"
    m.update(j("on_target", 0.01))
    assert m.outcome() == "success"
    assert EpisodeMonitor().outcome(limits_hit=True) == "limits"


# ---- layouts -----------------------------------------------------------------------------------------------------
def test_layouts_are_seeded_separated_and_inside_their_regions():
    cfg = PickPlaceConfig()
    a, b = sample_layout(7), sample_layout(7)
    assert a == b and sample_layout(8) != a
    for seed in range(200):
        lay = sample_layout(seed)
        (x0, x1), (y0, y1) = cfg.cube_region_m
        assert x0 <= lay.cube_xy_m[0] <= x1 and y0 <= lay.cube_xy_m[1] <= y1
        (x0, x1), (y0, y1) = cfg.target_region_m
        assert x0 <= lay.target_xy_m[0] <= x1 and y0 <= lay.target_xy_m[1] <= y1
        assert np.linalg.norm(np.subtract(lay.cube_xy_m, lay.target_xy_m)) >= cfg.min_separation_m
        assert abs(lay.cube_yaw_rad) <= cfg.cube_yaw_range_rad


@pytest.mark.parametrize("bad", [-1, 2**31, 1.5, True, "3"])
def test_bad_seed_is_refused_with_the_range(bad):
    with pytest.raises(ValueError, match=r"\[0, 2147483647\]"):
        check_seed(bad)


# ---- the scene: fingers can grasp --------------------------------------------------------------------------------
def test_finger_meshes_render_only_and_boxes_collide(sim_task):
    import mujoco

    m = sim_task.model
    for finger in ("tip_left", "tip_right"):
        body = m.body(finger).id
        geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == body]
        meshes = [g for g in geoms if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
        boxes = [g for g in geoms if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
        assert meshes and all(m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0 for g in meshes)
        assert len(boxes) == 2 and all(m.geom_contype[g] == 1 for g in boxes)
        # fitted to the mesh: the pad box is thin across the closing direction, both boxes inside the mesh's hull
        half = sorted(m.geom_size[boxes[0]])
        assert 0.002 < half[0] < 0.006 and half[2] < 0.03
    assert m.geom("target_pad_geom").contype == 0  # the pad is seen, never touched


def test_expert_lifts_nothing_with_the_mesh_hulls_and_succeeds_with_the_boxes(kinematics):
    """The measured fact behind the collision boxes: with the SDK's hull collision the expert cannot grasp."""
    from para_ros.sim.demonstrations import run_expert
    from para_ros.sim.yam_scene import SimConfig, YamSim

    hull = YamSim(SimConfig(finger_collision="mesh"))
    r = run_expert(hull, kinematics, sample_layout(3), record=False)
    assert r.outcome == "no_grasp"
    boxes = YamSim(SimConfig())
    r = run_expert(boxes, kinematics, sample_layout(3), record=False)
    assert r.outcome == "success" and r.place_error_m < 0.01


def test_expert_succeeds_on_held_out_seeds(sim_task, kinematics):
    """A few seeds (the README's 50-episode figure comes from ``para-sim expert --episodes 50``)."""
    from para_ros.sim.demonstrations import run_expert

    outcomes = [run_expert(sim_task, kinematics, sample_layout(100000 + k), record=False).outcome for k in range(4)]
    assert outcomes.count("success") >= 3, outcomes


def test_expert_plan_is_continuous_and_top_down():
    lay = sample_layout(5)
    plan = plan_pick_place([0.31, 0.0, 0.144], lay, H, ExpertConfig())
    ts = np.arange(0.0, plan.duration_s + 0.5, 0.01)
    xyz = np.array([plan.command_at(t)[0][:3, 3] for t in ts])
    assert np.abs(np.diff(xyz, axis=0)).max() < 0.01  # no jump over 10 ms (< 1 m/s)
    np.testing.assert_allclose(plan.command_at(0.0)[0][:3, 3], [0.31, 0.0, 0.144], atol=1e-12)
    grasp_t = sum(s.duration_s for s in plan.segments[:3])
    T, g = plan.command_at(grasp_t)
    np.testing.assert_allclose(T[:2, 3], lay.cube_xy_m, atol=1e-12)
    np.testing.assert_allclose(T[:3, :3], np.diag([-1.0, 1.0, -1.0]))
    assert g == 1.0 and plan.command_at(plan.duration_s)[1] == 1.0
    assert min_jerk(0.0) == 0.0 and min_jerk(1.0) == 1.0 and min_jerk(0.5) == pytest.approx(0.5)


def test_demo_frames_are_an_episode_with_the_cameras_seen_by_the_sim(sim_task, kinematics, tmp_path):
    from para_core.data.dataset import Episode
    from para_ros.sim.demonstrations import frames_to_episode, run_expert

    r = run_expert(sim_task, kinematics, sample_layout(11), record=True, fps=10.0, image_size=64)
    ep = frames_to_episode(r.frames, 10.0, {"layout": r.layout.to_dict()})
    ep.save(tmp_path / "ep")
    back = Episode.load(tmp_path / "ep")
    assert len(back) == len(ep) >= 50
    np.testing.assert_array_equal(np.diff(back.stamps_ns), 100_000_000)  # exactly 10 Hz in sim time
    # the gripper closes on the cube during the episode and opens again
    assert back.gripper.min() < 0.7 and back.gripper[-1] > 0.95
    # K is MuJoCo's: f = (H/2) / tan(fovy/2), principal point at the centre (para_core: +0.5 convention)
    f = 32.0 / math.tan(math.radians(sim_task.fovy_deg("scene")) / 2)
    np.testing.assert_allclose(back.K["scene"][0], [[f, 0, 32.0], [0, f, 32.0], [0, 0, 1]])


def test_apply_layout_places_cube_and_pad(sim_task):
    lay = sample_layout(21)
    sim_task.reset()
    apply_layout(sim_task, lay)
    np.testing.assert_allclose(sim_task.cube_pose(0)[:2, 3], lay.cube_xy_m, atol=1e-9)
    np.testing.assert_allclose(sim_task.target_position()[:2], lay.target_xy_m, atol=1e-9)
    yaw = math.atan2(sim_task.cube_pose(0)[1, 0], sim_task.cube_pose(0)[0, 0])
    assert yaw == pytest.approx(lay.cube_yaw_rad, abs=1e-9)


# ---- evaluation helpers ------------------------------------------------------------------------------------------
def test_wilson_interval_hand_numbers():
    lo, hi = wilson_interval(8, 10)  # textbook value: 0.490 .. 0.943
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    lo, hi = wilson_interval(0, 5)
    assert lo == 0.0 and hi == pytest.approx(0.4345, abs=1e-3)
    assert wilson_interval(50, 50)[1] == 1.0


def test_wilson_interval_always_holds_the_rate():
    """At 0 or n successes an end of the interval equals the rate, and rounding put it on the wrong side
    (0/3 gave a lower end of 5.6e-17 > 0, which broke the sweep plot's error bars)."""
    for n in range(1, 201):
        for k in range(n + 1):
            lo, hi = wilson_interval(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)


def test_moved_camera_pose_turns_about_the_camera_centre():
    T = _pose([0.3, -0.5, 0.6], (0.3, 0.2, 0.1))
    M = moved_camera_pose(T, (0.05, 0.0, 0.0), (0.0, 0.0, 10.0))
    np.testing.assert_allclose(M[:3, 3], [0.35, -0.5, 0.6])
    R_delta = M[:3, :3] @ T[:3, :3].T
    assert np.degrees(Rotation.from_matrix(R_delta).magnitude()) == pytest.approx(10.0)
    np.testing.assert_allclose(Rotation.from_matrix(R_delta).as_rotvec(), [0, 0, math.radians(10)], atol=1e-12)


@pytest.fixture(scope="module")
def sim_task():
    from para_ros.sim.yam_scene import SimConfig, YamSim

    s = YamSim(SimConfig())
    yield s
    s.close()


@pytest.fixture(scope="module")
def kinematics():
    from para_ros.robot.yam_ik import YamKinematics

    return YamKinematics()


def test_eval_fast_path_option_reaches_the_inference_node():
    """``para-sim eval --fast-path`` runs the inference node with fast_path true; without it false."""
    import argparse

    from para_ros.commands import sim as sim_command
    from para_ros.deploy import closed_loop, graph

    parser = argparse.ArgumentParser()
    sim_command.add_eval_arguments(parser)
    inference = next(s for s in graph.NODES if s.name == "inference_node")
    # without the option the reference path explicitly (the report says which path ran, whatever the yaml holds)
    for argv, expected in ((["--checkpoint", "ckpt", "--fast-path"], True), (["--checkpoint", "ckpt"], False)):
        args = parser.parse_args(argv)
        settings = closed_loop.EvalSettings(checkpoint=args.checkpoint, fast_path=args.fast_path)
        overrides = graph.node_overrides(inference, closed_loop.deploy_settings(settings))
        assert overrides.get("fast_path") is expected
