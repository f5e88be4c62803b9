"""Book build times: a cold build, then a cached rebuild after one page changed.

Both builds run in a scratch copy of the tracked files (the working tree's own
_build/ is left alone), with the same command as `make book`. Targets on the
course machine (2 cores): cold under 3 minutes, cached rebuild under 30 seconds.
The rebuild must re-execute exactly the one changed page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
COLD_TARGET_S, CACHED_TARGET_S = 180.0, 30.0
CHANGED_PAGE = "book/problems/heel.md"


def copy_tracked_files(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def build(where: Path) -> tuple[float, str]:
    env = dict(os.environ, MPLBACKEND="Agg", JUPYTER_PATH=str(where / "book" / "_jupyter"),
               PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    start = time.perf_counter()
    proc = subprocess.run([str(VENV_BIN / "jb"), "build", ".", "--all", "-W", "--keep-going", "--path-output", "."],
                          cwd=where, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"book build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def executed(log: str) -> int:
    return len(re.findall(r"Executing notebook using \w+ CWD", log))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rbtutor-bench-book-") as tmp:
        where = Path(tmp)
        copy_tracked_files(where)
        cold, log_cold = build(where)
        page = where / CHANGED_PAGE
        page.write_text(page.read_text().replace("```{code-cell}", "```{code-cell}\n# touched", 1))
        cached, log_cached = build(where)
    rows = [
        ("cold build", cold, COLD_TARGET_S, executed(log_cold)),
        (f"rebuild after changing {CHANGED_PAGE}", cached, CACHED_TARGET_S, executed(log_cached)),
    ]
    print(f"{'build':<50} {'time':>9} {'target':>9} {'pages executed':>15}")
    for name, seconds, target, count in rows:
        verdict = "PASS" if seconds < target else "FAIL"
        print(f"{name:<50} {seconds:8.1f}s {target:8.0f}s {count:15d}  {verdict}")
    if executed(log_cached) != 1:
        sys.exit(f"the cached rebuild executed {executed(log_cached)} pages, expected 1")


if __name__ == "__main__":
    main()
