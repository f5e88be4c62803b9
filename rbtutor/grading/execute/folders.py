"""Step: execute, its folders. The throwaway folders a kernel works in, filled with regular files only
and removed without following links."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def throwaway_folder(prefix: str, copy_from: str | None = None):
    """A new private folder (mode 0700) removed afterwards, whatever was made inside it.

    With ``copy_from``: its regular files and folders are copied in first, never following
    a link (links and special files are left out).
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if copy_from:
            _copy_regular(Path(copy_from), folder)
        yield folder
    finally:
        remove_tree(folder)


def _copy_regular(source: Path, target: Path, depth: int = 0) -> None:
    if depth > 8:
        return
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                (target / entry.name).mkdir(mode=0o755)
                _copy_regular(Path(entry.path), target / entry.name, depth + 1)
            elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_nlink == 1:
                shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)


def remove_tree(folder: Path) -> None:
    """Remove ``folder`` and everything in it without following links, even folders made unwritable."""

    def retry(function, path, _exc):
        try:
            parent = os.path.dirname(path)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
            function(path)
        except OSError:
            pass

    shutil.rmtree(folder, onerror=retry)
