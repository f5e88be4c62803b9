"""Sphinx extension: the API page is generated from ``rbtutor.__all__``.

A page that contains the directive block

.. code-block:: markdown

    ```{rbtutor-api}
    ```

gets, in its place, one section per module of the library: the module's
docstring, then every name of ``rbtutor.__all__`` that the module defines,
documented under its public name ``rbtutor.<name>`` (so ``{py:func}`rbtutor.simulate```
links to it from any page), then the module's other public members under their
module path. Names of ``rbtutor.__all__`` that are modules themselves
(``euler_parameters``, ``problems``, ``symbolic``) get a section of their own
with all their members. No list of names is written by hand: a name added to
``__all__`` appears on the page at the next build, and a name in ``__all__``
that the package cannot resolve is a build error.

The block is replaced while the source is read (event ``source-read``), before
MyST parses it, so the generated headings are ordinary sections of the page and
show in its table of contents.
"""

from __future__ import annotations

import importlib
import inspect
import re
from types import ModuleType

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "rbtutor"
BLOCK = re.compile(r"^```\{rbtutor-api\}[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _title(module: ModuleType) -> str:
    """The first sentence of the module docstring, up to its colon, as a heading."""
    first = (inspect.getdoc(module) or module.__name__).strip().splitlines()[0]
    return re.split(r":| \(", first)[0].rstrip(".").strip()


def _directive(obj) -> str:
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if callable(obj):
        return "autofunction"
    return "autodata"


def _rst_block(lines: list[str]) -> str:
    return "```{eval-rst}\n" + "\n".join(lines) + "\n```\n"


def generate(package_name: str = PACKAGE) -> str:
    """MyST markdown for every public name of the package, grouped by defining module."""
    package = importlib.import_module(package_name)
    names = list(getattr(package, "__all__", []))
    if not names:
        raise ExtensionError(f"{package_name}.__all__ is empty or missing")
    groups: dict[str, list[str]] = {}
    submodules: list[str] = []
    for name in names:
        try:
            obj = getattr(package, name)
        except AttributeError as exc:
            raise ExtensionError(f"{package_name}.__all__ names {name!r}, which does not resolve") from exc
        if inspect.ismodule(obj):
            submodules.append(obj.__name__)
        else:
            groups.setdefault(obj.__module__, []).append(name)

    parts = []
    for module_name in sorted(groups, key=lambda m: (_order(m), m)):
        module = importlib.import_module(module_name)
        exported = sorted(groups[module_name], key=str.lower)
        parts.append(f"## {_title(module)}\n")
        parts.append(f"Defined in `{module_name}`; available as "
                     + ", ".join(f"`{package_name}.{n}`" for n in exported) + ".\n")
        lines = [f".. automodule:: {module_name}", "   :no-members:", ""]
        for name in exported:
            obj = getattr(package, name)
            lines.append(f".. {_directive(obj)}:: {package_name}.{name}")
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                lines.append("   :members:")
            lines.append("")
        for name in _other_members(module, set(exported)):
            obj = getattr(module, name)
            lines.append(f".. {_directive(obj)}:: {module_name}.{name}")
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                lines.append("   :members:")
            lines.append("")
        parts.append(_rst_block(lines))
    for module_name in submodules:
        module = importlib.import_module(module_name)
        parts.append(f"## {_title(module)}\n")
        parts.append(f"The module `{module_name}`.\n")
        parts.append(_rst_block([f".. automodule:: {module_name}", "   :members:", ""]))
    return "\n".join(parts)


def _order(module_name: str) -> int:
    """Modules in the order the chapter meets them; unknown ones at the end, by name."""
    known = ["kinematics", "inertia", "rigid_body", "simulation", "torque_free"]
    short = module_name.rsplit(".", 1)[-1]
    return known.index(short) if short in known else len(known)


def _other_members(module: ModuleType, exported: set[str]) -> list[str]:
    """Public functions and classes defined in the module but not re-exported by the package."""
    candidates = getattr(module, "__all__", None) or [
        n for n, v in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(v) or inspect.isclass(v))
        and getattr(v, "__module__", None) == module.__name__
    ]
    return sorted((n for n in candidates if n not in exported), key=str.lower)


def replace_block(app: Sphinx, docname: str, source: list[str]) -> None:
    text = source[0]
    if "{rbtutor-api}" not in text:
        return
    generated, count = BLOCK.subn(lambda _m: generate(), text)
    if count != 1:
        raise ExtensionError(f"{docname}: expected one rbtutor-api block, found {count}")
    source[0] = generated


def setup(app: Sphinx) -> dict:
    app.connect("source-read", replace_block)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
