"""The grading options (rbtutor.grading.config): declared once, set in course.toml (rbtutor.course.settings),
handed to their readers in a grading run, printed by ``rbtutor config``."""

import dataclasses
import importlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets import HasTraits
from traitlets.config import Config

from rbtutor.course.settings import KEYS, key_lines, load_settings, parse_settings, template
from rbtutor.grading.config import (
    GRADING,
    STEPS,
    TRAIT_CLASSES,
    GradingConfig,
    course_key,
    format_table,
    option_rows,
    settable,
    trait_keys,
)

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
    """A module constant, trait or field of rbtutor's that drifts from its declaration fails here; a trait of
    another package (nbgrader's Execute.timeout) gets the declared value from configure instead (tested below)."""
    value, declared = reader_value(reader), getattr(GRADING, name)
    if not reader.startswith("rbtutor."):
        assert trait_keys((reader,)), f"{reader}: a reader outside rbtutor must be a trait that configure sets"
        return
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


def test_course_keys_are_unique_and_sectioned_by_step():
    keys = [course_key(spec.name) for spec in OPTIONS]
    assert len(set(keys)) == len(keys), "two options share a course.toml key"
    for spec, (section, key) in zip(OPTIONS, keys, strict=True):
        assert section == spec.metadata["step"]
        assert spec.name.endswith(key)
    assert KEYS[("sandbox", "memory")] == "sandbox_memory"
    assert KEYS[("checks", "per_hour")] == "check_per_hour"
    assert KEYS[("feedback", "sanitize_time_limit")] == "sanitize_time_limit"


def test_the_table_lists_each_option_with_value_unit_source_key_and_description():
    table = format_table(option_rows(environ={})).splitlines()
    assert len(table) == 2 + len(OPTIONS)
    for spec, line in zip(OPTIONS, table[2:], strict=True):
        assert line.startswith(spec.name + " ")
        assert spec.metadata["unit"] in line
        assert " default " in line
        key = ".".join(course_key(spec.name))
        assert (f" {key} " in line) == settable(spec.name), line
        assert line.endswith(spec.metadata["help"])


def test_the_rows_show_what_the_course_chose_and_an_ignored_variable():
    config = Config()
    config.CapOutput.max_output_bytes = 5000
    config.CapOutput.max_answer_bytes = GRADING.outputs_max_answer_bytes  # the default: not a change
    chosen = {"sandbox_nproc": (64, "course.toml:3")}
    rows = {row["name"]: row for row in option_rows(config, environ={"RBTUTOR_KERNEL_NPROC": "9"}, chosen=chosen)}
    assert rows["outputs_max_output_bytes"]["value"] == 5000
    assert rows["outputs_max_output_bytes"]["source"] == "nbgrader_config.py"
    assert rows["outputs_max_output_bytes"]["set_in"] == ["c.CapOutput.max_output_bytes"]
    assert rows["outputs_max_output_bytes"]["default"] == GRADING.outputs_max_output_bytes
    assert rows["outputs_max_answer_bytes"]["set_in"] == []
    assert rows["outputs_max_answer_bytes"]["source"] == "default"
    assert (rows["sandbox_nproc"]["value"], rows["sandbox_nproc"]["source"]) == (64, "course.toml:3")
    assert rows["sandbox_nproc"]["ignored_env"] == "RBTUTOR_KERNEL_NPROC"
    assert rows["sandbox_memory"]["ignored_env"] is None
    assert rows["intake_max_files"]["source"] == "default"


@pytest.mark.parametrize(("changes", "message"), [
    ({"intake_max_files": -1}, "expected intake_max_files to be at least 0, got -1"),
    ({"check_enabled": 1}, "expected check_enabled to be bool, got 1"),
    ({"sandbox_nproc": True}, "expected sandbox_nproc to be int, got True"),
    ({"execute_seed_key": 3}, "expected execute_seed_key to be str | None, got 3"),
    ({"execute_shutdown_kernel": "now"}, "expected execute_shutdown_kernel to be one of graceful, immediate"),
    ({"run_connect_timeout": math.inf}, "expected run_connect_timeout to be a finite number, got inf"),
])
def test_wrong_values_are_refused(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(GRADING, **changes)


# --- course.toml: read, checked, applied (rbtutor.course.settings)

SANDBOX_VARIABLES = [spec.metadata["env"] for spec in OPTIONS if spec.metadata["env"]]


@pytest.fixture
def clean_environment(monkeypatch):
    """configure writes the sandbox's variables into os.environ: put them back as they were after the test."""
    for variable in SANDBOX_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def scratch_course(folder: Path, toml: str | None = None, extra_config: str = "") -> Path:
    """A course folder with this course's nbgrader_config.py (plus ``extra_config``) and ``toml`` as course.toml."""
    folder.mkdir(exist_ok=True)
    (folder / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + extra_config)
    if toml is not None:
        (folder / "course.toml").write_text(toml)
    return folder


def rbtutor_config(course: Path, *args):
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(Path.home())}
    return subprocess.run([str(Path(sys.executable).parent / "rbtutor"), "config", *args], capture_output=True,
                          text=True, cwd=course, env=env, timeout=120)


def test_with_no_file_configure_gives_every_settable_option_its_default(tmp_path, clean_environment):
    """No course.toml: the grading run's configuration holds every trait option at its declared default (also
    nbgrader's own Execute.timeout, whose class default differs), and the launcher reads the default limits."""
    from rbtutor.course.nbgrader import configure
    from rbtutor.grading.sandbox.plan import kernel_limits, size_from_env

    c = Config()
    configure(c, scratch_course(tmp_path))
    for spec in OPTIONS:
        for cls, trait in trait_keys(spec.metadata["where"]):
            assert c[cls][trait] == getattr(GRADING, spec.name), f"c.{cls}.{trait}"
    limits = kernel_limits(os.getuid())
    assert (limits["as"], limits["fsize"]) == (GRADING.sandbox_memory, GRADING.sandbox_fsize)
    assert size_from_env("RBTUTOR_KERNEL_TREE_MEMORY", -1) == GRADING.sandbox_tree_memory


COURSE_TOML = """# a course's settings
[execute]
cell_timeout = 45
notebook_timeout = 77.5

[outputs]
max_answer_bytes = 1_234   # read by two steps

[late]
percent_per_day = 25

[sandbox]
memory = 3_221_225_472
nproc = 17
tree_memory = 1_073_741_824
"""


def test_a_course_toml_value_reaches_the_readers_of_a_grading_run(tmp_path, clean_environment):
    """The configuration a grading run builds (rbtutor.course.nbgrader.api) gives the preprocessors the course's
    values, and the environment the kernel launcher inherits gives the sandbox plan the course's limits."""
    from rbtutor.course.late import PercentPerDay
    from rbtutor.course.nbgrader import api
    from rbtutor.grading.execute import BoundedExecute
    from rbtutor.grading.outputs import CapOutput
    from rbtutor.grading.sandbox.plan import _tasks_of, kernel_limits, size_from_env

    config = api(scratch_course(tmp_path, COURSE_TOML)).config
    execute = BoundedExecute(config=config)
    assert (execute.timeout, execute.notebook_timeout, execute.max_answer_bytes) == (45, 77.5, 1234)
    assert CapOutput(config=config).max_answer_bytes == 1234
    assert PercentPerDay(config=config).percent_per_day == 25
    uid = os.getuid()
    before = _tasks_of(uid)
    limits = kernel_limits(uid)
    assert limits["as"] == 3 * 2**30
    assert before + 17 <= limits["nproc"] <= _tasks_of(uid) + 17 + 8  # the count of tasks may move a little
    assert limits["fsize"] == GRADING.sandbox_fsize  # not set: the default
    assert size_from_env("RBTUTOR_KERNEL_TREE_MEMORY", -1) == 2**30  # read by the launcher (run_kernel)
    # what the launcher is given: the grader's environment, as BoundedExecute passes it on
    launched = subprocess.run([sys.executable, "-c", "import os; from rbtutor.grading.sandbox.plan import "
                               "kernel_limits; print(kernel_limits(os.getuid())['as'])"],
                              capture_output=True, text=True, check=True, timeout=60)
    assert int(launched.stdout) == 3 * 2**30


def test_a_variable_left_in_the_environment_does_not_override_the_course(tmp_path, clean_environment):
    from rbtutor.course.nbgrader import configure
    from rbtutor.grading.sandbox.plan import kernel_limits

    clean_environment.setenv("RBTUTOR_KERNEL_MEMORY", "1G")
    configure(Config(), scratch_course(tmp_path, "[sandbox]\nfsize = 4096\n"))
    limits = kernel_limits(os.getuid())
    assert (limits["as"], limits["fsize"]) == (GRADING.sandbox_memory, 4096)


def test_rbtutor_config_with_no_file_shows_the_defaults(tmp_path):
    done = rbtutor_config(scratch_course(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["options"]}
    assert list(rows) == [spec.name for spec in OPTIONS]
    for spec in OPTIONS:
        assert (rows[spec.name]["value"], rows[spec.name]["source"]) == (getattr(GRADING, spec.name), "default")


def test_rbtutor_config_names_the_line_of_each_setting(tmp_path):
    done = rbtutor_config(scratch_course(tmp_path, COURSE_TOML, "c.CapOutput.max_output_bytes = 5000\n"), "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["options"]}
    lines = COURSE_TOML.splitlines()
    for name, value in [("execute_cell_timeout", 45), ("execute_notebook_timeout", 77.5),
                        ("outputs_max_answer_bytes", 1234), ("late_percent_per_day", 25),
                        ("sandbox_memory", 3 * 2**30), ("sandbox_nproc", 17)]:
        row = rows[name]
        assert row["value"] == value, name
        number = int(row["source"].removeprefix("course.toml:"))
        assert lines[number - 1].startswith(row["key"].split(".")[1] + " ="), (name, row["source"])
    config_lines = (ROOT / "nbgrader_config.py").read_text().count("\n")
    assert rows["outputs_max_output_bytes"]["source"] == f"nbgrader_config.py:{config_lines + 1}"
    assert rows["outputs_max_output_bytes"]["value"] == 5000
    assert rows["sandbox_fsize"]["source"] == "default"


PREAMBLE = "# course.toml of a test course\n\n[execute]\ncell_timeout = 60\n\n"  # four lines before the case


@pytest.mark.parametrize(("text", "message"), [
    ("[sandbox]\nmemory = \"4G\"\n",
     'course.toml:7: sandbox.memory: expected bytes as a whole number ≥ 0, got "4G"'),
    ("[outputs]\nmax_output_bytes = -1\n",
     "course.toml:7: outputs.max_output_bytes: expected bytes as a whole number ≥ 0, got -1"),
    ("[outputs]\n\nmax_output_bytes = 1.5\n",
     "course.toml:8: outputs.max_output_bytes: expected bytes as a whole number ≥ 0, got 1.5"),
    ("[sandbox]\nnproc = true\n",
     "course.toml:7: sandbox.nproc: expected processes as a whole number ≥ 0, got true"),
    ("[late]\npercent_per_day = nan\n",
     "course.toml:7: late.percent_per_day: expected percent per started day as a number ≥ 0, got NaN"),
    ("[execute]\n", "course.toml:6: not valid TOML: cannot declare ('execute',) twice"),
    ("[sandbox]\nmemory = \n", "course.toml:7: not valid TOML: invalid value"),
    ("[sandbox]\nmemroy = 1\n",
     "course.toml:7: sandbox.memroy: no such option in [sandbox]; rbtutor config lists the options and their keys"),
    ("[sandbox]\nnotebook_timeout = 1\n",
     "course.toml:7: sandbox.notebook_timeout: no such option in [sandbox] (execute_notebook_timeout is "
     "execute.notebook_timeout); rbtutor config lists the options and their keys"),
    ("[sandbx]\nmemory = 1\n",
     "course.toml:6: unknown section [sandbx]; expected one of [intake], [sandbox], [execute], [outputs], "
     "[feedback], [run], [late], [checks]"),
    ("[intake]\nmax_files = 10\n",
     "course.toml:7: intake.max_files: expected an option a course can set, got a constant of the code "
     "(rbtutor config marks the settable ones)"),
    ("[execute]\n", None),  # placeholder replaced below
    ("[sandbox]\nmemory = { size = 1 }\n",
     "course.toml:7: sandbox.memory: expected bytes as a whole number ≥ 0, got a table"),
], ids=["string-for-bytes", "negative", "fraction", "bool", "nan", "section-twice", "syntax", "unknown-key",
        "wrong-section", "unknown-section", "constant", "choice", "table"])
def test_each_error_is_one_line_with_its_line_and_exit_2(tmp_path, text, message):
    if message is None:  # a text option with fixed choices (the preamble's section, continued)
        text, message = ("shutdown_kernel = \"now\"\n", 'course.toml:6: execute.shutdown_kernel: expected one of '
                         '"graceful", "immediate", got "now"')
    done = rbtutor_config(scratch_course(tmp_path, PREAMBLE + text))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    assert done.stderr.splitlines() == [message]
    assert done.stdout == ""


def test_a_setting_outside_any_section_is_refused(tmp_path):
    done = rbtutor_config(scratch_course(tmp_path, "# top\nmemory = 1\n[sandbox]\n"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "course.toml:2: memory: a setting outside any section; expected it under one of [intake], [sandbox], "
        "[execute], [outputs], [feedback], [run], [late], [checks]"]


def test_an_option_in_both_files_is_refused_naming_both_places(tmp_path):
    course = scratch_course(tmp_path, PREAMBLE, "\nc.Execute.timeout = 30\n")
    done = rbtutor_config(course)
    line = (course / "nbgrader_config.py").read_text().splitlines().index("c.Execute.timeout = 30") + 1
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"course.toml:4: execute.cell_timeout: also set in nbgrader_config.py:{line} "
                                        "(c.Execute.timeout); set it in one place only"]
    # set some other way than by a plain assignment: found by comparing the loaded configuration
    scratch_course(tmp_path, PREAMBLE, "\nsetattr(get_config().Execute, 'timeout', 30)  # noqa: F821\n")
    done = rbtutor_config(course)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["course.toml:4: execute.cell_timeout: nbgrader_config.py makes "
                                        "c.Execute.timeout 30 after course.toml set it; set it in one place only"]


def test_key_lines_follow_sections_quotes_and_multi_line_strings():
    text = '[a]\nx = """\ny = 1\n"""\n"z" = 2\n[ b ]  # note\nx=3\n'
    assert key_lines(text) == {("a", None): 1, ("a", "x"): 2, ("a", "z"): 5, ("b", None): 6, ("b", "x"): 7}


def test_the_repository_course_toml_lists_every_settable_option_at_its_default():
    """The file is the template, sets nothing, and each commented key, uncommented, gives its default."""
    text = (ROOT / "course.toml").read_text()
    assert text == template()
    assert load_settings(ROOT).values == {}
    uncommented = "\n".join(line[2:] if re.match(r"# \w+ = ", line) and "(default: not set)" not in line else line
                             for line in text.splitlines())
    values, _ = parse_settings(uncommented)
    settable_names = {spec.name for spec in OPTIONS if settable(spec.name)}
    assert set(values) == settable_names - {"execute_seed_key"}
    for name, value in values.items():
        assert value == getattr(GRADING, name), name


def test_deployment_paths_hide_a_password(tmp_path):
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.options import deployment_rows

    rows = deployment_rows(CourseLayout(tmp_path), {"RBTUTOR_GRADEBOOK": "postgresql://grader:s3cret@db:5432/course"})
    shown = {row["variable"]: row for row in rows}
    assert shown["RBTUTOR_GRADEBOOK"]["value"] == "postgresql://grader:***@db:5432/course"
    assert shown["RBTUTOR_GRADEBOOK"]["source"] == "$RBTUTOR_GRADEBOOK"
    assert shown["RBTUTOR_EXCHANGE"] == {"variable": "RBTUTOR_EXCHANGE", "value": str(tmp_path / "exchange"),
                                         "source": "default", "description": "the exchange folder"}


def run_config(*args, cwd=ROOT):
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(Path.home())}
    done = subprocess.run([sys.executable, "-m", "rbtutor.course", "config", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_json_of_this_course_shows_its_defaults():
    printed = json.loads(run_config("--json", "--root", str(ROOT)))
    assert printed["course"] == str(ROOT)
    rows = {row["name"]: row for row in printed["options"]}
    assert list(rows) == [spec.name for spec in OPTIONS]
    for spec in OPTIONS:
        assert rows[spec.name]["default"] == getattr(GRADING, spec.name)
        assert rows[spec.name]["unit"] == spec.metadata["unit"]
        assert rows[spec.name]["description"] == spec.metadata["help"]
        assert rows[spec.name]["source"] == "default", spec.name  # this course's course.toml sets nothing


def test_cli_table_outside_a_course_says_it_shows_the_defaults(tmp_path):
    out = run_config(cwd=tmp_path)
    assert "the defaults" in out.splitlines()[0]
    for spec in OPTIONS:
        assert re.search(rf"^{spec.name} ", out, re.M), f"{spec.name} missing from the table"


def test_nbgrader_s_own_command_stops_on_a_bad_course_toml(tmp_path):
    """nbgrader logs an error raised by a configuration file and goes on without it (so without the sandbox):
    configure stops the process instead, with the one line and status 2."""
    course = scratch_course(tmp_path, PREAMBLE + "[sandbox]\nmemory = \"4G\"\n")
    # JUPYTER_NO_CONFIG makes a configuration folder in TMPDIR: the test's own, so that none is left in /tmp
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(Path.home()), "JUPYTER_NO_CONFIG": "1",
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "db", "student", "list"],
                          capture_output=True, text=True, cwd=course, env=env, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'course.toml:7: sandbox.memory: expected bytes as a whole number ≥ 0, got "4G"' in done.stderr.splitlines()
    assert not (course / "gradebook.db").exists()


@pytest.mark.parametrize("verb", [["feedback"], ["report"], ["grade"],
                                  ["export", "--to", "canvas", "--roster", "r.csv", "--out", "o.csv"]])
def test_every_verb_stops_on_a_bad_course_toml_with_its_one_line(tmp_path, verb):
    course = scratch_course(tmp_path, PREAMBLE + "[sandbox]\nmemory = \"4G\"\n")
    done = subprocess.run([str(Path(sys.executable).parent / "rbtutor"), *verb], capture_output=True, text=True,
                          cwd=course, env={**os.environ, "JUPYTER_NO_CONFIG": "1", "TMPDIR": str(tmp_path)},
                          timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    [line] = done.stderr.splitlines()  # one line, whichever step of the verb read the file
    assert re.fullmatch(r'rbtutor(?: [a-z]+)?: course\.toml:7: sandbox\.memory: expected bytes as a whole number '
                        r'≥ 0, got "4G"', line), line
