"""rerun recordings of a recording (``para-bag view``) and of an offline evaluation (``para-bag eval --rerun``), read
back with rerun's own reader: the camera poses are the recording's TF, the clouds the voxels given or predicted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rerun")

sys.path.insert(0, str(Path(__file__).parent))
from bag_fixtures import NS, T0_NS, SyntheticBagSpec, reference_wrist_pose, write_synthetic_bag  # noqa: E402

from para_ros.bag.reader import BagReader  # noqa: E402
from para_ros.bag.topic_options import TOPIC_OVERRIDE_OPTIONS  # noqa: E402
from para_ros.commands.bag import load_policy, topic_config  # noqa: E402
from para_ros.commands.bag import main as bag_main
from para_ros.viz.rerun_log import read_entities  # noqa: E402


def no_topic_overrides() -> argparse.Namespace:
    """The para-bag topic options, none given: config/inference.yaml's topics."""
    names = TOPIC_OVERRIDE_OPTIONS + ("params_file", "image_topic", "info_topic")
    return argparse.Namespace(**dict.fromkeys(names))


SPEC = SyntheticBagSpec(duration_s=1.0, image_wh=(48, 36))
CHUNK_STAMP = T0_NS + NS // 5
CHUNK_POS = np.array([[0.30, 0.00, 0.20], [0.32, 0.01, 0.19], [0.34, 0.02, 0.18]])
VOXELS = np.array([[0.30, 0.00, 0.10], [0.31, 0.01, 0.12], [0.29, -0.02, 0.11]])
VOXEL_PROB = np.array([0.6, 0.3, 0.1])


def _stamp_ns(value) -> int:
    return int(value)  # read_entities gives the stamp timeline as int nanoseconds


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    chunk = (
        CHUNK_STAMP,
        CHUNK_POS,
        np.tile([0.0, 0.0, 0.0, 1.0], (3, 1)),
        np.array([0, NS // 10, NS // 5]),
        np.ones(3),
    )
    return write_synthetic_bag(
        tmp_path_factory.mktemp("rr") / "bag", SPEC, chunks=[chunk], voxels=[(CHUNK_STAMP, VOXELS, VOXEL_PROB)]
    )


def test_view_holds_posed_cameras_trajectory_chunk_and_cloud(bag, tmp_path):
    out = tmp_path / "view.rrd"
    assert bag_main(["view", str(bag), "--out", str(out), "--quiet"]) == 0
    ents = read_entities(out)
    with BagReader(
        bag,
        topic_config(
            no_topic_overrides(),
            ("scene", "wrist"),
        ),
    ) as reader:
        observations = list(reader.observations())
    assert len(observations) >= 8
    wrist = {_stamp_ns(r["stamp"]): r for r in ents["/world/cameras/wrist"] if "Transform3D:translation" in r}
    for obs in observations:
        stamp = obs.image_stamps_ns[1]
        row = wrist[stamp]
        T_tf = obs.cameras[1].T_world_cam  # the recording's TF at the image stamp
        assert np.allclose(np.ravel(row["Transform3D:translation"]), T_tf[:3, 3], atol=1e-6)
        R = np.asarray(row["Transform3D:mat3x3"], dtype=float).reshape(3, 3).T  # rerun stores column-major
        assert np.allclose(R, T_tf[:3, :3], atol=1e-6)
        # and TF is the fixture's analytic truth (TF interpolation between 100 Hz samples: < 1 mm)
        assert np.allclose(T_tf[:3, 3], reference_wrist_pose(SPEC, stamp)[:3, 3], atol=1e-3)
    pinhole = [r for r in ents["/world/cameras/scene"] if "Pinhole:image_from_camera" in r]
    assert pinhole and np.allclose(
        np.asarray(pinhole[0]["Pinhole:image_from_camera"]).reshape(3, 3).T, observations[0].cameras[0].K
    )
    assert len(ents["/world/cameras/scene/image"]) == len(observations)
    ee = ents["/world/ee"]
    assert np.allclose(
        [np.ravel(r["Points3D:positions"]) for r in ee], [o.T_world_ee[:3, 3] for o in observations], atol=1e-6
    )
    assert len(ents["/world/ee/trajectory"][-1]["LineStrips3D:strips"][0]) == len(observations)
    (chunk,) = ents["/world/chunk/path"]
    assert _stamp_ns(chunk["stamp"]) == CHUNK_STAMP
    assert np.allclose(np.asarray(chunk["LineStrips3D:strips"][0]), CHUNK_POS, atol=1e-6)
    (cloud,) = ents["/world/voxels"]
    assert _stamp_ns(cloud["stamp"]) == CHUNK_STAMP
    assert np.allclose(np.asarray(cloud["Points3D:positions"]), VOXELS, atol=1e-6)
    colours = np.array([[(c >> 24) & 255, (c >> 16) & 255, (c >> 8) & 255] for c in cloud["Points3D:colors"]])
    brightness = colours.sum(axis=1)  # viridis: brighter with probability
    assert brightness[0] > brightness[1] > brightness[2]


def test_eval_rerun_cloud_is_the_policys_top_voxels(bag, tmp_path):
    out = tmp_path / "eval.rrd"
    assert (
        bag_main(
            [
                "eval",
                str(bag),
                "--random-preset",
                "tiny",
                "--out",
                str(tmp_path / "e"),
                "--max-frames",
                "2",
                "--overlay-every",
                "0",
                "--response-volume-every",
                "-1",
                "--rerun",
                str(out),
                "--quiet",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    ents = read_entities(out)
    clouds = ents["/world/voxels"]
    assert len(clouds) == 2 and len(ents["/world/chunk/argmax"]) == 2
    args = argparse.Namespace(checkpoint=None, random_preset="tiny", random_seed=0, device="cpu", dtype="fp32")
    policy = load_policy(args)
    ns = no_topic_overrides()
    with BagReader(bag, topic_config(ns, policy.view_names)) as reader:
        stamps = reader.pair_stamps()[:2]
        cfg = policy.config
        for obs, cloud, path in zip(
            reader.observations(set(stamps), cfg.mv_past_n, cfg.step_dt_s), clouds, ents["/world/chunk/path"]
        ):
            pred = policy.predict(obs.cameras, obs.state)
            assert _stamp_ns(cloud["stamp"]) == obs.stamp_ns
            assert np.allclose(np.asarray(cloud["Points3D:positions"]), pred.top_voxels_world, atol=1e-6)
            assert np.allclose(np.asarray(path["LineStrips3D:strips"][0]), pred.positions_world, atol=1e-6)


@pytest.mark.slow  # ~40 s: the deploy graph's three nodes, one closed-loop episode
def test_sim_eval_rerun_holds_the_runs_cameras_chunks_and_clouds(tmp_path):
    from para_ros.bag.view import cloud_points
    from para_ros.commands import sim as sim_cli
    from para_ros.stamps import stamp_to_ns

    shipped = Path(__file__).resolve().parents[1] / "checkpoints" / "pick_place"
    out = tmp_path / "eval"
    assert (
        sim_cli.main(
            [
                "eval",
                "--checkpoint",
                str(shipped),
                "--episodes",
                "1",
                "--time-limit",
                "8",
                "--no-videos",
                "--out",
                str(out),
                "--rerun",
                str(out / "eval.rrd"),
            ]
        )
        == 0
    )
    ents = read_entities(out / "eval.rrd")
    for entity in ("/world/cameras/scene", "/world/cameras/wrist/image", "/world/ee", "/world/chunk/path"):
        assert entity in ents, entity
    with BagReader(out / "recording", cameras=False) as reader:  # what the run recorded
        recorded = {stamp_to_ns(m.header.stamp): cloud_points(m)[0] for _, m in reader.messages("/para/voxels")}
    clouds = ents["/world/voxels"]
    assert clouds and len(clouds) == len(recorded)
    for row in clouds:
        assert np.allclose(np.asarray(row["Points3D:positions"]), recorded[_stamp_ns(row["stamp"])], atol=1e-6)
