"""``para-sim sweep``: its points, the exact camera each point hands to ``para-sim eval``, the table's Wilson
intervals, refusals before anything runs, and (slow, real nodes over DDS) two points with a tiny checkpoint; and
(slow) ``para-sim record --randomise-camera`` putting the drawn camera on /tf_static of every bag."""

import json

import numpy as np
import pytest
from core_fixtures import tiny_checkpoint

from para_ros.commands import sim as sim_cli
from para_ros.commands.sim_sweep import parse_checkpoints
from para_ros.deploy.closed_loop import moved_camera_pose
from para_ros.deploy.sweep import shift_and_rotation, sweep_points, write_table
from para_ros.sim.camera_sampler import CameraMove, NominalCamera, camera_pose
from para_ros.sim.pick_place import wilson_interval


def test_points_one_axis_at_a_time_or_every_combination():
    nominal = NominalCamera()
    pts = sweep_points([-40, -25, 0, 25, 40], [-0.15, 0, 0.15], [30, 46], nominal)
    assert [p.axis for p in pts] == ["nominal"] + ["orbit"] * 4 + ["height"] * 2 + ["fovy"] * 2
    assert [p.value(nominal) for p in pts] == [0.0, -40, -25, 25, 40, -0.15, 0.15, 30, 46]
    assert len({p.label for p in pts}) == len(pts)
    grid = sweep_points([0, 25], [0, 0.1], [38, 46], nominal, product=True)
    assert len(grid) == 8 and sum(p.axis == "nominal" for p in grid) == 1  # fovy 38 is the nominal one


def test_each_point_reaches_the_simulator_as_its_exact_pose():
    """The shift + rotation handed to para-sim eval rebuild the point's camera through the eval's own function."""
    T0 = camera_pose(CameraMove())[0]
    for move in (
        CameraMove(orbit_deg=40),
        CameraMove(orbit_deg=-25),
        CameraMove(height_m=0.15),
        CameraMove(orbit_deg=30, height_m=-0.1, distance_m=0.05, look_at_m=(0.02, -0.01, 0.0)),
    ):
        T = camera_pose(move)[0]
        shift, rot = shift_and_rotation(T0, T)
        np.testing.assert_allclose(moved_camera_pose(T0, shift, rot), T, atol=1e-9)


def test_table_cells_are_the_wilson_intervals(tmp_path):
    nominal = NominalCamera()
    pts = sweep_points([0, 25], [0], [38], nominal)
    results = {
        ("a", pts[0].label): {
            "episodes": 30,
            "successes": 27,
            "success_rate": 0.9,
            "wilson95": list(wilson_interval(27, 30)),
        },
        ("a", pts[1].label): {
            "episodes": 30,
            "successes": 0,
            "success_rate": 0.0,
            "wilson95": list(wilson_interval(0, 30)),
        },
    }
    data = write_table(tmp_path, pts, ["a", "b"], results, nominal, {"episodes": 30, "seed": 100000})
    md = (tmp_path / "sweep.md").read_text()
    # hand-computed Wilson 95 % intervals: 27/30 -> 74.4..96.5 %, 0/30 -> 0..11.4 %
    assert "| orbit +0 deg, height +0 cm | 27/30 = 90 % (74-97 %) | - |" in md
    assert "| orbit +25 deg, height +0 cm | 0/30 = 0 % (0-11 %) | - |" in md
    assert json.loads((tmp_path / "sweep.json").read_text())["points"][1]["results"]["b"] is None
    assert data["checkpoints"] == ["a", "b"]


def test_a_point_counts_as_done_with_enough_episodes_and_no_fault(tmp_path):
    from para_ros.deploy.closed_loop import finished_summary

    def report(episodes, faults=0, interrupted=False):
        outcomes = {"success": episodes - faults, "fault": faults}
        summary = {"episodes": episodes, "successes": episodes - faults, "outcomes": outcomes}
        path = tmp_path / f"r{episodes}_{faults}_{interrupted}.json"
        path.write_text(json.dumps({"summary": summary, "interrupted": interrupted}))
        return path

    assert finished_summary(report(10), 10)["episodes"] == 10
    assert finished_summary(report(12), 10) is not None  # run with more episodes before
    assert finished_summary(report(8), 10) is None  # continued: two more layouts
    assert finished_summary(report(10, faults=1), 10) is None  # continued: the faulted layout again
    assert finished_summary(report(10, interrupted=True), 10) is None
    assert finished_summary(report(10, faults=1), None) is not None  # --report-only shows whatever there is
    assert finished_summary(tmp_path / "missing.json", 10) is None


def test_checkpoint_labels():
    assert parse_checkpoints("fixed=a/b,c/d/") == [("fixed", "a/b"), ("d", "c/d/")]
    with pytest.raises(ValueError, match="distinct labels"):
        parse_checkpoints("x/ck,y/ck")


def test_sweep_refuses_a_point_out_of_view_and_a_bad_checkpoint_before_running(tmp_path, capsys):
    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "sweep"
    assert (
        sim_cli.main(
            [
                "sweep",
                "--checkpoint",
                str(ck),
                "--orbit-deg",
                "0",
                "--height-m",
                "0",
                "--fovy-deg",
                "12",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "camera move orbit +0 deg, height +0 cm, fovy 12 deg sees" in err and "% of the workspace" in err
    assert not out.exists()
    assert sim_cli.main(["sweep", "--checkpoint", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "not a checkpoint directory" in capsys.readouterr().err and not out.exists()
    assert sim_cli.main(["sweep", "--checkpoint", str(ck), "--dry-run"]) == 0
    assert "9 camera point(s) x 1 checkpoint(s) x 30 episodes = 270 episodes" in capsys.readouterr().out


def test_report_only_joins_sweeps_of_different_checkpoints_into_one_table(tmp_path, capsys):
    """Two checkpoints swept separately (10 and 3 episodes, one point missing for b) land in one table: each cell
    with its own count and Wilson interval, the missing one '-'; an interrupted report counts as missing; nothing runs
    (a point with no report would otherwise start a graph)."""
    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "sweep"

    def report(label, point, ok, n, interrupted=False):
        d = out / label / point
        d.mkdir(parents=True)
        lo, hi = wilson_interval(ok, n)
        summary = {"episodes": n, "successes": ok, "success_rate": ok / n, "wilson95": [lo, hi]}
        (d / "report.json").write_text(json.dumps({"summary": summary, "interrupted": interrupted}))

    report("a", "orbit+0_height+0cm", 9, 10)
    report("a", "orbit+10_height+0cm", 7, 10)
    report("b", "orbit+0_height+0cm", 0, 3)  # 0 of 3: rounding once put the interval's lower end above 0
    report("b", "orbit+10_height+0cm", 3, 5, interrupted=True)
    argv = ["sweep", "--checkpoint", f"a={ck},b={ck}", "--orbit-deg", "0,10", "--height-m", "0", "--fovy-deg", "38"]
    assert sim_cli.main([*argv, "--report-only"]) == 2  # needs --out
    assert "--report-only needs --out" in capsys.readouterr().err
    assert sim_cli.main([*argv, "--out", str(out), "--report-only"]) == 0
    md = (out / "sweep.md").read_text()
    # hand-computed Wilson 95 %: 9/10 -> 59.6..98.2 %, 7/10 -> 39.7..89.2 %, 0/3 -> 0..56.1 %
    assert "| orbit +0 deg, height +0 cm | 9/10 = 90 % (60-98 %) | 0/3 = 0 % (0-56 %) |" in md
    assert "| orbit +10 deg, height +0 cm | 7/10 = 70 % (40-89 %) | - |" in md
    assert (out / "sweep.png").stat().st_size > 1000 and not (out / "a" / "orbit+0_height+0cm" / "logs").exists()


@pytest.mark.slow
@pytest.mark.ros
def test_sweep_runs_two_points_with_atiny_checkpoint(tmp_path, capsys):
    """Two points (nominal, orbit +10 deg), one short episode each, through the real nodes in lockstep; then a rerun
    finds them done, and a rerun with two episodes a point keeps the first (the very row, its wall time too) and runs
    only the second."""
    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--checkpoint",
        f"tiny={ck}",
        "--orbit-deg",
        "0,10",
        "--height-m",
        "0",
        "--fovy-deg",
        "38",
        "--episodes",
        "1",
        "--time-limit",
        "3",
        "--settle",
        "0.5",
        "--out",
        str(out),
        "--lockstep",
    ]
    assert sim_cli.main(argv) == 0
    data = json.loads((out / "sweep.json").read_text())
    assert [p["point"] for p in data["points"]] == ["orbit+0_height+0cm", "orbit+10_height+0cm"]
    for p in data["points"]:
        assert p["results"]["tiny"]["episodes"] == 1 and p["visible_fraction"] == 1.0
    assert (out / "sweep.png").stat().st_size > 1000 and "| orbit +10 deg" in (out / "sweep.md").read_text()
    moved = json.loads((out / "tiny" / "orbit+10_height+0cm" / "report.json").read_text())["settings"]
    assert moved["lockstep"] is True and data["settings"]["lockstep"] is True
    T0 = camera_pose(CameraMove())[0]
    np.testing.assert_allclose(
        moved_camera_pose(T0, moved["camera_shift_m"], moved["camera_rotate_deg"]),
        camera_pose(CameraMove(orbit_deg=10))[0],
        atol=1e-9,
    )
    capsys.readouterr()
    assert sim_cli.main(argv) == 0  # resumable: nothing is run again
    assert capsys.readouterr().out.count("done before") == 2
    first = json.loads((out / "tiny" / "orbit+0_height+0cm" / "report.json").read_text())["episodes"]
    argv[argv.index("--episodes") + 1] = "2"
    assert sim_cli.main(argv) == 0
    assert capsys.readouterr().out.count("1 episode(s) kept") == 2
    now = json.loads((out / "tiny" / "orbit+0_height+0cm" / "report.json").read_text())["episodes"]
    assert [e["seed"] for e in now] == [100000, 100001] and now[0] == first[0]
    data = json.loads((out / "sweep.json").read_text())
    assert all(p["results"]["tiny"]["episodes"] == 2 for p in data["points"])


@pytest.mark.slow
@pytest.mark.ros
def test_ctrl_c_stops_the_whole_sweep_with_status_130(tmp_path):
    """SIGINT while the first point runs: that point's eval stops, the sweep stops too (exit 130, the second point
    never starts), and the message says the same command continues. Catches a sweep that treats an interrupted point
    as finished and moves on to the next one, and an eval that judges the episode the signal cut short."""
    import signal
    import time

    from ros_helpers import start_python, stop_process

    ck = tiny_checkpoint(tmp_path / "ck")
    out = tmp_path / "sweep"
    args = ["para_ros.commands.sim", "sweep", "--checkpoint", f"tiny={ck}", "--orbit-deg", "0,10"]
    args += ["--height-m", "0", "--fovy-deg", "38", "--episodes", "3", "--time-limit", "20", "--out", str(out)]
    proc = start_python(args, module=True)
    seen = []
    for line in proc.stdout:  # until the first point's first episode is running
        seen.append(line)
        if "episodes from seed" in line:
            break
    assert proc.poll() is None, "".join(seen)
    sim_log = out / "tiny" / "orbit+0_height+0cm" / "logs" / "sim_node.log"
    deadline = time.monotonic() + 120.0  # until the first episode's reset: the episode (20 s limit) is then running
    while time.monotonic() < deadline and not (sim_log.is_file() and "task reset" in sim_log.read_text()):
        time.sleep(0.2)
    assert "task reset" in sim_log.read_text(), "the first episode never started"
    time.sleep(1.0)
    rc, rest = stop_process(proc, timeout_s=60, stop_signal=signal.SIGINT)
    text = "".join(seen) + rest
    assert rc == 130, text
    assert "interrupted at tiny orbit +0 deg" in text and "[2/2]" not in text, text
    assert not (out / "tiny" / "orbit+10_height+0cm").exists()
    report = json.loads((out / "tiny" / "orbit+0_height+0cm" / "report.json").read_text())
    assert report["interrupted"] is True
    # the episode running at the signal (20 s limit) was cut short, not judged: it is no attempt and not in the report
    assert report["episodes"] == [], report["episodes"]


@pytest.mark.slow
@pytest.mark.ros
def test_record_with_a_randomised_camera_puts_the_drawn_pose_on_tf_static(tmp_path):
    from para_core.data.dataset import Episode
    from para_ros.commands import bag as bag_tools
    from para_ros.deploy.sim_recorder import record_episodes
    from para_ros.sim.camera_sampler import CameraRandomisation
    from para_ros.sim.cameras import intrinsics_from_fovy

    cams = CameraRandomisation()
    counts = record_episodes(tmp_path / "bags", episodes=1, seed=7, progress=False, cameras=cams, seeds=[7])
    assert counts == {"success": 1}
    bag = tmp_path / "bags" / "episode_000007"
    drawn = cams.sample(7)
    task = json.loads((bag / "para_task.json").read_text())
    np.testing.assert_allclose(task["scene_camera"]["T_world_cam"], drawn.T_world_cam)
    assert bag_tools.main(["extract", str(bag), "--out", str(tmp_path / "ep"), "--fps", "10", "--quiet"]) == 0
    ep = Episode.load(tmp_path / "ep")
    T = ep.T_world_cam["scene"]  # (N, 4, 4), from the bag's /tf_static
    np.testing.assert_allclose(T, np.broadcast_to(drawn.T_world_cam, T.shape), atol=1e-6)
    scale = ep.images["scene"].shape[2] / 256  # the focal length of the drawn field of view, at the stored size
    f = intrinsics_from_fovy(drawn.fovy_deg, 256, 256)[0, 0] * scale
    np.testing.assert_allclose(ep.K["scene"][:, 0, 0], f, rtol=1e-6)
    np.testing.assert_allclose(ep.K["scene"][:, 1, 1], f, rtol=1e-6)
