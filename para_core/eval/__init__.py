"""Offline evaluation: chunk ``metrics`` against a recording, PNG ``figures``, the paper's ``method_figure``, the
camera ``calibration`` check, and the NumPy ``projection`` every overlay draws with.
"""
