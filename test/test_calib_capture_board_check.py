"""``para-calib capture`` checks every sample for the board (the detector ``para-calib solve`` uses) and says when it
is out of view, instead of recording poses the solve cannot use without a word."""

from __future__ import annotations

import cv2
import numpy as np

from para_core.calibration.board import CharucoBoardSpec
from para_ros.deploy.calibration_capture import BoardTally, CaptureSettings

BOARD = CharucoBoardSpec()


def board_in_view_rgb() -> np.ndarray:
    grey = BOARD.image(px_per_m=4000.0, margin_px=40)  # (H, W) the printed board, white margin
    return cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB)


def test_samples_without_the_board_are_warned_and_counted():
    tally = BoardTally("scene_cam", BOARD)
    assert tally.add(1, board_in_view_rgb()) is None
    empty = np.full((240, 320, 3), 128, np.uint8)  # the table, no board
    warning = tally.add(2, empty)
    assert "sample 2: fewer than 6 board corners in the scene_cam image" in warning and "1 sample(s)" in warning
    assert "sample 3: no image" in tally.add(3, None)
    summary = tally.summary()
    assert summary.startswith("1 of 3 samples show the board") and "samples [2, 3]" in summary
    assert "none can be solved" not in summary


def test_a_capture_that_never_saw_the_board_says_none_can_be_solved():
    tally = BoardTally("wrist_cam", BOARD)
    for k in range(1, 4):
        assert tally.add(k, np.zeros((240, 320, 3), np.uint8))
    assert "0 of 3 samples" in tally.summary() and "none can be solved" in tally.summary()


def test_capture_checks_for_the_board_it_is_given():
    small = CharucoBoardSpec(squares_x=4, squares_y=4, square_m=0.04, marker_m=0.03, dictionary="DICT_4X4_50")
    tally = BoardTally("scene_cam", small)
    assert tally.add(1, board_in_view_rgb()) is not None  # the default board is not this one
    assert CaptureSettings(out="x").board == CharucoBoardSpec()


def test_the_capture_command_takes_the_board_options():
    from para_ros.commands import calib

    args = calib.build_parser().parse_args(
        ["capture", "--out", "bag", "--squares-x", "4", "--squares-y", "6", "--dictionary", "DICT_4X4_50"]
    )
    board = calib._capture_settings(args).board
    assert (board.squares_x, board.squares_y, board.dictionary) == (4, 6, "DICT_4X4_50")


def test_too_few_poses_names_options_that_exist():
    import re
    from types import SimpleNamespace

    import pytest

    from para_ros.commands import calib
    from para_ros.deploy.calibration_capture import CaptureAborted, require_enough_poses

    with pytest.raises(CaptureAborted) as refused:
        require_enough_poses(SimpleNamespace(poses=[1, 2]))
    named = re.findall(r"--[a-z][a-z-]*", str(refused.value))
    assert named == ["--centre", "--angle-deg", "--offset-m"]
    parser = calib.build_parser()
    for option in named:  # each one the capture command takes (argparse would refuse an unknown one)
        parser.parse_args(["capture", "--out", "bag", option, "sim" if option == "--centre" else "10"])
