"""Recordings: ``reader`` (rosbag2 -> episodes/observations), ``recording`` (writing bags), ``play`` (``para-bag play``),
``sim_recorder`` (``para-sim record``) and ``cli`` (the ``para-bag`` command).
"""
