"""The command-line front doors, on the top floor: ``deploy`` (``para-deploy``), ``sim`` (``para-sim``: demos, expert,
record, eval, sweep), ``bag`` (``para-bag``) and ``calib`` (``para-calib``). Each parses its arguments and drives the
layers below (``deploy``'s ``GraphRun`` and evaluation, ``bag``, ``sim``, ``calibration``, ``para_core``); nothing below
imports them (``test_import_graph``). ``para-train``'s front door is ``para_core.train.cli`` (ROS-free).
"""
