"""`python -m rbtutor key`: formats, variants for another ship, and errors; `rbtutor.course` arguments."""

import json
import subprocess
import sys

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
    (("key", "--problem", "12"), "expected problem numbers from 1 to 11"),
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
