"""The grading options (rbtutor.grading.config): declared once, read from there, printed by the CLI."""

import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets import HasTraits
from traitlets.config import Config

from rbtutor.grading.config import GRADING, STEPS, TRAIT_CLASSES, GradingConfig, format_table, option_rows

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = dataclasses.fields(GradingConfig)
READERS = [(spec.name, reader) for spec in OPTIONS for reader in spec.metadata["where"]]


def reader_value(reader: str):
    """The value a reader (``module:NAME``, ``module:Class.attr``, ``module:NAME[key]``) holds today."""
    module_name, name = reader.split(":")
    module = importlib.import_module(module_name)
    keyed = re.fullmatch(r"(\w+)\[(\w+)\]", name)
    if keyed:
        return getattr(module, keyed[1])[keyed[2]]
    holder_name, _, attr = name.rpartition(".")
    if not holder_name:
        return getattr(module, name)
    holder = getattr(module, holder_name)
    if isinstance(holder, type) and issubclass(holder, HasTraits):
        return holder.class_traits()[attr].default_value
    if dataclasses.is_dataclass(holder):
        return {spec.name: spec.default for spec in dataclasses.fields(holder)}[attr]
    raise AssertionError(f"expected {reader} to name a trait or a dataclass field, got {holder!r}")


@pytest.mark.parametrize("spec", OPTIONS, ids=lambda spec: spec.name)
def test_every_option_is_described(spec):
    meta = spec.metadata
    assert meta["help"].strip().endswith("."), f"{spec.name}: one sentence, got {meta['help']!r}"
    assert meta["unit"].strip(), f"{spec.name} has no unit"
    assert meta["step"] in STEPS
    assert meta["where"], f"{spec.name} names no reader"


@pytest.mark.parametrize(("name", "reader"), READERS, ids=[reader for _, reader in READERS])
def test_each_reader_holds_the_declared_default(name, reader):
    """A module constant, trait or field that drifts from its declaration fails here."""
    value, declared = reader_value(reader), getattr(GRADING, name)
    assert value == declared, f"{reader} is {value!r}, the configuration declares {name} = {declared!r}"
    assert type(value) is type(declared), f"{reader} is a {type(value).__name__}, {name} a {type(declared).__name__}"


@pytest.mark.parametrize(("name", "reader"), READERS, ids=[reader for _, reader in READERS])
def test_trait_readers_are_configurable_and_only_they(name, reader):
    module_name, attr_path = reader.split(":")
    cls_name, _, trait = attr_path.partition(".")
    cls = getattr(importlib.import_module(module_name), cls_name.split("[")[0])
    is_trait = isinstance(cls, type) and issubclass(cls, HasTraits)
    assert is_trait == (cls_name in TRAIT_CLASSES), f"{reader}: TRAIT_CLASSES disagrees with the code"
    if is_trait:
        assert cls.class_traits()[trait].metadata.get("config"), f"{reader} is not tagged config=True"


def test_every_configurable_limit_of_the_pipeline_is_declared():
    """The configurable traits of the grading classes, folders and switches aside, all have an entry."""
    from rbtutor.course.late import PercentPerDay
    from rbtutor.grading.execute import BoundedExecute
    from rbtutor.grading.outputs import CapOutput

    declared = {reader.split(":")[1] for _, reader in READERS}
    for cls in (BoundedExecute, CapOutput, PercentPerDay):
        for trait in cls.class_own_traits(config=True):
            if trait != "report_dir":
                assert f"{cls.__name__}.{trait}" in declared, f"{cls.__name__}.{trait} has no entry"


def test_the_table_lists_each_option_with_value_unit_and_description():
    table = format_table(option_rows(environ={})).splitlines()
    assert len(table) == 2 + len(OPTIONS)
    for spec, line in zip(OPTIONS, table[2:], strict=True):
        assert line.startswith(spec.name + " ")
        assert spec.metadata["unit"] in line
        assert line.endswith(spec.metadata["help"])


def test_a_course_setting_and_the_environment_are_shown_as_such():
    config = Config()
    config.CapOutput.max_output_bytes = 5000
    config.CapOutput.max_answer_bytes = 7
    rows = {row["name"]: row for row in option_rows(config, environ={"RBTUTOR_KERNEL_NPROC": "64"})}
    assert rows["outputs_max_output_bytes"]["value"] == 5000
    assert rows["outputs_max_output_bytes"]["set_in"] == ["c.CapOutput.max_output_bytes"]
    assert rows["outputs_max_output_bytes"]["default"] == GRADING.outputs_max_output_bytes
    assert rows["outputs_max_answer_bytes"]["set_in"] == ["c.CapOutput.max_answer_bytes"]
    assert rows["sandbox_nproc"]["value"] == "64"
    assert rows["sandbox_nproc"]["set_in"] == ["$RBTUTOR_KERNEL_NPROC"]
    assert rows["intake_max_files"]["set_in"] == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"intake_max_files": -1}, "expected intake_max_files to be at least 0, got -1"),
    ({"check_enabled": 1}, "expected check_enabled to be bool, got 1"),
    ({"sandbox_nproc": True}, "expected sandbox_nproc to be int, got True"),
    ({"execute_seed_key": 3}, "expected execute_seed_key to be str | None, got 3"),
])
def test_wrong_values_are_refused(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(GRADING, **changes)


def run_config(*args, cwd=ROOT):
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(Path.home())}
    done = subprocess.run([sys.executable, "-m", "rbtutor.course", "config", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_json_round_trips_and_shows_the_course_settings():
    printed = json.loads(run_config("--json", "--root", str(ROOT)))
    assert printed["course"] == str(ROOT)
    rows = {row["name"]: row for row in printed["options"]}
    assert list(rows) == [spec.name for spec in OPTIONS]
    for spec in OPTIONS:
        assert rows[spec.name]["default"] == getattr(GRADING, spec.name)
        assert rows[spec.name]["unit"] == spec.metadata["unit"]
        assert rows[spec.name]["description"] == spec.metadata["help"]
    # what rbtutor.course.nbgrader.configure sets for this course
    assert rows["execute_notebook_timeout"]["value"] == 300
    assert rows["execute_notebook_timeout"]["set_in"] == ["c.BoundedExecute.notebook_timeout"]
    assert rows["execute_cell_timeout"]["value"] == 120


def test_cli_table_outside_a_course_says_it_shows_the_defaults(tmp_path):
    out = run_config(cwd=tmp_path)
    assert "the defaults" in out.splitlines()[0]
    for spec in OPTIONS:
        assert re.search(rf"^{spec.name} ", out, re.M), f"{spec.name} missing from the table"
