"""The scene-camera sampler (ranges, visibility against OpenCV's projection), cube regions, and the ROS-free
demonstrations rendered from a drawn camera (the true pose in every frame)."""

import math

import cv2
import numpy as np
import pytest

from para_ros.sim.camera_sampler import (
    CameraMove,
    CameraRandomisation,
    NominalCamera,
    camera_pose,
    check_workspace_visible,
    visible_fraction,
    workspace_points_m,
)
from para_ros.sim.cameras import intrinsics_from_fovy
from para_ros.sim.layout_region import CubeRegion, episode_seeds
from para_ros.sim.pick_place import sample_layout


def _cv2_inside(points, T_world_cam, fovy_deg, size):
    """Independent reference: OpenCV's projection of the points, inside the image and in front of the camera."""
    K = intrinsics_from_fovy(fovy_deg, size, size)
    T_cam_world = np.linalg.inv(T_world_cam)
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    uv, _ = cv2.projectPoints(points.astype(np.float64), rvec, T_cam_world[:3, 3], K, None)
    uv = uv.reshape(-1, 2)
    depth = points @ T_cam_world[:3, :3].T[:, 2] + T_cam_world[2, 3]
    return (depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < size) & (uv[:, 1] >= 0) & (uv[:, 1] < size)


def test_orbit_keeps_distance_and_height_and_aims_at_the_workspace():
    nominal = NominalCamera()
    T0, _ = camera_pose(CameraMove(), nominal)
    T, fovy = camera_pose(CameraMove(orbit_deg=90.0), nominal)
    target = np.array(nominal.look_at_m)
    # hand-computed: the nominal camera sits at (0.33, -0.5) in the table plane, 0.5 m on -y of the look-at point;
    # 90 deg counter-clockwise puts it 0.5 m on +x of it, same height
    np.testing.assert_allclose(T[:3, 3], [0.33 + 0.5, 0.0, 0.6], atol=1e-12)
    np.testing.assert_allclose(T0[:3, 3], nominal.position_m, atol=1e-12)
    z = T[:3, 2]  # optical axis points at the look-at point
    np.testing.assert_allclose(z, (target - T[:3, 3]) / np.linalg.norm(target - T[:3, 3]), atol=1e-12)
    assert fovy == nominal.fovy_deg
    T_up, _ = camera_pose(CameraMove(height_m=0.1, distance_m=0.05), nominal)
    assert math.isclose(np.linalg.norm(T_up[:3, 3] - target), np.hypot(0.5, 0.67) + 0.05, abs_tol=1e-12)


def test_visible_fraction_matches_opencv_projection():
    pts = workspace_points_m()
    rng = np.random.default_rng(3)
    fractions = []
    for _ in range(40):
        move = CameraMove(
            orbit_deg=rng.uniform(-120, 120),
            height_m=rng.uniform(-0.5, 0.4),
            look_at_m=tuple(rng.uniform(-0.25, 0.25, 3)),
            fovy_deg=rng.uniform(12, 60),
        )
        T, fovy = camera_pose(move)
        ref = _cv2_inside(pts, T, fovy, 200).mean()
        assert visible_fraction(T, fovy, 200, 200) == pytest.approx(ref, abs=1e-12)
        fractions.append(ref)
    assert min(fractions) < 0.9 and max(fractions) == 1.0  # the draws exercised both cases


def test_sampler_stays_within_its_ranges_and_always_sees_the_workspace():
    r = CameraRandomisation(
        orbit_deg=(-45, 45),
        height_m=(-0.17, 0.17),
        distance_m=(-0.08, 0.08),
        look_at_jitter_m=0.03,
        fovy_deg=(28, 48),
        image_size=128,
    )
    pts = workspace_points_m()
    moves = []
    for seed in range(150):
        cam = r.sample(seed)
        m = cam.move
        moves.append(m)
        assert -45 <= m.orbit_deg <= 45 and -0.17 <= m.height_m <= 0.17 and -0.08 <= m.distance_m <= 0.08
        assert 28 <= m.fovy_deg <= 48 and all(abs(v) <= 0.03 for v in m.look_at_m)
        assert _cv2_inside(pts, cam.T_world_cam, cam.fovy_deg, 128).all()  # OpenCV: every workspace point in view
        np.testing.assert_allclose(cam.T_world_cam, camera_pose(m)[0])
    assert r.sample(7).move == r.sample(7).move  # deterministic per seed
    orbits = np.array([m.orbit_deg for m in moves])
    assert orbits.min() < -35 and orbits.max() > 35  # the ranges are used, not just their middle


def test_sampler_redraws_until_the_workspace_is_in_view_and_gives_up_on_hopeless_ranges():
    wide = CameraRandomisation(fovy_deg=(10, 40), height_m=(-0.4, 0.0), orbit_deg=(-45, 45), image_size=128)
    redraws = [wide.sample(s) for s in range(60)]
    assert max(c.draws for c in redraws) > 1  # some draws were refused ...
    assert all(c.visible_fraction == 1.0 for c in redraws)  # ... and every kept one sees everything
    hopeless = CameraRandomisation(fovy_deg=(10, 11), max_draws=20)  # a telephoto sees a few cm of the table
    with pytest.raises(ValueError, match=r"20 draws .* out of view .* narrow the ranges"):
        hopeless.sample(0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"orbit_deg": (10, -10)}, "orbit_deg"),
        ({"fovy_deg": (5, 30)}, "fovy_deg"),
        ({"height_m": (0, 2)}, "height_m"),
        ({"look_at_jitter_m": -0.1}, "look_at_jitter_m"),
        ({"distance_m": (-0.8, 0)}, "distance_m"),
        ({"min_visible_fraction": 0}, "min_visible_fraction"),
    ],
)
def test_randomisation_refuses_bad_ranges(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CameraRandomisation(**kwargs)


def test_a_move_out_of_view_is_refused_with_the_visible_fraction():
    with pytest.raises(ValueError, match=r"fovy 12 deg leaves the workspace partly out of view: \d+ %"):
        check_workspace_visible(CameraMove(fovy_deg=12.0))
    T, fovy = check_workspace_visible(CameraMove(orbit_deg=25.0))
    assert fovy == 38.0 and T.shape == (4, 4)


def test_eval_refuses_a_camera_that_does_not_see_the_workspace(tmp_path, capsys):
    from test_sim_record_eval import _fake_checkpoint

    from para_ros.commands import sim as sim_cli

    ck = _fake_checkpoint(tmp_path)
    out = tmp_path / "r"
    assert (
        sim_cli.main(
            ["eval", "--checkpoint", str(ck), "--episodes", "1", "--out", str(out), "--camera-rotate", "0", "0", "30"]
        )
        == 2
    )
    assert "sees 50 % of the workspace" in capsys.readouterr().err and not out.exists()


# ----------------------------------------------------------------------------------------------- cube regions
def test_cube_region_seeds_hold_cubes_only_in_the_region():
    region = CubeRegion.parse("y<0")
    seeds = episode_seeds(100, 25, region)
    assert len(seeds) == 25 and seeds == sorted(set(seeds)) and seeds[0] >= 100
    brute = [s for s in range(100, seeds[-1] + 1) if sample_layout(s).cube_xy_m[1] < 0]  # brute force
    assert seeds == brute
    other = episode_seeds(100, 25, CubeRegion.parse("y >= 0"))
    assert all(sample_layout(s).cube_xy_m[1] >= 0 for s in other) and not set(seeds) & set(other)
    assert episode_seeds(5, 3, None) == [5, 6, 7]
    assert CubeRegion.parse("x>=0.3,y<0").area_fraction() == pytest.approx((0.10 / 0.14) * 0.5)


@pytest.mark.parametrize(
    "text, message",
    [
        ("z<0", "not AXIS OP NUMBER"),
        ("y=0", "not AXIS OP NUMBER"),
        ("", "empty"),
        ("y<-0.2", r"keeps 0.0 % of the task's cube region \(x 0.26..0.4 m, y -0.12..0.12 m"),
        ("x>0.395", r"keeps 3.6 %"),
    ],
)
def test_cube_region_refuses_bad_text(text, message):
    with pytest.raises(ValueError, match=message):
        CubeRegion.parse(text)


def test_demos_refuse_a_bad_region_and_bad_ranges_before_writing(tmp_path, capsys):
    from para_ros.commands import sim as sim_cli

    with pytest.raises(SystemExit):
        sim_cli.main(["demos", "--out", str(tmp_path / "d"), "--cube-region", "y<-1"])
    assert "keeps 0.0 %" in capsys.readouterr().err
    assert sim_cli.main(["demos", "--out", str(tmp_path / "d"), "--randomise-camera", "--fovy-deg", "50,20"]) == 2
    assert "fovy_deg" in capsys.readouterr().err and not (tmp_path / "d").exists()


# ------------------------------------------------------------------------------------ demonstrations (ROS-free)
def test_randomised_demos_record_the_true_camera_in_every_frame(tmp_path):
    """Two ROS-free expert episodes with drawn cameras: each frame's scene pose and K are the drawn camera's; the
    rendered image changes with it; the cube lies in the requested region."""
    from para_core.data.dataset import Episode
    from para_ros.commands import sim as sim_cli

    out = tmp_path / "demos"
    assert (
        sim_cli.main(
            [
                "demos",
                "--out",
                str(out),
                "--episodes",
                "2",
                "--seed",
                "0",
                "--image-size",
                "64",
                "--randomise-camera",
                "--cube-region",
                "y<0",
                "--no-progress",
            ]
        )
        == 0
    )
    r = CameraRandomisation(image_size=64)
    episodes = sorted(out.glob("episode_*"))
    assert len(episodes) == 2
    first_images = []
    for d in episodes:
        ep = Episode.load(d)
        seed = ep.meta["layout"]["seed"]
        assert ep.meta["layout"]["cube_xy_m"][1] < 0 and ep.meta["cube_region"] == "y<0"
        expected = r.sample(seed)  # the camera is a function of the layout seed
        T_scene = ep.T_world_cam["scene"]  # (N, 4, 4)
        assert T_scene.shape[0] == len(ep) >= 40
        np.testing.assert_allclose(T_scene, np.broadcast_to(expected.T_world_cam, T_scene.shape), atol=1e-9)
        np.testing.assert_allclose(
            ep.K["scene"],
            np.broadcast_to(intrinsics_from_fovy(expected.fovy_deg, 64, 64), ep.K["scene"].shape),
            atol=1e-9,
        )
        assert not np.allclose(expected.T_world_cam, camera_pose(CameraMove())[0])  # not the nominal camera
        # the cube's projection through the recorded pose lands on red pixels of the first image
        cube = np.array([*ep.meta["layout"]["cube_xy_m"], 0.02])
        inside = _cv2_inside(cube[None], T_scene[0], expected.fovy_deg, 64)
        assert inside.all()
        first_images.append(ep.images["scene"][0])
    assert np.abs(first_images[0].astype(int) - first_images[1].astype(int)).mean() > 2


def test_a_sampled_camera_renders_what_its_pose_and_intrinsics_project():
    """The simulator renders from the drawn pose AND field of view: the grasp marker's rendered centroid is where
    OpenCV projects it with the drawn camera's pose and K (a wrong fovy in the renderer moves it by pixels)."""
    from test_sim_scene import marker_centroid, project_cv2

    from para_ros.sim.camera_sampler import apply_to_sim
    from para_ros.sim.yam_scene import SimConfig, YamSim

    sim = YamSim(SimConfig())
    try:
        r = CameraRandomisation()
        for seed in (1, 2, 3):
            cam = r.sample(seed)
            apply_to_sim(sim, cam)
            sim.reset()
            np.testing.assert_allclose(sim.T_world_cam("scene"), cam.T_world_cam, atol=1e-9)
            K = sim.intrinsics("scene", 256, 256)
            np.testing.assert_allclose(K, intrinsics_from_fovy(cam.fovy_deg, 256, 256))
            uv = project_cv2(sim.site_pose()[:3, 3], K, cam.T_world_cam)
            centroid, n = marker_centroid(sim, "scene", 256, 256)
            assert n >= 3 and np.linalg.norm(uv - centroid) < 2.0, (seed, uv, centroid)
    finally:
        sim.close()


def test_eval_takes_a_validated_cube_region(tmp_path, capsys):
    from test_sim_record_eval import _fake_checkpoint

    from para_ros.commands import sim as sim_cli
    from para_ros.deploy.closed_loop import EvalSettings

    assert EvalSettings(checkpoint="x", cube_region="y >= 0").cube_region == "y>=0"
    with pytest.raises(ValueError, match="keeps 0.0 %"):
        EvalSettings(checkpoint="x", cube_region="x<0")
    ck = _fake_checkpoint(tmp_path)
    with pytest.raises(SystemExit):
        sim_cli.main(["eval", "--checkpoint", str(ck), "--out", str(tmp_path / "r"), "--cube-region", "q<1"])
    assert "not AXIS OP NUMBER" in capsys.readouterr().err and not (tmp_path / "r").exists()
