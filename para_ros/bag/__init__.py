"""Recordings: ``reader`` (rosbag2 -> episodes/observations), ``recording`` (writing bags) and ``play`` (replaying
one, behind ``para-bag play``; the command itself is ``para_ros.commands.bag``).
"""
