"""ROS messages in and out: ActionChunk <-> messages, rviz markers/clouds, topic command backends, SDK state
publishing, the synthetic camera rig, the sim's task services client and ``spin_until`` (spin until a condition or
a deadline).
"""
