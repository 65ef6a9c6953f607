"""The ChArUco board generator: geometry against hand-computed numbers and OpenCV's own board, the image's stated
board-frame convention against cornerSubPix, the PNG's pixel pitch (read back by Pillow) and the PDF's page and
image placement (parsed from the file)."""

from __future__ import annotations

import re
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError

SPEC = CharucoBoardSpec(squares_x=5, squares_y=7, square_m=0.03, marker_m=0.022, dictionary="DICT_5X5_100")
PT_PER_M = 72.0 / 0.0254


def test_corner_coordinates_are_multiples_of_the_square_in_row_major_order():
    corners = SPEC.corners_board_m()
    assert corners.shape == (24, 3)
    # Hand-computed: id 0 at (1, 1) squares, id 3 at (4, 1), id 4 at (1, 2), the last at (4, 6).
    np.testing.assert_allclose(corners[0], [0.03, 0.03, 0.0])
    np.testing.assert_allclose(corners[3], [0.12, 0.03, 0.0])
    np.testing.assert_allclose(corners[4], [0.03, 0.06, 0.0])
    np.testing.assert_allclose(corners[23], [0.12, 0.18, 0.0])
    # OpenCV's board object (what the detector's ids refer to) agrees.
    np.testing.assert_allclose(corners, SPEC.cv_board().getChessboardCorners(), atol=1e-7)
    assert SPEC.size_m == pytest.approx((0.15, 0.21))


@pytest.mark.parametrize("px_per_m,margin_px", [(2000.0, 0), (1000.0, 7)])
def test_image_puts_board_points_where_the_docstring_says(px_per_m, margin_px):
    img = SPEC.image(px_per_m, margin_px=margin_px)
    assert img.shape == (int(round(0.21 * px_per_m)) + 2 * margin_px, int(round(0.15 * px_per_m)) + 2 * margin_px)
    assert img.dtype == np.uint8
    # Colour of each square's centre: the top-left square is black, then a chessboard; the white ones hold markers.
    for r in range(SPEC.squares_y):
        for c in range(SPEC.squares_x):
            u = margin_px + (c + 0.5) * SPEC.square_m * px_per_m - 0.5
            v = margin_px + (r + 0.5) * SPEC.square_m * px_per_m - 0.5
            square = img[int(v) - 3 : int(v) + 4, int(u) - 3 : int(u) + 4]
            if (r + c) % 2 == 0:
                assert square.max() == 0, (r, c)
    # Corner positions found by cornerSubPix (independent of the generator) land at margin + x * px_per_m - 0.5.
    blurred = cv2.GaussianBlur(img, (0, 0), 1.5)
    truth = margin_px + SPEC.corners_board_m()[:, :2] * px_per_m - 0.5  # (N, 2)
    start = (truth + 1.3).astype(np.float32).reshape(-1, 1, 2)
    found = cv2.cornerSubPix(blurred, start, (5, 5), (-1, -1), (3, 100, 1e-4)).reshape(-1, 2)
    np.testing.assert_allclose(found, truth, atol=0.05)
    if margin_px:
        assert img[:margin_px].min() == 255 and img[:, -margin_px:].min() == 255


def test_png_has_true_scale_pixel_pitch(tmp_path):
    dpi, margin_m = 200.0, 0.01
    path = SPEC.write_png(tmp_path / "board.png", dpi=dpi, margin_m=margin_m)
    with Image.open(path) as png:
        width_px, height_px = png.size
        dpi_x, dpi_y = png.info["dpi"]
        pixels = np.asarray(png)
    assert dpi_x == pytest.approx(dpi, abs=0.01) and dpi_y == pytest.approx(dpi, abs=0.01)
    margin_px = round(margin_m * dpi / 0.0254)
    # Printed at its own DPI, the board part measures 150 x 210 mm to within one dot.
    board_w_m = (width_px - 2 * margin_px) / dpi_x * 0.0254
    board_h_m = (height_px - 2 * margin_px) / dpi_y * 0.0254
    assert abs(board_w_m - 0.15) <= 0.0254 / dpi and abs(board_h_m - 0.21) <= 0.0254 / dpi
    # One square is square_m * dpi / 25.4 mm pixels: the first black square ends where the second begins.
    row = pixels[margin_px + 5, :]
    first_white = margin_px + int(np.argmax(row[margin_px:] > 128))
    assert abs((first_white - margin_px) - 0.03 * dpi / 0.0254) <= 1.0


def _pdf_parts(data: bytes):
    media = [float(v) for v in re.search(rb"/MediaBox \[([^\]]+)\]", data).group(1).split()]
    cm = [float(v) for v in re.search(rb"q ([-\d. ]+) cm /Im0 Do Q", data).group(1).split()]
    width = int(re.search(rb"/Width (\d+)", data).group(1))
    height = int(re.search(rb"/Height (\d+)", data).group(1))
    length = int(re.search(rb"/Subtype /Image[^>]*/Length (\d+)", data).group(1))
    start = data.index(b"stream\n", data.index(b"/Subtype /Image")) + len(b"stream\n")
    pixels = np.frombuffer(zlib.decompress(data[start : start + length]), dtype=np.uint8).reshape(height, width)
    return media, cm, pixels


def test_pdf_page_and_board_placement_are_true_scale(tmp_path):
    data = SPEC.write_pdf(tmp_path / "board.pdf", page="A4", dpi=150.0).read_bytes()
    assert data.startswith(b"%PDF-1.4") and data.rstrip().endswith(b"%%EOF")
    media, cm, pixels = _pdf_parts(data)
    assert media[:2] == [0.0, 0.0]
    assert media[2] == pytest.approx(0.210 * PT_PER_M, abs=1e-3)
    assert media[3] == pytest.approx(0.297 * PT_PER_M, abs=1e-3)
    scale_x, skew_a, skew_b, scale_y, x0, y0 = cm
    assert skew_a == 0.0 and skew_b == 0.0
    # The image is drawn 150 x 210 mm, centred horizontally, fully on the page.
    assert scale_x == pytest.approx(0.15 * PT_PER_M, abs=1e-3) and scale_y == pytest.approx(0.21 * PT_PER_M, abs=1e-3)
    assert x0 == pytest.approx((media[2] - scale_x) / 2.0, abs=1e-3)
    assert 0.0 < y0 and y0 + scale_y < media[3]
    # The embedded raster is the board: an integer number of pixels per square, and OpenCV finds all 24 corners.
    assert pixels.shape[1] % SPEC.squares_x == 0 and pixels.shape[0] // SPEC.squares_y == pixels.shape[1] // 5
    padded = cv2.copyMakeBorder(pixels, 20, 20, 20, 20, cv2.BORDER_CONSTANT, value=255)
    _, ids, _, _ = cv2.aruco.CharucoDetector(SPEC.cv_board()).detectBoard(padded)
    assert ids is not None and sorted(ids.ravel().tolist()) == list(range(24))
    assert b"Print at 100 %" in data


def test_pdf_fit_page_and_refusal_of_a_board_larger_than_the_page(tmp_path):
    big = CharucoBoardSpec(squares_x=8, squares_y=11, square_m=0.04, marker_m=0.03, dictionary="DICT_5X5_100")
    with pytest.raises(CalibrationError, match="does not fit a A4 page"):
        big.write_pdf(tmp_path / "big.pdf", page="A4", dpi=50.0)
    assert not (tmp_path / "big.pdf").exists()
    media, cm, _ = _pdf_parts(big.write_pdf(tmp_path / "big.pdf", page="fit", dpi=50.0).read_bytes())
    assert cm[0] == pytest.approx(0.32 * PT_PER_M, abs=1e-3) and cm[3] == pytest.approx(0.44 * PT_PER_M, abs=1e-3)
    assert media[2] == pytest.approx((0.32 + 0.02) * PT_PER_M, abs=1e-3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"marker_m": 0.03}, "marker_m"),
        ({"square_m": 0.0}, "square_m"),
        ({"squares_x": 2}, "squares_x"),
        ({"dictionary": "DICT_NOPE"}, "dictionary"),
        ({"squares_x": 20, "squares_y": 20, "dictionary": "DICT_4X4_50"}, "needs 200 markers"),
    ],
)
def test_invalid_specs_are_refused_with_the_field_named(kwargs, match):
    with pytest.raises(CalibrationError, match=match):
        CharucoBoardSpec(**{**SPEC.to_dict(), **kwargs})


def test_dict_round_trip_and_strict_keys():
    assert CharucoBoardSpec.from_dict(SPEC.to_dict()) == SPEC
    with pytest.raises(CalibrationError, match="unknown keys \\['colour'\\]"):
        CharucoBoardSpec.from_dict({**SPEC.to_dict(), "colour": "red"})
    with pytest.raises(CalibrationError, match="lacks the keys \\['marker_m'\\]"):
        CharucoBoardSpec.from_dict({k: v for k, v in SPEC.to_dict().items() if k != "marker_m"})
