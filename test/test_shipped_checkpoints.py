"""Every checkpoint committed under checkpoints/ is a usable artefact: it loads from safetensors + JSON, can drive the
simulator, says how to reproduce it with a command that exists, names the weights it was fine-tuned from (which
exist, with the same architecture, and differ from it), and predicts a finite chunk inside its workspace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from para_core.model.checkpoint import load_checkpoint
from para_core.model.policy import Policy
from para_core.train.init_from import check_compatible
from para_ros.deploy.closed_loop import check_checkpoint_matches_sim

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for p in (REPO / "checkpoints").iterdir() if p.is_dir())


def test_the_shipped_set():
    names = {p.name for p in SHIPPED}
    assert {"pick_place", "pick_place_regression"} <= names, names


@pytest.mark.parametrize("ck", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_loads_reproduces_and_predicts(ck):
    assert not list(ck.glob("*.pt")) and not list(ck.glob("*.pth")) and not list(ck.glob("*.pkl")), "pickles"
    check_checkpoint_matches_sim(ck)
    model, cfg, _meta = load_checkpoint(ck)
    recipe = json.loads((ck / "recipe.json").read_text())
    command = recipe["reproduce"].split()[0]
    assert (REPO / command).is_file(), f"{ck.name}: recipe's command {command!r} is not in the repository"
    source = recipe.get("init_from") or ""
    if source:
        src_model, src_cfg, _ = load_checkpoint(REPO / source)
        check_compatible(src_cfg, cfg, str(REPO / source))  # the same architecture (schedule fields may differ)
        moved = [
            k for k, v in model.state_dict().items() if not torch.equal(v, src_model.state_dict()[k])
        ]  # fine-tuning changed the weights
        assert len(moved) > len(model.state_dict()) // 2, f"{ck.name}: {len(moved)} tensors differ from {source}"

    from shipped_predictions import fixed_observation

    policy = Policy(model, cfg, torch.device("cpu"))
    out = policy.predict(*fixed_observation(cfg.mv_past_n))
    xyz = out.positions_world  # (T, 3)
    assert xyz.shape == (cfg.n_window, 3) and np.isfinite(xyz).all()
    margin = 0.05
    assert np.all(xyz[:, 0] >= cfg.workspace_x_m[0] - margin) and np.all(xyz[:, 0] <= cfg.workspace_x_m[1] + margin)
    assert np.all(xyz[:, 1] >= cfg.workspace_y_m[0] - margin) and np.all(xyz[:, 1] <= cfg.workspace_y_m[1] + margin)


PREDICTIONS = json.loads((REPO / "test" / "fixtures" / "shipped_checkpoint_predictions.json").read_text())


def test_every_shipped_checkpoint_has_recorded_predictions():
    assert sorted(PREDICTIONS["checkpoints"]) == [p.name for p in SHIPPED], f"re-record with: {PREDICTIONS['made_by']}"


@pytest.mark.parametrize("ck", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_predicts_what_it_predicted_when_recorded(ck):
    """The chunk on a fixed observation equals the one recorded by the code of ``code_commit`` (the fixture's
    command): loading the shipped config.json (flat, as written then) changes nothing the model computes."""
    from shipped_predictions import predict

    expected = PREDICTIONS["checkpoints"][ck.name]
    got = predict(ck)
    for key, values in expected.items():
        np.testing.assert_allclose(got[key], values, atol=1e-5, rtol=0, err_msg=f"{ck.name}: {key}")


@pytest.mark.parametrize("ck", SHIPPED, ids=lambda p: p.name)
def test_shipped_flat_config_loads_every_field_and_is_written_back_grouped(ck, tmp_path):
    from para_core.model.checkpoint import save_checkpoint
    from para_core.model.config import CONFIG_GROUPS

    flat = json.loads((ck / "config.json").read_text())["config"]
    assert "backbone" not in flat  # the flat layout: one key per field
    model, cfg, _ = load_checkpoint(ck)
    assert cfg.to_flat_dict() == flat  # every field read as written, none dropped or defaulted
    path = save_checkpoint(tmp_path / ck.name, model, cfg)
    written = json.loads((path / "config.json").read_text())["config"]
    assert set(written) == {"model_kind", "name", *CONFIG_GROUPS}
    model2, cfg2, _ = load_checkpoint(path)
    assert cfg2 == cfg
    assert all(torch.equal(v, model2.state_dict()[k]) for k, v in model.state_dict().items())
