"""Demonstrations on disk (``dataset``: ``Episode``, ``EpisodeDataset``) and synthetic episodes (``synthetic``)."""
