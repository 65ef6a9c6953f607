"""Packed episodes (para_core.data.episode_archive): everything but the images comes back exactly, the images are the
dataset's own resize of the originals within the video's small error, and a broken video is refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("av")

from para_core.data.dataset import Episode  # noqa: E402
from para_core.data.episode_archive import main, pack_episode, unpack_episode  # noqa: E402
from para_core.model.policy import resize_to_model_input  # noqa: E402


def _episode(n=12, size=96):
    """Smooth synthetic views (gradients and a moving square), like rendered scenes."""
    yy, xx = np.mgrid[0:size, 0:size]
    images = {}
    for k, view in enumerate(("scene", "wrist")):
        frames = []
        for t in range(n):
            img = np.stack([(xx * 2 + t) % 256, (yy * 2 + 40 * k) % 256, np.full_like(xx, 120)], -1)
            x0 = 10 + 3 * t
            img[20:40, x0 : x0 + 20] = (200, 30, 30)
            frames.append(img.astype(np.uint8))
        images[view] = np.asarray(frames)
    K = np.array([[80.0, 0, 48.0], [0, 80.0, 48.0], [0, 0, 1]])
    T = np.tile(np.eye(4), (n, 1, 1))
    T[:, 0, 3] = np.linspace(0.2, 0.3, n)
    return Episode(
        view_names=("scene", "wrist"),
        stamps_ns=np.arange(n, dtype=np.int64) * 100_000_000 + 7,
        images=images,
        K={v: np.tile(K, (n, 1, 1)) for v in images},
        T_world_cam={v: T.copy() for v in images},
        T_world_ee=T.copy(),
        gripper=np.linspace(1.0, 0.0, n),
        fps=10.0,
        meta={"task": "pick_place", "layout": {"seed": 3}},
    )


def test_round_trip(tmp_path):
    ep = _episode()
    ep.save(tmp_path / "src" / "episode_000003")
    assert main(["pack", str(tmp_path / "src"), str(tmp_path / "packed"), "--size", "64"]) == 0
    assert main(["unpack", str(tmp_path / "packed"), str(tmp_path / "out")]) == 0
    back = Episode.load(tmp_path / "out" / "episode_000003")
    np.testing.assert_array_equal(back.stamps_ns, ep.stamps_ns)
    np.testing.assert_array_equal(back.T_world_ee, ep.T_world_ee)
    np.testing.assert_array_equal(back.gripper, ep.gripper)
    assert back.meta["layout"] == {"seed": 3} and back.meta["packed"] == {"size": 64, "crf": 12}
    for v in ep.view_names:
        np.testing.assert_array_equal(back.T_world_cam[v], ep.T_world_cam[v])
        # K rescaled by hand: 96 -> 64 px is a factor 2/3 on fx, cx, fy, cy (pixel-centre convention)
        np.testing.assert_allclose(back.K[v][0], [[80 * 2 / 3, 0, 32.0], [0, 80 * 2 / 3, 32.0], [0, 0, 1]])
        ref = np.asarray([resize_to_model_input(im, k, 64)[0] for im, k in zip(ep.images[v], ep.K[v])])
        err = np.abs(back.images[v].astype(int) - ref.astype(int))
        assert back.images[v].shape == (12, 64, 64, 3)
        assert err.mean() < 2.0, err.mean()
    # A second run finds the episodes done and leaves them.
    assert main(["unpack", str(tmp_path / "packed"), str(tmp_path / "out")]) == 0


def test_a_video_cut_short_is_refused(tmp_path):
    _episode().save(tmp_path / "src")
    pack_episode(tmp_path / "src", tmp_path / "packed", 64)
    short = _episode(n=5)
    short.save(tmp_path / "short_src")
    pack_episode(tmp_path / "short_src", tmp_path / "short", 64)
    (tmp_path / "packed" / "wrist.mp4").write_bytes((tmp_path / "short" / "wrist.mp4").read_bytes())
    with pytest.raises(ValueError, match="5 frames decoded for 12 stamps"):
        unpack_episode(tmp_path / "packed", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_options(tmp_path, capsys):
    assert main(["pack", str(tmp_path), str(tmp_path / "x")]) == 2
    assert "no episodes" in capsys.readouterr().err
    with pytest.raises(ValueError, match="even"):
        pack_episode(tmp_path, tmp_path / "y", 63)
