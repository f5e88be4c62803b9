"""The Operator guide's limits table (book/_ext/limits_table.py) shows every grading option as declared.

The table is built from :mod:`rbtutor.grading.config` at build time; these tests call the
functions the ``{limits-table}`` directive calls (no Sphinx build) and read the cells back
independently of how they were written: a default shown as ``16,777,216 (16 MiB)`` must parse
back to the option's default, so a row left out, a wrong unit or a default written wrong fails.
"""

from __future__ import annotations

import re
from dataclasses import fields

import limits_table  # book/_ext, on sys.path through tests/conftest.py
import pytest

from rbtutor.course.checks.core import read_settings
from rbtutor.course.settings import SettingsError, effective, load_settings, parse_settings
from rbtutor.grading.config import GRADING, STEPS, GradingConfig, course_key

OPTIONS = {spec.name: spec for spec in fields(GradingConfig)}
BINARY = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def parse_cell(text: str, declared: str):
    """The value a cell shows, read back as the declared type of its option."""
    if declared == "bool":
        return {"yes": True, "no": False}[text]
    if declared == "str | None" and text == "none":
        return None
    if declared.startswith("str"):
        return text
    match = re.fullmatch(r"([0-9][0-9,]*(?:\.[0-9]+)?)(?: \(([0-9]+) (KiB|MiB|GiB)\))?", text)
    assert match, f"a number cell that does not read as one: {text!r}"
    number = float(match[1].replace(",", "")) if declared == "float" else int(match[1].replace(",", ""))
    if match[2]:
        assert int(match[2]) * BINARY[match[3]] == number, f"the two forms of {text!r} disagree"
    return number


def by_name(header, rows):
    return {cells[header.index("option")]: dict(zip(header, cells, strict=True)) for cells in rows}


def test_every_option_appears_once_with_its_default_unit_and_description():
    header, rows = limits_table.table_rows()
    names = [cells[0] for cells in rows]
    assert sorted(names) == sorted(OPTIONS), "the table must hold every option of GradingConfig, once"
    assert len(names) == len(set(names))
    for name, row in by_name(header, rows).items():
        spec = OPTIONS[name]
        assert parse_cell(row["default"], spec.type) == getattr(GRADING, name), name
        assert row["unit"] == spec.metadata["unit"], name
        assert row["step"] == spec.metadata["step"], name
        assert row["description"] == spec.metadata["help"], name
        assert row["this course"] == limits_table.NOT_SET, f"{name}: no course configuration was given"


@pytest.mark.parametrize("step", STEPS)
def test_a_step_keeps_its_own_options_only(step):
    header, rows = limits_table.table_rows(step)
    assert "step" not in header
    assert {cells[0] for cells in rows} == {n for n, s in OPTIONS.items() if s.metadata["step"] == step}


def test_an_unknown_step_is_refused():
    with pytest.raises(ValueError, match="expected step"):
        limits_table.table_rows("sandboxes")


def test_the_course_column_shows_what_the_course_sets(tmp_path):
    (tmp_path / "course.toml").write_text(
        f"[execute]\nnotebook_timeout = {GRADING.execute_notebook_timeout + 17.0}\n"
        f"[late]\npercent_per_day = {GRADING.late_percent_per_day / 2}\n")
    settings = load_settings(tmp_path)
    header, rows = limits_table.table_rows(chosen=effective(settings, None, None))
    rows = by_name(header, rows)
    assert set(settings.values) == {"execute_notebook_timeout", "late_percent_per_day"}
    for name, row in rows.items():
        if name in settings.values:
            value, source = re.fullmatch(r"(.*) \((course\.toml:[0-9]+)\)", row["this course"]).groups()
            assert parse_cell(value, OPTIONS[name].type) == settings.values[name], name
            assert source == f"course.toml:{settings.lines[name]}", name
        else:
            assert row["this course"] == limits_table.NOT_SET, name


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def another_value(spec):
    """A valid value of the option ``spec`` other than its default."""
    default = getattr(GRADING, spec.name)
    if spec.metadata.get("choices"):
        return next(choice for choice in spec.metadata["choices"] if choice != default)
    if isinstance(default, bool):
        return not default
    if default is None or isinstance(default, str):
        return "another text"
    return default + 1


def test_every_way_to_set_an_option_is_read_where_the_table_says(tmp_path):
    header, rows = limits_table.table_rows()
    (tmp_path / "exercises").mkdir()
    for name, row in by_name(header, rows).items():
        spec = OPTIONS[name]
        changed = another_value(spec)
        ways = row["set with"].split(", ")
        section, key = course_key(name)
        if f"[{section}] {key}" in ways:
            values, _ = parse_settings(f"[{section}]\n{key} = {toml_value(changed)}\n")
            assert values == {name: changed}, name
        else:  # a course cannot set it in course.toml: the file refuses it
            with pytest.raises(SettingsError, match="constant of the code"):
                parse_settings(f"[{section}]\n{key} = {toml_value(changed)}\n")
        for way in ways:
            if way.startswith("checks.yaml: "):
                key = way.removeprefix("checks.yaml: ")
                text = f"stuck_after: {changed}\n" if key == "stuck_after" else \
                    f"default: {{{key}: {str(changed).lower()}}}\n"
                (tmp_path / "exercises" / "checks.yaml").write_text(text)
                settings = read_settings(tmp_path)
                read = settings["stuck_after"] if key == "stuck_after" else settings["default"][key]
                assert read == changed, way
            elif not way.startswith("["):
                assert way == limits_table.CONSTANT, f"{name}: unknown way to set it: {way!r}"


def test_the_docutils_table_has_a_row_for_each_option():
    header, rows = limits_table.table_rows("sandbox")
    table = limits_table.table_node(header, rows, "sandbox options")
    body = table.next_node(lambda node: node.tagname == "tbody")
    shown = [row.children[0].astext() for row in body.children]
    assert shown == [cells[0] for cells in rows]
    assert table.next_node(lambda node: node.tagname == "title").astext() == "sandbox options"
