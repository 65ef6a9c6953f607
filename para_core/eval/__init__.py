"""Offline evaluation: chunk ``metrics`` against a recording, PNG ``figures``, the seed's ``method_figure`` and the
camera ``calibration`` check.
"""
