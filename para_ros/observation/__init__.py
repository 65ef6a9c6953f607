"""ROS-free observation assembly: pairing images and states by stamp, camera models (ROS <-> PARA pixel
conventions), end-effector state from joints, and the one observation builder the node and the bag tools share.
"""
