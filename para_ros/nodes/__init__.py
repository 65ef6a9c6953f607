"""The three ROS 2 nodes (``inference_node``, ``chunk_executor``, ``sim_node``), their shared ``runtime`` (``run_node``,
clock-jump text) and ``health`` (one diagnostics helper). Only nodes, ``ros_io``, ``adapters``, ``bag`` and ``deploy``
import rclpy or message packages.

Importing this package puts ``OMP_WAIT_POLICY=PASSIVE`` into the environment unless it names a policy or OpenMP is
loaded already: a node reads its parameters only after its module has imported torch, and OpenMP reads the variable
when torch loads (``para_core.model.hardware``: spinning threads slow everything on shared cores).
"""

from para_core.model.hardware import default_omp_wait_policy

default_omp_wait_policy()
