"""The kernel that runs student notebooks while they are graded.

It is a plain IPython kernel with two differences: ``import rbtutor`` fails (the
course library is the instructor's, and a student's code must not lean on it),
and ``RBTUTOR_AUTOGRADING=1`` is set so that notebooks skip their plots.
:func:`install` writes its kernelspec into the environment; nbgrader_config.py
makes nbgrader's ``Execute`` use it.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys

KERNEL_NAME = "rbtutor-student"


class _RefuseCourseLibrary(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "rbtutor" or name.startswith("rbtutor."):
            raise ModuleNotFoundError(
                "rbtutor is the instructor's library and is not available while grading; "
                "compute the answers with numpy, scipy and sympy", name=name)
        return None


def install(prefix: str | None = None) -> str:
    """Write (or refresh) the kernelspec under ``<prefix>/share/jupyter/kernels``; return its name."""
    folder = os.path.join(prefix or sys.prefix, "share", "jupyter", "kernels", KERNEL_NAME)
    spec = {
        "argv": [sys.executable, "-m", "rbtutor.student_kernel", "-f", "{connection_file}"],
        "display_name": "Python 3 (rbtutor grading)",
        "language": "python",
        "env": {"RBTUTOR_AUTOGRADING": "1", "MPLBACKEND": "Agg"},
    }
    path = os.path.join(folder, "kernel.json")
    text = json.dumps(spec, indent=1)
    if not os.path.exists(path) or open(path).read() != text:
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    return KERNEL_NAME


def main() -> None:
    for name in [n for n in sys.modules if n == "rbtutor" or n.startswith("rbtutor.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _RefuseCourseLibrary())
    os.environ["RBTUTOR_AUTOGRADING"] = "1"
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
