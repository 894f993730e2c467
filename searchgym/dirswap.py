"""Directory replacement that never leaves the final name empty, and cleanup of interrupted writes.

``swap_into_place(tmp, final)`` makes the finished directory ``tmp`` appear at ``final``. When ``final``
already exists the two are exchanged in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``), so a reader
always sees either the old or the new complete directory. Where the exchange is unavailable (another OS, a
filesystem without it) it falls back to two renames; the old copy is then parked under a ``.old-`` sibling
name for an instant, and :func:`restore_or_remove_old` (run by the next writer / cleanup) renames it back if
the process died in that window, instead of deleting the only complete copy.

Temporary directories are named ``<prefix>.tmp-<host>-<pid>-<random>`` so a later run can tell stale ones
(their process is dead) from those of a build still running.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = None
_exchange_ok = True
STALE_AGE_S = 7 * 24 * 3600  # a temp dir this old is stale whatever its pid says (pid reuse, another host)
_TMP_RE = re.compile(r"\.tmp-(?P<host>[^/]*)-(?P<pid>\d+)-[0-9a-f]+$")


def _renameat2():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        except OSError:
            _libc = False
    fn = getattr(_libc, "renameat2", None) if _libc else None
    if fn is not None:
        fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
        fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two existing paths; False when the platform or filesystem cannot."""
    global _exchange_ok
    fn = _renameat2() if _exchange_ok else None
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        _exchange_ok = err != errno.ENOSYS
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def tmp_name(final: Path, hidden: bool = True) -> Path:
    """A fresh temporary sibling name of ``final`` that records this host and pid."""
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"
    dot = "." if hidden else ""
    return final.with_name(f"{dot}{final.name}.tmp-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def old_name(final: Path, hidden: bool = True) -> Path:
    dot = "." if hidden else ""
    return final.with_name(f"{dot}{final.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


def swap_into_place(tmp: Path, final: Path, *, hidden: bool = True, _exchange: bool = True) -> None:
    """Move the complete directory ``tmp`` to ``final`` (replacing what is there) and delete the old copy."""
    if not os.path.lexists(final):
        os.rename(tmp, final)
        return
    if _exchange and exchange(tmp, final):
        _remove(tmp)  # tmp now holds the old copy
        return
    old = old_name(final, hidden)
    os.replace(final, old)
    os.replace(tmp, final)  # a kill between these two renames leaves ``old``; restore_or_remove_old puts it back
    _remove(old)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale_tmp(p: Path, now: float | None = None, *, own_is_stale: bool = False) -> bool:
    """A temp dir whose writer is gone: same host and a dead pid (or this process, with ``own_is_stale``),
    or older than STALE_AGE_S."""
    now = time.time() if now is None else now
    try:
        age = now - p.lstat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_AGE_S:
        return True
    m = _TMP_RE.search(p.name)
    if m is None:  # an older naming scheme without a pid: only by age (a day)
        return age > 24 * 3600
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"
    pid = int(m["pid"])
    return m["host"] == host and ((own_is_stale and pid == os.getpid())
                                  or (pid != os.getpid() and not _pid_alive(pid)))


def cleanup_siblings(final: Path, *, hidden: bool = True, is_complete=None, own_is_stale: bool = False
                     ) -> list[Path]:
    """Remove stale ``tmp`` siblings of ``final``; for ``.old-`` siblings, rename the newest complete one back
    to ``final`` when ``final`` is missing (a writer died between its two renames), else delete them."""
    parent = final.parent
    if not parent.is_dir():
        return []
    dot = "." if hidden else ""
    removed: list[Path] = []
    olds = []
    for p in parent.iterdir():
        if p.name.startswith(f"{dot}{final.name}.tmp-"):
            if is_stale_tmp(p, own_is_stale=own_is_stale):
                _remove(p)
                removed.append(p)
        elif p.name.startswith(f"{dot}{final.name}.old-"):
            olds.append(p)
    if not olds:
        return removed
    olds.sort(key=lambda p: p.lstat().st_mtime, reverse=True)
    if not os.path.lexists(final):
        for p in olds:
            m = re.search(r"\.old-(\d+)-[0-9a-f]+$", p.name)
            writer_alive = m is not None and int(m[1]) != os.getpid() and _pid_alive(int(m[1]))
            if not writer_alive and (is_complete is None or is_complete(p)):
                try:
                    os.rename(p, final)
                except OSError:
                    continue
                olds.remove(p)
                break
    if os.path.lexists(final):  # never delete an old copy while the final name is empty
        for p in olds:
            _remove(p)
            removed.append(p)
    return removed
