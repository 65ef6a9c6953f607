"""The YAM arm: its description and limits (``yam``), inverse kinematics (``yam_ik``) and TF frames (``yam_frames``)."""
