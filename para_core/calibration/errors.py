"""The one error type of the calibration package."""

from __future__ import annotations


class CalibrationError(ValueError):
    """A calibration cannot be computed, loaded or saved; the message says what is missing and what to do."""
