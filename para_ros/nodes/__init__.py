"""The three ROS 2 nodes (``inference_node``, ``chunk_executor``, ``sim_node``), their shared ``runtime`` (``run_node``,
clock-jump text) and ``health`` (one diagnostics helper). Only nodes, ``ros_io``, ``adapters``, ``bag`` and ``deploy``
import rclpy or message packages.
"""
