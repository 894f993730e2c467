"""File modes for atomically written outputs.

``tempfile.mkstemp`` creates files 0600 whatever the umask; a report renamed into place from such a file
would be unreadable to the group and others. :func:`file_mode` is the mode ``open(path, "w")`` would have
given (``0o666`` minus the process umask), to ``chmod`` the temporary file before the rename.
"""

from __future__ import annotations

import os
import threading

_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _LOCK:  # elsewhere: set and restore (brief, and serialised within this process)
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """``0o666 & ~umask``: the mode of a newly created regular file."""
    return 0o666 & ~current_umask()
