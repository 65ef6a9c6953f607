"""Running the graph: ``graph`` (which nodes with which parameters), ``launcher`` (``para-deploy``), its ``monitor``,
``summary`` and ``snapshot``, and ``closed_loop`` (``para-sim eval`` through the real nodes).
"""
