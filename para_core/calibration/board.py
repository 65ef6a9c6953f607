"""The ChArUco calibration board: its geometry, its image at any scale, and printable PNG / PDF files at true scale.

Board frame (OpenCV's ``cv2.aruco.CharucoBoard`` convention, which :meth:`CharucoBoardSpec.image` follows): origin at
the board's outer corner that is the TOP-LEFT of the board image, x along the image's columns (to the right), y along
its rows (downwards), z = x cross y, INTO the board (away from someone looking at the printed face). The board spans
[0, width_m] x [0, height_m] in (x, y); a camera that sees the printed face head-on has ``T_cam_board`` with a
rotation near identity. ChArUco corner id ``i`` is the inner chessboard corner at ``corners_board_m()[i]``: row-major
from the top-left, ``((c + 1) * square_m, (r + 1) * square_m, 0)`` for ``c < squares_x - 1``, ``r < squares_y - 1``.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from para_core.calibration.errors import CalibrationError

METRES_PER_INCH = 0.0254
POINTS_PER_INCH = 72.0
# Page sizes (width, height) in metres for write_pdf; "fit" makes the page the board plus its margins.
PAGE_SIZES_M = {"A4": (0.210, 0.297), "letter": (8.5 * METRES_PER_INCH, 11.0 * METRES_PER_INCH)}
# Marker border width in marker cells (OpenCV's default, and what the detector expects).
MARKER_BORDER_BITS = 1


def _fail(field_name: str, value: Any, fix: str) -> None:
    raise CalibrationError(f"CharucoBoardSpec.{field_name} = {value!r} is invalid: {fix}")


def _aruco_dictionary_names() -> list[str]:
    return sorted(name for name in dir(cv2.aruco) if name.startswith("DICT_"))


@dataclass(frozen=True)
class CharucoBoardSpec:
    """A ChArUco board: a chessboard of ``squares_x`` x ``squares_y`` squares with ArUco markers in its white squares.

    Args:
        squares_x: squares along the board's x axis (image columns), at least 3.
        squares_y: squares along the board's y axis (image rows), at least 3.
        square_m: side of one chessboard square in metres (measure the PRINTED board and give that).
        marker_m: side of one ArUco marker in metres, smaller than ``square_m``.
        dictionary: OpenCV ArUco dictionary name, e.g. ``"DICT_5X5_100"``; it must hold enough markers for the board.
    """

    squares_x: int = 5
    squares_y: int = 7
    square_m: float = 0.03
    marker_m: float = 0.022
    dictionary: str = "DICT_5X5_100"

    def __post_init__(self) -> None:
        for name in ("squares_x", "squares_y"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 3:
                _fail(name, value, "give an integer of at least 3 (a ChArUco board needs inner corners in both axes)")
        for name in ("square_m", "marker_m"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float, np.floating))
                or not math.isfinite(value)
                or value <= 0.0
            ):
                _fail(name, value, "give a positive length in metres (e.g. 0.03 for 30 mm)")
        if self.marker_m >= self.square_m:
            _fail("marker_m", self.marker_m, f"the marker must be smaller than the square ({self.square_m} m)")
        names = _aruco_dictionary_names()
        if self.dictionary not in names:
            _fail("dictionary", self.dictionary, f"use one of OpenCV's ArUco dictionaries: {', '.join(names)}")
        needed = (self.squares_x * self.squares_y) // 2
        available = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).bytesList.shape[0]
        if needed > available:
            _fail(
                "dictionary",
                self.dictionary,
                f"a {self.squares_x}x{self.squares_y} board needs {needed} markers "
                f"and this dictionary has {available}; pick a larger one (e.g. DICT_5X5_250)",
            )

    # ---- geometry ----
    def cv_board(self) -> cv2.aruco.CharucoBoard:
        """The OpenCV board object (metres), for detection and drawing."""
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard(
            (int(self.squares_x), int(self.squares_y)), float(self.square_m), float(self.marker_m), dictionary
        )

    @property
    def size_m(self) -> tuple[float, float]:
        """(width_m, height_m) of the board: along its x axis, along its y axis."""
        return self.squares_x * self.square_m, self.squares_y * self.square_m

    @property
    def n_corners(self) -> int:
        """Number of ChArUco (inner chessboard) corners."""
        return (self.squares_x - 1) * (self.squares_y - 1)

    def corners_board_m(self) -> np.ndarray:
        """(N, 3) float64 ChArUco corner positions in the board frame (metres); row i is corner id i."""
        c, r = np.meshgrid(np.arange(1, self.squares_x), np.arange(1, self.squares_y))  # (Y-1, X-1) each
        xy = np.stack([c.ravel(), r.ravel()], axis=1).astype(np.float64) * self.square_m  # (N, 2)
        return np.concatenate([xy, np.zeros((xy.shape[0], 1))], axis=1)  # (N, 3)

    # ---- images ----
    def image_size_px(self, px_per_m: float, margin_px: int = 0) -> tuple[int, int]:
        """(width_px, height_px) of :meth:`image` at that scale."""
        width_m, height_m = self.size_m
        return (int(round(width_m * px_per_m)) + 2 * margin_px, int(round(height_m * px_per_m)) + 2 * margin_px)

    def image(self, px_per_m: float, margin_px: int = 0) -> np.ndarray:
        """(H, W) uint8 image of the board (black 0, white 255) at ``px_per_m`` pixels per metre, with a white margin.

        Where the board lands: board-frame point (x, y, 0) lies at image position
        ``(margin_px + x * px_per_m, margin_px + y * px_per_m)`` measured from the image's top-left EDGE (pixel
        column j covers [j, j + 1)); in OpenCV's pixel-centre coordinates (pixel (0, 0)'s centre is (0, 0)) that is
        ``margin_px + x * px_per_m - 0.5``. Exact when ``square_m * px_per_m`` is an integer; otherwise each square
        edge is rounded to the nearest pixel edge (at most 0.5 px off). To texture a simulated box, map the image's
        edge coordinates linearly onto the board rectangle [0, width_m] x [0, height_m] as above.
        """
        if not math.isfinite(px_per_m) or px_per_m <= 0.0:
            raise CalibrationError(f"px_per_m = {px_per_m!r} is invalid: give a positive number of pixels per metre")
        if isinstance(margin_px, bool) or not isinstance(margin_px, (int, np.integer)) or margin_px < 0:
            raise CalibrationError(f"margin_px = {margin_px!r} is invalid: give a non-negative integer")
        width_px, height_px = self.image_size_px(px_per_m, 0)
        min_px = 4 * (cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).markerSize + 2)
        if min(width_px / self.squares_x, height_px / self.squares_y) < min_px:
            raise CalibrationError(
                f"px_per_m = {px_per_m} gives {width_px / self.squares_x:.1f} px per square; give "
                f"at least {min_px / self.square_m:.0f} px per metre so the markers are drawable"
            )
        board_img = self.cv_board().generateImage((width_px, height_px), marginSize=0, borderBits=MARKER_BORDER_BITS)
        if margin_px:
            board_img = cv2.copyMakeBorder(
                board_img, margin_px, margin_px, margin_px, margin_px, cv2.BORDER_CONSTANT, value=255
            )
        return board_img  # (H, W) uint8

    def write_png(self, path: str | Path, dpi: float = 300.0, margin_m: float = 0.01) -> Path:
        """Write the board as a greyscale PNG at ``dpi`` dots per inch with a white ``margin_m`` border; the PNG's
        pHYs chunk records the resolution so that printing at 100 % gives the board its true size
        (``square_m`` per square, to within half a dot)."""
        if not math.isfinite(dpi) or dpi <= 0:
            raise CalibrationError(f"dpi = {dpi!r} is invalid: give a positive print resolution (e.g. 300)")
        px_per_m = dpi / METRES_PER_INCH
        img = self.image(px_per_m, margin_px=int(round(margin_m * px_per_m)))  # (H, W)
        ok, encoded = cv2.imencode(".png", img)
        if not ok:
            raise CalibrationError(f"OpenCV could not encode the board image of shape {img.shape} as PNG")
        data = _png_with_phys(encoded.tobytes(), int(round(px_per_m)))
        path = Path(path)
        path.write_bytes(data)
        return path

    def write_pdf(self, path: str | Path, page: str = "A4", margin_m: float = 0.01, dpi: float = 600.0) -> Path:
        """Write a one-page PDF with the board at true scale (``square_m`` per square), centred on the page, and a
        caption naming the board and saying to print at 100 %. ``page`` is ``"A4"``, ``"letter"`` or ``"fit"`` (the
        board plus ``margin_m`` on each side and room for the caption); ``dpi`` is the resolution of the embedded
        raster (the placement on the page is exact whatever it is: the image is scaled to the board's size)."""
        width_m, height_m = self.size_m
        caption_m = 0.012
        if page == "fit":
            page_w_m, page_h_m = width_m + 2 * margin_m, height_m + 2 * margin_m + caption_m
        elif page in PAGE_SIZES_M:
            page_w_m, page_h_m = PAGE_SIZES_M[page]
        else:
            raise CalibrationError(f"page = {page!r} is invalid: use one of {[*PAGE_SIZES_M, 'fit']}")
        if width_m + 2 * margin_m > page_w_m + 1e-9 or height_m + 2 * margin_m + caption_m > page_h_m + 1e-9:
            raise CalibrationError(
                f"the {width_m * 1000:.0f} x {height_m * 1000:.0f} mm board does not fit a {page} "
                f"page with {margin_m * 1000:.0f} mm margins; use page='fit' (and a printer that "
                "takes that size) or a smaller square_m"
            )
        # Raster with an integer number of pixels per square, so its grid is exact; the PDF scales it to true size.
        square_px = max(int(math.ceil(self.square_m * dpi / METRES_PER_INCH)), 40)
        img = self.image(square_px / self.square_m)  # (H, W) uint8, board only
        pt_per_m = POINTS_PER_INCH / METRES_PER_INCH
        board_w_pt, board_h_pt = width_m * pt_per_m, height_m * pt_per_m
        page_w_pt, page_h_pt = page_w_m * pt_per_m, page_h_m * pt_per_m
        x0_pt = (page_w_pt - board_w_pt) / 2.0
        y0_pt = max((page_h_pt - board_h_pt) / 2.0, (margin_m + caption_m) * pt_per_m)  # PDF y is up from the bottom
        caption = (
            f"ChArUco {self.squares_x} x {self.squares_y}, square {self.square_m * 1000:.2f} mm, marker "
            f"{self.marker_m * 1000:.2f} mm, {self.dictionary}. Print at 100 % (no fit to page); "
            "measure a square and give that size to the solver."
        )
        data = _one_image_pdf(
            img,
            page_w_pt,
            page_h_pt,
            x0_pt,
            y0_pt,
            board_w_pt,
            board_h_pt,
            caption,
            caption_y_pt=y0_pt - 0.008 * pt_per_m,
        )
        path = Path(path)
        path.write_bytes(data)
        return path

    # ---- serialisation ----
    def to_dict(self) -> dict[str, Any]:
        """Plain dict (the ``board`` entry of calibration.yaml)."""
        return {
            "squares_x": int(self.squares_x),
            "squares_y": int(self.squares_y),
            "square_m": float(self.square_m),
            "marker_m": float(self.marker_m),
            "dictionary": str(self.dictionary),
        }

    @classmethod
    def from_dict(cls, data: Any) -> CharucoBoardSpec:
        """The spec of a dict from :meth:`to_dict`; CalibrationError naming a missing or unknown key."""
        if not isinstance(data, dict):
            raise CalibrationError(
                f"board must be a mapping with keys {[f.name for f in dataclasses.fields(cls)]}, "
                f"got {type(data).__name__}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        missing = [name for name in names if name not in data]
        if unknown:
            raise CalibrationError(f"board has unknown keys {unknown}: the keys are {names}")
        if missing:
            raise CalibrationError(f"board lacks the keys {missing}: give all of {names}")
        return cls(**{name: data[name] for name in names})


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)


def _png_with_phys(png: bytes, px_per_m: int) -> bytes:
    """The PNG ``png`` with a pHYs chunk (pixels per metre, unit 1 = metre) inserted right after IHDR."""
    ihdr_end = 8 + 8 + 13 + 4  # signature, IHDR length + type, IHDR data, CRC
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise CalibrationError("the encoded board image is not a PNG (OpenCV's encoder returned something else)")
    phys = _png_chunk(b"pHYs", struct.pack(">IIB", px_per_m, px_per_m, 1))
    return png[:ihdr_end] + phys + png[ihdr_end:]


def _one_image_pdf(
    img: np.ndarray,
    page_w_pt: float,
    page_h_pt: float,
    x_pt: float,
    y_pt: float,
    w_pt: float,
    h_pt: float,
    caption: str,
    caption_y_pt: float,
) -> bytes:
    """A minimal PDF 1.4: one page of ``page_w_pt`` x ``page_h_pt`` points with the greyscale image ``img`` (H, W)
    placed at (x_pt, y_pt) (bottom-left, PDF y up) with size (w_pt, h_pt), and one line of Helvetica caption."""
    height_px, width_px = img.shape
    text = caption.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    font_pt = 7.0
    content = (
        f"q {w_pt:.4f} 0 0 {h_pt:.4f} {x_pt:.4f} {y_pt:.4f} cm /Im0 Do Q\n"
        f"BT /F1 {font_pt:.1f} Tf {x_pt:.4f} {caption_y_pt:.4f} Td ({text}) Tj ET\n"
    ).encode("latin-1")
    image_data = zlib.compress(np.ascontiguousarray(img, dtype=np.uint8).tobytes(), 6)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {page_w_pt:.4f} {page_h_pt:.4f}] "
            f"/Resources << /XObject << /Im0 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>"
        ).encode(),
        f"<< /Length {len(content)} >>\nstream\n".encode() + content + b"endstream",
        (
            f"<< /Type /XObject /Subtype /Image /Width {width_px} /Height {height_px} /ColorSpace /DeviceGray "
            f"/BitsPerComponent 8 /Interpolate false /Filter /FlateDecode /Length {len(image_data)} >>\nstream\n"
        ).encode()
        + image_data
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n".encode()
    return bytes(out)
