"""Output folders a command may write: absent, empty, or its own kind of output (replaced only with overwrite).

``check_out_dir(path, overwrite=..., is_own=..., what=...)`` refuses, with a one-line ConfigError, a file in the
way, a folder of other files (never touched, even with ``overwrite``) and, without ``overwrite``, a folder of
the command's own output. ``atomic_out_dir`` then writes the folder as ``index build`` does: into a temporary
sibling swapped into place (:mod:`searchgym.dirswap`), so a failed or killed run leaves what was there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from searchgym import dirswap
from searchgym.errors import ConfigError
from searchgym.fsmode import current_umask


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def check_out_dir(path: Path, *, overwrite: bool, is_own: Callable[[Path], bool], what: str,
                  flag: str = "--overwrite") -> None:
    """ConfigError unless ``path`` is absent, an empty folder, or (with ``overwrite``) a folder ``is_own``
    recognises as ``what``."""
    if not os.path.lexists(path) or is_empty_dir(path):
        return
    if path.is_symlink() or not path.is_dir():
        raise ConfigError(f"{path} exists and is not a folder; choose another output folder")
    if not is_own(path):
        raise ConfigError(f"{path} is a folder of other files (not {what}); it was left untouched: choose an "
                          "empty or new output folder")
    if not overwrite:
        raise ConfigError(f"{path} already holds {what}; pass {flag} to replace it, or choose another folder")


@contextmanager
def atomic_out_dir(path: str | Path, *, overwrite: bool, is_own: Callable[[Path], bool], what: str,
                   flag: str = "--overwrite") -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; on success it replaces ``path``, on any error it is removed."""
    path = Path(path)
    dirswap.cleanup_siblings(path, is_complete=is_own)
    check_out_dir(path, overwrite=overwrite, is_own=is_own, what=what, flag=flag)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = dirswap.tmp_name(path)
    tmp.mkdir(mode=0o777)
    try:
        yield tmp
        check_out_dir(path, overwrite=overwrite, is_own=is_own, what=what, flag=flag)  # changed meanwhile?
        for d in (tmp, *(p for p in tmp.rglob("*") if p.is_dir())):
            d.chmod(0o777 & ~current_umask())
        if is_empty_dir(path):
            path.rmdir()
        dirswap.swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
