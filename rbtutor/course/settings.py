"""Step: run (the course's settings). ``course.toml``: the grading options a course sets, read in one place.

A course folder may hold ``course.toml`` beside ``nbgrader_config.py``. Its sections are the steps
of :data:`rbtutor.grading.config.STEPS` and its keys the options of each step, named as
:func:`rbtutor.grading.config.course_key` says (``[sandbox] memory`` is the option ``sandbox_memory``)::

    [execute]
    notebook_timeout = 600      # seconds
    [sandbox]
    memory = 8_589_934_592      # bytes

The section ``[lms]`` is not a grading step: it names the course's LMS platform, and
:mod:`rbtutor.course.lms_settings` reads it (:attr:`CourseSettings.lms`) with the same one-line errors.

A missing file means every option keeps its default. :func:`load_settings` reads the file with
``tomllib`` and checks every value against the option's declared type and range
(:func:`rbtutor.grading.config.check_value`); a syntax error, an unknown section or key, a value of
the wrong type or range, and an option that is a constant of the code (only the options read
through a trait of the grading run or handed to the sandbox's launcher can be set) raise
:class:`SettingsError`, whose text is one line: ``course.toml:12: sandbox.memory: expected bytes as
a whole number ≥ 0, got "4G"``. ``rbtutor`` prints it and exits 2.

How a value reaches its reader: :func:`apply_settings`, called by
:func:`rbtutor.course.nbgrader.configure` (so by every nbgrader process of the course and every
``rbtutor`` command that grades), writes every trait option into the traitlets configuration
(``c.BoundedExecute.notebook_timeout`` ...) and every sandbox limit into this process's environment
(``RBTUTOR_KERNEL_MEMORY`` ...), which the grading kernel's launcher inherits and reads. Those
variables are internal: a grading run replaces whatever the environment held.

The rule for ``nbgrader_config.py``: it may still set a trait option that ``course.toml`` does not
set (shown as ``nbgrader_config.py:LINE``), but an option set in both files is refused, naming both
lines (:func:`refuse_overlap`, which reads the assignments ``c.Class.trait = ...`` of the file, and
:func:`check_agreement`, which compares the loaded configuration with ``course.toml`` and so also
catches a value set some other way).
"""

from __future__ import annotations

import ast
import json
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ..grading.config import (
    GRADING,
    STEPS,
    GradingConfig,
    check_value,
    course_key,
    expected,
    settable,
    trait_keys,
)
from .layout import CourseLayout
from .lms_settings import SECTION as LMS_SECTION
from .lms_settings import LmsSettingError, LmsSettings, parse_lms

FILE_NAME = CourseLayout(Path("/")).settings_file.name
#: ``(section, key)`` -> option name, for every option
KEYS = {course_key(spec.name): spec.name for spec in fields(GradingConfig)}
_SPECS = {spec.name: spec for spec in fields(GradingConfig)}
_HEADER = re.compile(r"\s*\[\s*([^\[\]]*?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.-]+)\s*=")
_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


class SettingsError(ValueError):
    """A setting of ``course.toml`` that cannot be used; the text is ``file:line: option: what is wrong``."""

    def __init__(self, file: str, line: int, option: str | None, message: str):
        self.file, self.line, self.option = file, line, option
        where = f"{file}:{line}: " + (f"{option}: " if option else "")
        super().__init__(where + message)


@dataclass(frozen=True)
class CourseSettings:
    """What a course's ``course.toml`` sets: ``{option name: value}`` and the line of each."""

    path: Path | None = None  # the file, None when the course has none
    values: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    lms: LmsSettings | None = None  # the [lms] section (rbtutor.course.lms_settings); None: no LMS

    def value(self, name: str):
        """The value option ``name`` takes in this course: the file's, else the default."""
        return self.values.get(name, getattr(GRADING, name))

    def config(self) -> GradingConfig:
        """Every option as this course sets it."""
        return replace(GRADING, **self.values)


def load_settings(root: str | os.PathLike) -> CourseSettings:
    """The settings of ``course.toml`` in the course folder ``root`` (none when there is no such file).

    Raises
    ------
    SettingsError
        The file is not TOML, or a section, key or value in it is not an option a course can set
        with a value it can take.
    """
    path = CourseLayout(Path(root)).settings_file
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CourseSettings()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(FILE_NAME, 1, None, f"cannot be read: {exc}") from None
    values, lines = parse_settings(text)
    return CourseSettings(path, values, lines, lms_section(text))


def lms_section(text: str, file: str = FILE_NAME) -> LmsSettings | None:
    """The ``[lms]`` section of a ``course.toml`` text that :func:`parse_settings` accepted, or None."""
    table = tomllib.loads(text).get(LMS_SECTION)
    try:
        return None if table is None else parse_lms(table, key_lines(text))
    except LmsSettingError as exc:
        raise SettingsError(file, exc.line, f"{LMS_SECTION}.{exc.key}" if exc.key else None, str(exc)) from None


def parse_settings(text: str, file: str = FILE_NAME) -> tuple[dict, dict]:
    """``({option: value}, {option: line})`` of the text of a ``course.toml``; see :func:`load_settings`."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _AT.search(message)
        line = int(at[1]) if at else max(1, len(text.splitlines()))
        reason = message[:at.start()] if at else message
        raise SettingsError(file, line, None, f"not valid TOML: {reason[:1].lower()}{reason[1:]}") from None
    where = key_lines(text)
    values, lines = {}, {}
    for section, table in document.items():
        if section == LMS_SECTION:  # the LMS platform: read by lms_section
            continue
        if section not in STEPS:
            expected_sections = ", ".join(f"[{step}]" for step in STEPS)
            if isinstance(table, dict):
                raise SettingsError(file, where.get((section, None), 1), None,
                                    f"unknown section [{section}]; expected one of {expected_sections}")
            raise SettingsError(file, where.get((None, section), 1), section,
                                f"a setting outside any section; expected it under one of {expected_sections}")
        if not isinstance(table, dict):
            raise SettingsError(file, where.get((None, section), 1), section,
                                f"expected the section [{section}], got a value")
        for key, value in table.items():
            line = where.get((section, key), where.get((section, None), 1))
            name = KEYS.get((section, key))
            dotted = f"{section}.{key}"
            if name is None:
                others = [n for (s, k), n in KEYS.items() if k == key or n == key]
                hint = f" ({others[0]} is {'.'.join(course_key(others[0]))})" if others else ""
                raise SettingsError(file, line, dotted, f"no such option in [{section}]{hint}; "
                                    "rbtutor config lists the options and their keys")
            if not settable(name):
                raise SettingsError(file, line, dotted, "expected an option a course can set, got a constant of "
                                    "the code (rbtutor config marks the settable ones)")
            spec = _SPECS[name]
            try:
                check_value(name, spec.type, value, spec.metadata["choices"])
            except ValueError:
                raise SettingsError(file, line, dotted, f"expected {expected(name)}, got {_shown(value)}") from None
            values[name], lines[name] = value, line
    return values, lines


def key_lines(text: str) -> dict:
    """``{(section, key): line}`` of a flat TOML text, and ``{(section, None): line}`` of each header.

    ``tomllib`` gives no lines; ``course.toml`` is flat (``key = value`` lines under ``[section]``
    headers), so each key's line is found in the text. A key before any header has section None.
    """
    found, section = {}, None
    in_string = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string:  # inside a multi-line string: no keys here
            if in_string in line:
                in_string = None
            continue
        header = _HEADER.match(line)
        if header and not line.lstrip().startswith("[["):
            section = _unquote(header[1])
            found.setdefault((section, None), number)
            continue
        key = _KEY.match(line)
        if key:
            found.setdefault((section, _unquote(key[1])), number)
            rest = line[key.end():]
            for quotes in ('"""', "'''"):
                if rest.count(quotes) == 1:
                    in_string = quotes
    return found


def _unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1] if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'" else name


def _shown(value) -> str:
    """A TOML value as the file would write it, for an error message."""
    if isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a date or time ({value})"


def nbgrader_assignments(config_file: Path) -> dict[tuple[str, str], int]:
    """``{(Class, trait): line}`` of the assignments ``c.Class.trait = ...`` in ``nbgrader_config.py``.

    Any name of the config object counts (``c``, ``config`` ...); a file that does not parse has none
    (its loading then fails on its own).
    """
    try:
        tree = ast.parse(config_file.read_text(encoding="utf-8"), filename=str(config_file))
    except (OSError, SyntaxError, ValueError):
        return {}
    found = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
                    and isinstance(target.value.value, ast.Name):
                found.setdefault((target.value.attr, target.attr), node.lineno)
    return found


def refuse_overlap(settings: CourseSettings, config_file: Path) -> None:
    """Raise :class:`SettingsError` for an option that ``course.toml`` sets and ``nbgrader_config.py``
    assigns too (``c.Class.trait = ...``), naming both lines."""
    assigned = nbgrader_assignments(config_file)
    for name in settings.values:
        for cls, trait in trait_keys(_SPECS[name].metadata["where"]):
            if (cls, trait) in assigned:
                raise SettingsError(FILE_NAME, settings.lines[name], ".".join(course_key(name)),
                                    f"also set in {config_file.name}:{assigned[cls, trait]} (c.{cls}.{trait}); "
                                    "set it in one place only")


def check_agreement(settings: CourseSettings, config, config_name: str = "nbgrader_config.py") -> None:
    """Raise :class:`SettingsError` where the loaded traitlets ``config`` holds another value than
    ``course.toml`` sets for the same option (set in ``nbgrader_config.py`` after :func:`apply_settings`)."""
    for name, value in settings.values.items():
        for cls, trait in trait_keys(_SPECS[name].metadata["where"]):
            held = config[cls][trait] if cls in config and trait in config[cls] else None
            if held != value:
                raise SettingsError(FILE_NAME, settings.lines[name], ".".join(course_key(name)),
                                    f"{config_name} makes c.{cls}.{trait} {held!r} after course.toml set it; "
                                    "set it in one place only")


def apply_settings(c, settings: CourseSettings, environ=None) -> None:
    """Hand every settable option's value in this course to its reader.

    A trait option goes into the traitlets configuration ``c`` (each ``c.Class.trait`` it is read
    under); a sandbox limit into ``environ`` (default ``os.environ``) under its internal variable,
    which the kernel launcher inherits. Options the course does not set get their defaults, so a
    grading run never depends on what the grader's environment held.
    """
    environ = os.environ if environ is None else environ
    for spec in fields(GradingConfig):
        if not settable(spec.name):
            continue
        value = settings.value(spec.name)
        for cls, trait in trait_keys(spec.metadata["where"]):
            c[cls][trait] = value
        if spec.metadata["env"]:
            environ[spec.metadata["env"]] = str(value)


def effective(settings: CourseSettings, config, config_file: Path | None) -> dict:
    """``{option: (value, source)}`` of what the course's files set: ``course.toml:LINE`` for its own,
    ``nbgrader_config.py:LINE`` (or without a line, when not set by a plain assignment) for a trait
    that file gives another value than the default; options set by neither are left out."""
    assigned = nbgrader_assignments(config_file) if config_file is not None else {}
    chosen = {}
    for spec in fields(GradingConfig):
        name = spec.name
        if name in settings.values:
            chosen[name] = (settings.values[name], f"{FILE_NAME}:{settings.lines[name]}")
            continue
        for cls, trait in trait_keys(spec.metadata["where"]):
            if config is None or cls not in config or trait not in config[cls]:
                continue
            value, file = config[cls][trait], config_file.name if config_file else "nbgrader_config.py"
            if (cls, trait) in assigned:
                chosen[name] = (value, f"{file}:{assigned[cls, trait]}")
            elif value != getattr(GRADING, name):
                chosen[name] = (value, file)
    return chosen


def template() -> str:
    """A ``course.toml`` that sets nothing: every option a course can set, commented out at its default,
    under its section, with its unit and description (the repository's own ``course.toml`` is this text)."""
    lines = ["# course.toml: the grading options of this course (rbtutor.course.settings).",
             "# Every option a course can set is listed below at its default, commented out: remove the '#'",
             "# before a key and change its value to set it. Values are plain TOML (whole numbers may use '_').",
             "# `rbtutor config` shows the effective value of every option and where it came from. An option",
             "# set here may not also be set in nbgrader_config.py: rbtutor refuses the pair, naming both lines."]
    for step in STEPS:
        names = [spec.name for spec in fields(GradingConfig) if spec.metadata["step"] == step and settable(spec.name)]
        if not names:
            continue
        lines += ["", f"[{step}]"]
        for name in names:
            meta, default = _SPECS[name].metadata, getattr(GRADING, name)
            lines.append(f"# {meta['help']} [{meta['unit']}]")
            key = course_key(name)[1]
            if default is None:
                lines.append(f'# {key} = "a long random text"  (default: not set)')
            else:
                lines.append(f"# {key} = {_toml(default)}")
    return "\n".join(lines) + "\n"


def _toml(value) -> str:
    """``value`` written as TOML: whole numbers of four digits or more grouped with '_'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)
