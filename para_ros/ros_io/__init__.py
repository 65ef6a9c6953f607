"""ROS messages in and out: ActionChunk <-> messages, rviz markers/clouds, topic command backends, SDK state
publishing, the synthetic camera rig and the sim's task services client.
"""
