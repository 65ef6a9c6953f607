"""Offline evaluation: chunk ``metrics`` against a recording, PNG ``figures``, the paper's ``method_figure`` and the
camera ``calibration`` check.
"""
