"""A regular (non-editable) install grades a class from a course folder.

rbtutor is built as a wheel and installed into a new virtual environment, without the
checkout on its path; the dependencies come from this environment's site-packages (added
by a ``.pth`` line, which does not process the editable-install hooks found there). In a
course folder made from scratch, the installed package renders, generates and grades.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from conftest import require_sandbox
from test_assignments import answered, grade_of

ROOT = Path(__file__).resolve().parents[1]
NAME = "problem03"
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402 - the hub's set-up copies the package's files the same way


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A venv with rbtutor installed from a wheel; return its python."""
    require_sandbox()
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"  # built from a copy, as the hub's set-up does: setuptools leaves build/ beside it
    source.mkdir()
    hubctl.package_copy(source)
    wheels = tmp / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-w", str(wheels), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("rbtutor-*.whl"))
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    where = subprocess.run([str(python), "-c", "import rbtutor; print(rbtutor.__file__)"], cwd=tmp,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(site)), f"rbtutor imported from {where}, not from the wheel install"
    return python


def test_the_wheel_states_its_licence(installed):
    """The installed metadata says MIT as an SPDX expression and carries both licence files."""
    from importlib.metadata import Distribution

    site = installed.parent.parent / "lib"
    (info,) = site.glob("python3*/site-packages/rbtutor-*.dist-info")
    metadata = Distribution.at(info).metadata
    assert metadata["License-Expression"] == "MIT"
    assert sorted(metadata.get_all("License-File")) == ["LICENSE", "LICENSE-TEXT.md"]
    assert (info / "licenses" / "LICENSE").read_text().startswith("MIT License")


def test_the_wheel_carries_the_key_and_the_data(installed):
    out = subprocess.run([str(installed), "-m", "rbtutor", "key", "--problem", "3", "--format", "json"],
                         capture_output=True, text=True, timeout=120, cwd=installed.parent)
    assert out.returncode == 0, out.stderr
    assert "p3.b.K" in out.stdout, out.stderr


def test_a_course_folder_is_graded_by_the_installed_package(installed, tmp_path):
    course = tmp_path / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY", "PYTHON"))}
    env["PATH"] = f"{installed.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"

    def course_cli(*args):
        return subprocess.run([str(installed), "-m", "rbtutor.course", *args], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)

    assert course_cli("render").returncode == 0
    generated = course_cli("generate")
    assert generated.returncode == 0, generated.stdout[-2000:] + generated.stderr[-2000:]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    for student, answer in (("solver", lambda nb: answered(nb, source)), ("blank", lambda nb: nb)):
        folder = course / "submitted" / student / NAME
        folder.mkdir(parents=True)
        released = nbformat.read(course / "release" / NAME / f"{NAME}.ipynb", as_version=4)
        nbformat.write(answer(released), folder / f"{NAME}.ipynb")
        (folder / "timestamp.txt").write_text("2026-12-01 12:00:00.000000 UTC")
    graded = course_cli("grade")
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert grade_of(course, NAME, "solver", "p3_b_K") == (2.0, 2.0)
    assert grade_of(course, NAME, "blank", "p3_b_K") == (0.0, 2.0)
    assert (course / "feedback" / "solver" / NAME / f"{NAME}.html").is_file()
