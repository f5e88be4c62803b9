"""Step: sandbox (the launcher's entry). Starts one grading kernel: ``-f CONNECTION_FILE [ipykernel options]``.

The kernelspec runs this file as a script (``python -I <this file>``), so that a kernel start does
not import the rbtutor package (numpy, scipy, sympy): this package alone is loaded, under its own
name, from the folder of this file. ``python -m rbtutor.grading.sandbox`` runs it too.
"""

import sys


def _package():
    """This package, loaded without its parents when this file runs as a script."""
    if __package__:
        return sys.modules[__package__]
    # deferred: needed only when run as a script; importlib.util takes 3 ms to import (-X importtime, 2026-12-06)
    import importlib.util

    # deferred: as importlib.util; pathlib takes 7 ms to import (-X importtime, 2026-12-06)
    from pathlib import Path

    folder = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("rbtutor.grading.sandbox", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return package


if __name__ == "__main__":
    _package().main()
