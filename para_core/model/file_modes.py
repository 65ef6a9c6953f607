"""The permission bits a file the package writes should have: those of any file the user creates."""

from __future__ import annotations

import os


def normal_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less the process's umask (0644 under the usual 022).
    Writers that go through a temporary file (``tempfile.mkstemp``, safetensors' ``save_file``) make 0600 instead,
    which another user of a shared checkpoint or calibration could not read."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
