"""`python -m rbtutor key`: formats, variants for another ship, and errors; `rbtutor.course` arguments."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rbtutor.problems import answer_key, load_data, read_yaml


def run(*args):
    return subprocess.run([sys.executable, "-m", "rbtutor", *args], capture_output=True, text=True)


def test_formats_agree():
    as_json = json.loads(run("key", "--format", "json", "--problem", "1").stdout)
    as_yaml = read_yaml(run("key", "--format", "yaml", "--problem", "1").stdout)
    table = run("key", "--problem", "1").stdout
    assert as_json == as_yaml
    assert set(as_json) == {k for k in answer_key(problems=[1])}
    assert all(name in table for name in as_json)


def test_variant_for_another_ship(tmp_path):
    """A heavier ship with G higher up: the key follows the data, consistently."""
    variant = tmp_path / "other_ship.yaml"
    variant.write_text("vessel:\n  mass: 8.0e6\n  r_g: [-1.0, 0.0, -0.5]\nturn:\n  gm: 2.0\n")
    key = json.loads(run("key", "--data", str(variant), "--format", "json").stdout)
    reference = answer_key()
    data = load_data(variant)
    m, z_g, (u, r), gm = 8.0e6, -0.5, (data["turn"]["nu"][0], data["turn"]["nu"][5]), 2.0
    assert key["p3.b.K"]["value"] == pytest.approx(-m * z_g * u * r)
    assert key["p3.c.phi_rad"]["value"] == pytest.approx(z_g * u * r / (9.81 * gm))
    assert key["p1.b.M_RB"]["value"][0][4] == pytest.approx(m * z_g)
    assert key["p3.b.K"]["value"] != pytest.approx(reference["p3.b.K"].value)
    assert key["p8.a.I_x"]["value"] == pytest.approx(reference["p8.a.I_x"].value)  # module unchanged


@pytest.mark.parametrize(("args", "message"), [
    (("key", "--data", "/no/such/file.yaml"), "No such file"),
    (("key", "--problem", "13"), "expected problem numbers from 1 to 12"),
])
def test_errors_are_reported(args, message):
    out = run(*args)
    assert out.returncode == 2
    assert message in out.stderr


def test_bad_variant_value(tmp_path):
    variant = tmp_path / "bad.yaml"
    variant.write_text("vessel:\n  mass: -1.0\n")
    out = run("key", "--data", str(variant))
    assert out.returncode == 2
    assert "expected mass > 0" in out.stderr


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_grade_refuses_a_worker_count_below_one(jobs):
    out = subprocess.run([sys.executable, "-m", "rbtutor.course", "grade", "--jobs", jobs],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert f"--jobs must be at least 1, got {jobs}" in out.stderr


def test_course_commands_do_without_the_iri_grammar():
    # jsonschema compiles rfc3987_syntax's grammar at import when it can (0.85 s of CPU per process);
    # the course's processes leave that checker out, and notebooks still validate
    code = ("import sys, rbtutor.course, nbformat, jsonschema\n"
            "nbformat.validate(nbformat.v4.new_notebook())\n"
            "print(sys.modules.get('rfc3987_syntax') is None, 'lark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"], out


def test_a_course_verb_imports_only_what_it_runs(tmp_path):
    """The course's command line loads nbgrader, nbconvert and SciPy only for a verb that uses them:
    `rbtutor config` outside a course needs none of them, and a verb refused there stops before them."""
    code = ("import sys\nfrom rbtutor.course.cli import main\n"
            "status = main(sys.argv[1:], prog='rbtutor')\n"
            "print([m for m in ('nbgrader', 'nbconvert', 'scipy') if m in sys.modules], file=sys.stderr)\n"
            "sys.exit(status)")
    config = subprocess.run([sys.executable, "-c", code, "config", "--json"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert config.returncode == 0, config.stderr
    assert json.loads(config.stdout)  # the defaults, all the same
    assert config.stderr.strip().splitlines()[-1] == "[]"
    report = subprocess.run([sys.executable, "-c", code, "report"], capture_output=True, text=True, cwd=tmp_path)
    assert report.returncode == 2  # no course here: refused before any import
    assert "course" in report.stderr
    assert report.stderr.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- the rbtutor command

RBTUTOR = Path(sys.executable).with_name("rbtutor")


def rbtutor(*args, cwd=None):
    """The installed console script, as a user types it."""
    return subprocess.run([str(RBTUTOR), *args], capture_output=True, text=True, cwd=cwd)


def test_the_command_is_installed_and_lists_every_verb_with_an_example():
    from rbtutor.cli import VERBS

    assert RBTUTOR.exists(), "pyproject.toml's [project.scripts] installs rbtutor beside the interpreter"
    out = rbtutor("--help")
    assert out.returncode == 0, out.stderr
    for verb in VERBS:
        assert f"\n  {verb} " in out.stdout
    assert "example: rbtutor" in out.stdout
    assert rbtutor().returncode == 2  # no verb: the list, and status 2
    same = subprocess.run([sys.executable, "-m", "rbtutor", "--help"], capture_output=True, text=True)
    assert same.stdout == out.stdout  # python -m rbtutor is the same command


@pytest.mark.parametrize("verb", ["try", "due", "key", "data", "render", "assign", "collect", "similarity", "grade",
                                  "feedback", "export", "report", "config", "checks", "hub"])
def test_every_verb_has_help_with_an_example(verb):
    out = rbtutor(verb, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: rbtutor {verb}")
    assert "example: " in out.stdout
    assert f"rbtutor {verb}" in out.stdout.split("example: ", 1)[1]


@pytest.mark.parametrize(("args", "said"), [
    (("grde",), "no verb 'grde'; did you mean 'grade'?"),
    (("grade", "--jbs", "2"), "rbtutor grade: unrecognized arguments: --jbs 2"),
    (("export", "--to", "excel", "--roster", "r.csv", "--out", "x"),
     "rbtutor export: argument --to: invalid choice"),
    (("collect",), "rbtutor collect: the following arguments are required: assignment"),
    (("key", "--problem", "twelve"), "rbtutor key: argument --problem: invalid int value"),
    (("checks", "now"), "checks takes no arguments"),
    (("--jobs", "3"), "expected a verb first"),
])
def test_a_mistyped_verb_or_option_is_one_line_and_status_two(args, said):
    out = rbtutor(*args)
    assert out.returncode == 2
    assert said in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""


def test_a_course_verb_outside_a_course_says_so_in_one_line(tmp_path):
    out = rbtutor("grade", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"rbtutor: no nbgrader_config.py in {tmp_path} or above it: run this from a course folder or pass --root"]


def test_the_old_names_still_work():
    for old, new in (("generate", "assign"), ("return-feedback", "feedback")):
        assert rbtutor(old, "--help").stdout.replace(old, new) == rbtutor(new, "--help").stdout.replace(old, new)


def test_the_makefile_drives_the_course_with_the_command():
    """`make grade`, `make report`, `make export`, `make assignments` and `make hub` call rbtutor."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "-m rbtutor.course" not in makefile
    assert "hub/hubctl.py up" not in makefile
    for verb in ("render", "assign", "grade", "report", "export", "hub up", "hub down"):
        assert f"$(RBTUTOR) {verb}" in makefile


def test_release_puts_one_assignment_into_the_exchange_and_refuses_bad_input(tmp_path, capsys):
    """rbtutor release: unknown assignment or no student version yet, one line and 2; released,
    the exchange holds it; again without --force, 1 and a line that says so; with --force, 0."""
    import shutil

    from rbtutor.course import CourseLayout
    from rbtutor.course.cli import main
    from rbtutor.course.trial import new_course

    root = Path(__file__).resolve().parents[1]
    layout = new_course(CourseLayout(root), "problem03", tmp_path)
    course = str(layout.root)

    def run(*args):
        status = main(["--root", course, "release", *args])
        return status, capsys.readouterr()

    status, said = run("problem99")
    assert status == 2
    assert said.err.count("\n") == 1
    assert "expected an assignment of the course (problem03)" in said.err
    status, said = run("problem03")
    assert status == 2
    assert "run 'rbtutor assign' first" in said.err
    (layout.release / "problem03").mkdir(parents=True)  # what rbtutor assign writes, in short
    shutil.copy2(layout.source_notebook("problem03"), layout.release / "problem03")
    status, said = run("problem03")
    assert status == 0, said.err
    assert "students can fetch it now" in said.out
    assert (layout.exchange / "rbtutor" / "outbound" / "problem03" / "problem03.ipynb").is_file()
    status, said = run("problem03")
    assert status == 1, said.err
    assert "already released; --force releases it again" in said.err, said.err
    status, said = run("problem03", "--force")
    assert status == 0, said.err
