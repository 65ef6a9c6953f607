"""The command-line front doors, on the top floor: ``deploy`` (``para-deploy``), ``sim`` (``para-sim``: demos, expert,
record, eval; sweep, suite, agreement, confidence-report and supervisor-table from ``sim_*``), ``bag`` (``para-bag``;
extract, view and the LeRobot commands from ``bag_*``), ``calib`` (``para-calib``) and ``ship_checkpoint``. Each parses
its arguments and drives the layers below with typed settings (``deploy``'s ``GraphRun`` and evaluation, ``bag``,
``sim``, ``calibration``, ``para_core``); nothing below imports them (``test_import_graph``). ``para-train``'s front
door is ``para_core.train.cli`` (ROS-free).

Importing this package puts ``OMP_WAIT_POLICY=PASSIVE`` into the environment unless it names a policy (the commands
import torch at their top, and OpenMP reads the variable when torch loads; ``para_core.model.hardware``), so
``para-bag``'s offline inference and every node process a command starts wait without spinning.
"""

from para_core.model.hardware import default_omp_wait_policy

default_omp_wait_policy()
