"""The user's data path on the simulator, over real DDS: ``para-sim record`` (expert through sim_node) -> rosbag2 ->
``para-bag extract`` -> ``para-train``; the closed-loop evaluation's refusals; and (slow) the shipped checkpoint
picking and placing through the real nodes."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from para_core.data.dataset import Episode
from para_ros.commands import bag as bag_tools
from para_ros.commands import sim as sim_cli
from para_ros.sim.pick_place import sample_layout

pytestmark = pytest.mark.ros


def test_recorded_bag_extracts_to_an_episode_that_trains(tmp_path):
    from para_core.train import cli as train_cli
    from para_ros.deploy.sim_recorder import record_episodes

    counts = record_episodes(tmp_path / "bags", episodes=1, seed=7, progress=False)
    assert counts == {"success": 1}  # the expert through sim_node, judged by the sim's own task state
    bag = tmp_path / "bags" / "episode_000007"
    task = json.loads((bag / "para_task.json").read_text())
    lay = sample_layout(7)
    np.testing.assert_allclose(task["layout"]["cube_xy_m"], lay.cube_xy_m)
    assert task["final_state"]["state"] == "on_target" and task["final_state"]["place_error_m"] < 0.02

    assert bag_tools.main(["extract", str(bag), "--out", str(tmp_path / "ep"), "--fps", "10", "--quiet"]) == 0
    ep = Episode.load(tmp_path / "ep")
    assert ep.view_names == ("scene", "wrist") and len(ep) >= 50  # ~7 s at 10 Hz
    # the recorded tool path visits the cube (grasp) and the pad (place), at the expert's heights
    xy = ep.T_world_ee[:, :2, 3]
    assert np.linalg.norm(xy - lay.cube_xy_m, axis=1).min() < 0.01
    assert np.linalg.norm(xy - lay.target_xy_m, axis=1).min() < 0.01
    assert ep.T_world_ee[:, 2, 3].min() < 0.03 and ep.gripper.min() < 0.7 and ep.gripper.max() > 0.95

    rc = train_cli.main(
        [
            "--data",
            str(tmp_path / "ep"),
            "--preset",
            "tiny",
            "--out",
            str(tmp_path / "run"),
            "--max-iters",
            "3",
            "--val-fraction",
            "0",
            "--num-workers",
            "0",
            "--no-progress",
        ]
    )
    assert rc == 0 and (tmp_path / "run" / "checkpoint" / "model.safetensors").is_file()


def _fake_checkpoint(tmp_path, views=("scene", "wrist"), sim=None):
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.config import V4Config
    from para_core.model.registry import build_model

    cfg = V4Config.tiny(view_names=views)
    path = tmp_path / "ck"
    save_checkpoint(path, build_model(cfg), cfg)
    if sim is not None:
        (path / "recipe.json").write_text(json.dumps({"sim": sim}))
    return path


def test_eval_refuses_a_checkpoint_with_other_cameras(tmp_path, capsys):
    ck = _fake_checkpoint(tmp_path, views=("front", "wrist"))
    assert sim_cli.main(["eval", "--checkpoint", str(ck), "--episodes", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "views ['front', 'wrist']" in err and "['scene', 'wrist']" in err


def test_eval_refuses_a_checkpoint_trained_on_another_simulator(tmp_path, capsys):
    ck = _fake_checkpoint(tmp_path, sim={"scene_cam_fovy_deg": 50.0})
    assert sim_cli.main(["eval", "--checkpoint", str(ck), "--episodes", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "scene_cam_fovy_deg=50.0" in err and "scene_cam_fovy_deg=38.0" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--episodes", "0"], "out of range: use 1..10000"),
        (["--seed", "-3"], "[0, 2147483647]"),
        (["--seed", "2147483647", "--episodes", "2"], "[0, 2147483647]"),
        (["--node-param", "chunk_executor:implausible_speed:=clip"], "implausible_speed"),
        (["--node-param", "planner:rate:=1"], "no node 'planner'"),
        (["--node-param", "chunk_executor=reject"], "NODE:NAME:=VALUE"),
    ],
)
def test_eval_refuses_bad_settings(tmp_path, capsys, argv, message):
    ck = _fake_checkpoint(tmp_path)
    assert sim_cli.main(["eval", "--checkpoint", str(ck), "--out", str(tmp_path / "r"), *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_the_default_checkpoint_picks_and_places_through_the_real_nodes(tmp_path):
    """The policy para-sim eval / para-deploy / scripts/demo run when no checkpoint is given, closed loop through
    sim_node + inference_node + chunk_executor over DDS: at least one success in a few held-out episodes (the
    README's figures are over 30-100)."""
    from para_ros.deploy import graph

    default = Path(graph.shipped_checkpoint())
    assert (default / "model.safetensors").is_file(), f"the default checkpoint {graph.SIM_CHECKPOINT} is missing"
    out = tmp_path / "eval"
    rc = sim_cli.main(
        [
            "eval",
            "--episodes",
            "4",
            "--seed",
            "100000",
            "--out",
            str(out),
            "--time-limit",
            "30",
        ]
    )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert Path(report["settings"]["checkpoint"]).resolve() == default.resolve()
    assert report["summary"]["episodes"] == 4
    assert report["summary"]["successes"] >= 1, report["summary"]
    assert (out / "report.md").is_file() and (out / "outcomes.png").is_file()
    shutil.rmtree(out / "logs", ignore_errors=True)
