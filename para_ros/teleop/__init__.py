"""Teleoperated recording (``para-teleop``): ``leader_gate`` (when a leader may drive the follower; ROS-free),
``leaders`` (where the leader's joints come from: a ``JointState`` topic or the I2RT SDK's leader arm), ``episodes``
(the operator's commands, the output folder, each episode's metadata; ROS-free), ``bridge`` (the session's ROS node:
leader poses as action chunks for the chunk executor, the operator's topics), ``session`` (the graph, the recording
and the episode loop) and ``scripted_leader`` (the simulator's expert as the person at the leader). The command lives
in ``para_ros.commands.teleop``."""
