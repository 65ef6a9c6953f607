"""Running the graph: ``graph`` (which nodes with which parameters), ``graph_run`` (``GraphRun``: start, watch,
respawn and stop the node processes, how each ended), ``monitor``, ``summary`` and ``snapshot`` (what a run saw),
``episodes`` (one pick-and-place episode through the running graph), ``closed_loop`` (the evaluation behind
``para-sim eval``), ``sim_recorder`` (expert bags behind ``para-sim record``) and ``calibration_capture`` (the arm
through calibration poses, recorded, behind ``para-calib capture``). The commands live in ``para_ros.commands``.
"""
