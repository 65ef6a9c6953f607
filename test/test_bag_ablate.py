"""``para-bag ablate``: several checkpoints on the same recording, one table; the v2 preset of the paper's table."""

import csv
import json

import pytest
from bag_fixtures import SyntheticBagSpec, write_synthetic_bag

from para_core.model.checkpoint import save_checkpoint
from para_core.model.config import V4Config
from para_core.model.registry import build_model
from para_ros.commands import bag as bag_tools


def test_ablation_table_matches_each_checkpoints_own_eval(tmp_path):
    import torch

    bag = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=1.5, wrist_compressed=False))
    ckpts = []
    for name, seed in (("tiny_a", 0), ("tiny_b", 1)):
        torch.manual_seed(seed)
        cfg = V4Config.tiny()
        ckpts.append(save_checkpoint(tmp_path / name, build_model(cfg), cfg, model_id=f"para_v4:{name}"))
    assert bag_tools.main(["ablate", str(bag), "--checkpoints", *map(str, ckpts), "--out", str(tmp_path / "ab")]) == 0
    rows = list(csv.reader(open(tmp_path / "ab" / "ablation.csv")))
    assert rows[0][:3] == ["checkpoint", "model", "chunks"] and [r[0] for r in rows[1:]] == ["tiny_a", "tiny_b"]
    for ckpt, row in zip(ckpts, rows[1:]):  # each row = that checkpoint's own para-bag eval
        out = tmp_path / f"own_{ckpt.name}"
        assert (
            bag_tools.main(
                [
                    "eval",
                    str(bag),
                    "--checkpoint",
                    str(ckpt),
                    "--out",
                    str(out),
                    "--quiet",
                    "--overlay-every",
                    "0",
                    "--response-volume-every",
                    "-1",
                ]
            )
            == 0
        )
        m = json.loads((out / "metrics.json").read_text())
        assert float(row[3]) == pytest.approx(m["position_error_m"]["all"]["mean"] * 100, abs=0.006)
        assert float(row[8]) == pytest.approx(m["gripper_accuracy"]["all"] * 100, abs=0.006)
        assert row[2] == str(m["chunks_evaluated"])
    assert rows[1][3] != rows[2][3]  # two different models, two different numbers
    md = (tmp_path / "ab" / "ablation.md").read_text()
    assert md.count("\n") == 4 and "| tiny_a |" in md


def test_v2_preset_is_the_seed_parity_column():
    v2 = V4Config.preset("paper_v2")
    assert (v2.height_encoding, v2.z_range_mode, v2.n_height_bins, v2.pred_size) == ("learned", "fixed", 32, 128)
    assert v2.n_voxels == 2 * 32 * 128 * 128
    v4 = V4Config.paper()
    same = {
        k
        for k in v4.to_flat_dict()
        if k not in ("name", "height_encoding", "z_range_mode", "n_height_bins", "pred_size")
    }
    assert all(v2.to_flat_dict()[k] == v4.to_flat_dict()[k] for k in same)
