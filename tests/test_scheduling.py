"""How the suite is shared out between pytest-xdist's workers (tests/conftest.py): the tests that
use the machine's state, and only those, go to the one worker that runs them one after another;
they are handed out first, the PDF's next, and the files that read the built book last."""

import subprocess
import sys
import textwrap

from conftest import MACHINE_TESTS, ROOT, machine_tests, scope_of


def test_a_file_s_pytestmark_puts_all_its_tests_on_the_machine_s_worker():
    single = 'import pytest\npytestmark = pytest.mark.xdist_group("machine")\ndef test_a(): pass\n'
    listed = 'import pytest\npytestmark = [pytest.mark.slow, pytest.mark.xdist_group("machine")]\n'
    assert machine_tests(single) == {"*"}
    assert machine_tests(listed) == {"*"}
    assert scope_of("tests/test_hub.py::test_assignment_loop_on_the_hub[sqlite]") == "machine"
    assert MACHINE_TESTS["test_hub.py"] == {"*"}


def test_one_marked_test_goes_to_the_machine_s_worker_and_the_rest_of_its_file_does_not():
    source = textwrap.dedent('''
        import pytest

        @pytest.mark.xdist_group("machine")
        def test_on_the_machine(tmp_path): pass

        @pytest.mark.xdist_group("elsewhere")
        def test_other_group(): pass

        @pytest.mark.parametrize("x", [1])
        def test_anywhere(x): pass
        ''')
    assert machine_tests(source) == {"test_on_the_machine"}
    marked = "tests/test_extensions.py::test_the_hub_keeps_the_due_dates_where_the_fetch_service_reads_them"
    unmarked = "tests/test_extensions.py::test_extensions_and_a_moved_deadline_on_postgresql"
    assert scope_of(marked) == "machine"
    assert scope_of(unmarked) == "tests/test_extensions.py"
    assert scope_of(unmarked + "[postgres]") == "tests/test_extensions.py"


def test_a_file_without_the_mark_is_its_own_unit():
    assert machine_tests('import pytest\n@pytest.mark.slow\ndef test_a(): pass\n') == set()
    assert scope_of("tests/test_judge.py::test_sign") == "tests/test_judge.py"
    assert scope_of("rbtutor/kinematics.py::rbtutor.kinematics.rotation") == "rbtutor/kinematics.py"


def test_the_machine_s_tests_come_first_then_the_pdf_s_and_the_book_s_last():
    """The order in which the scheduler hands the files out (pytest_collection_modifyitems), as collected."""
    files = ["tests/test_book.py", "tests/test_library.py", "tests/test_pdf.py", "tests/test_hub.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    order = list(dict.fromkeys(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line))
    assert order == ["tests/test_hub.py", "tests/test_pdf.py", "tests/test_library.py", "tests/test_book.py"]
