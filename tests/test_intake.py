"""Intake: a hostile submission folder is refused piece by piece, never followed, never trusted.

Pure unit tests on ``tmp_path``: no kernel, no nbgrader run. Each hostile case
checks the event that names it, that nothing of the refused file reached the
copy, and (where the danger is to read it) that it was not read.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import socket
import threading
import time
from pathlib import Path

import nbformat
import pytest

from rbtutor.grading import intake
from rbtutor.grading.intake import FLOOD_FACTOR, Intake, Limits, collect, cut_text, source_copy, take_in
from rbtutor.grading.intake.copies import _squeeze
from rbtutor.grading.intake.files import Walker

ROOT = Path(__file__).resolve().parents[1]
SOURCE03 = ROOT / "exercises" / "problem03" / "problem03.ipynb"
SECRET = "instructor-only-secret-4711"


# --------------------------------------------------------------------------- helpers


def notebook(*sources, cell_type="code", **meta) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) if cell_type == "code" else nbformat.v4.new_markdown_cell(s)
                for s in sources]
    nb.metadata.update(meta)
    return nb


def write_nb(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb))
    return path


def submission(tmp_path: Path) -> Path:
    """An honest submission: a notebook, a data file, a file in a sub-folder."""
    src = tmp_path / "submission"
    write_nb(src / "problem03.ipynb", notebook("x = 1", "print(x)"))
    (src / "data.csv").write_text("1,2\n3,4\n")
    (src / "figs").mkdir()
    (src / "figs" / "note.txt").write_text("plot later\n")
    return src


def outside(tmp_path: Path) -> Path:
    """A file of the instructor's, outside every submission."""
    secret = tmp_path / "instructor" / "answer_key.yaml"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text(f"key: {SECRET}\n")
    return secret


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def no_secret(dest: Path, result: Intake) -> None:
    """Nothing of the instructor's file reached the copy or any message."""
    for path in dest.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    for e in result.events:
        assert SECRET not in json.dumps(e)


@pytest.fixture
def opens(monkeypatch):
    """Every os.open call (path, flags), passed through to the real one."""
    calls = []
    real = os.open

    def spy(path, flags, *args, **kwargs):
        calls.append((path if isinstance(path, int) else os.fsdecode(path), flags))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return calls


def source03() -> dict:
    return json.loads(SOURCE03.read_text())


def solution_cells(nb) -> list:
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]


def strip_markers(nb) -> dict:
    """The source notebook with each solution cell reduced to its solution text (no marker lines)."""
    nb = copy.deepcopy(nb)
    for cell in solution_cells(nb):
        text = "".join(cell["source"])
        cell["source"] = "\n".join(line for line in text.splitlines() if "SOLUTION" not in line)
    return nb


def released(nb) -> dict:
    """The source as a student receives it: solution cells replaced by nbgrader's stubs."""
    nb = copy.deepcopy(nb)
    for cell in solution_cells(nb):
        cell["source"] = ("# YOUR CODE HERE\nraise NotImplementedError()" if cell["cell_type"] == "code"
                          else "YOUR ANSWER HERE")
    return nb


def by_id(nb, grade_id):
    return next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


# --------------------------------------------------------------------------- plain


def test_plain_submission_is_taken_whole(tmp_path, opens):
    src = submission(tmp_path)
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.events == []
    assert sorted(result.taken) == ["data.csv", "figs/note.txt", "problem03.ipynb"]
    assert files_under(dest) == sorted(result.taken)
    assert (dest / "data.csv").read_bytes() == (src / "data.csv").read_bytes()
    assert (dest / "figs" / "note.txt").read_bytes() == (src / "figs" / "note.txt").read_bytes()
    got = nbformat.read(dest / "problem03.ipynb", as_version=4)
    assert [c.source for c in got.cells] == ["x = 1", "print(x)"]
    assert (dest.stat().st_mode & 0o777) == 0o700
    # every file and folder of the submission was opened, and without following links
    names = {"problem03.ipynb", "data.csv", "figs", "note.txt", str(src)}
    seen = {path for path, _ in opens if path in names}
    assert seen == names
    assert all(flags & os.O_NOFOLLOW for path, flags in opens if path in names)


def test_dest_must_be_new_or_empty_and_not_a_link(tmp_path):
    src = submission(tmp_path)
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.txt").write_text("old")
    with pytest.raises(ValueError, match="new or empty"):
        take_in(src, full)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere_dir")
    (tmp_path / "elsewhere_dir").mkdir()
    with pytest.raises(ValueError, match="new or empty"):
        take_in(src, link)
    assert list((tmp_path / "elsewhere_dir").iterdir()) == []
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    assert take_in(src, empty).events == []
    assert (empty.stat().st_mode & 0o777) == 0o700


def test_submission_folder_that_is_a_link_is_refused(tmp_path):
    src = submission(tmp_path)
    link = tmp_path / "link_to_submission"
    link.symlink_to(src)
    result = take_in(link, tmp_path / "copy")
    assert result.kinds() == ["link_refused"]
    assert result.taken == []


# --------------------------------------------------------------------------- links and special files


def test_symlinked_notebooks_are_refused_and_not_read(tmp_path, opens):
    src = submission(tmp_path)
    secret = outside(tmp_path)
    (src / "problem03.ipynb").unlink()
    (src / "problem03.ipynb").symlink_to(SOURCE03)            # the instructor's source notebook
    (src / "extra.ipynb").symlink_to(secret)                   # any file outside
    dest = tmp_path / "copy"
    result = take_in(src, dest, sources={"problem03": source03()})
    refused = {e["path"]: e for e in result.events}
    assert refused["problem03.ipynb"]["kind"] == "link_refused"
    assert refused["extra.ipynb"]["kind"] == "link_refused"
    assert "is a symbolic link" in refused["extra.ipynb"]["message"]
    assert "problem03.ipynb" not in result.taken
    assert "extra.ipynb" not in result.taken
    assert not (dest / "problem03.ipynb").exists()
    assert not (dest / "extra.ipynb").exists()
    assert [p for p, _ in opens if p in ("problem03.ipynb", "extra.ipynb")] == []  # never opened
    no_secret(dest, result)


def test_symlinked_folder_is_refused(tmp_path):
    src = submission(tmp_path)
    secret = outside(tmp_path)
    (src / "solutions").symlink_to(secret.parent, target_is_directory=True)
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.kinds() == ["link_refused"]
    assert result.events[0]["path"] == "solutions"
    assert not (dest / "solutions").exists()
    assert not any(p.startswith("solutions") for p in result.taken)
    no_secret(dest, result)


def test_hard_link_to_a_file_outside_is_refused(tmp_path):
    src = submission(tmp_path)
    secret = outside(tmp_path)
    os.link(secret, src / "notes.txt")
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.kinds() == ["hard_link_refused"]
    assert result.events[0]["links"] == 2
    assert "notes.txt" not in result.taken
    no_secret(dest, result)


def _within(seconds, fn):
    """Run fn in a thread; fail (instead of hanging the suite) if it does not return in time."""
    box = {}

    def run():
        box["result"] = fn()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked?)"
    return box["result"]


def test_fifo_is_refused_without_blocking(tmp_path):
    src = submission(tmp_path)
    os.mkfifo(src / "pipe.ipynb")
    result = _within(60, lambda: take_in(src, tmp_path / "copy"))
    assert result.kinds() == ["special_file_refused"]
    assert result.events[0]["type"] == "fifo"
    assert "pipe.ipynb" not in result.taken


def test_file_swapped_for_a_fifo_before_open_does_not_block(tmp_path, monkeypatch):
    src = submission(tmp_path)
    real = os.open

    def swap(path, flags, *args, **kwargs):
        if path == "data.csv" and "dir_fd" in kwargs and not os.path.exists(src / "swapped"):
            (src / "swapped").write_text("")
            os.unlink("data.csv", dir_fd=kwargs["dir_fd"])
            os.mkfifo("data.csv", dir_fd=kwargs["dir_fd"])
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap)
    result = _within(60, lambda: take_in(src, tmp_path / "copy"))
    assert (src / "swapped").exists()  # the swap happened
    assert "data.csv" not in result.taken
    assert result.kinds() == ["special_file_refused"]


def test_unix_socket_is_refused(tmp_path, monkeypatch):
    src = submission(tmp_path)
    monkeypatch.chdir(src)  # a short relative path: socket paths are limited to 108 bytes
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("kernel.sock")
        result = take_in(src, tmp_path / "copy")
    assert result.kinds() == ["special_file_refused"]
    assert result.events[0]["type"] == "socket"
    assert "kernel.sock" not in result.taken


def test_symlink_swapped_in_between_listing_and_open_is_caught(tmp_path, monkeypatch):
    """TOCTOU: the file was regular when listed, a link when opened; O_NOFOLLOW refuses it."""
    src = submission(tmp_path)
    secret = outside(tmp_path)
    real = os.open
    swapped = []

    def swap(path, flags, *args, **kwargs):
        if path == "problem03.ipynb" and "dir_fd" in kwargs and not swapped:
            os.unlink(path, dir_fd=kwargs["dir_fd"])
            os.symlink(secret, path, dir_fd=kwargs["dir_fd"])
            swapped.append(path)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap)
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert swapped == ["problem03.ipynb"]
    assert result.kinds() == ["link_refused"]
    assert "when it was opened" in result.events[0]["message"]
    assert "problem03.ipynb" not in result.taken
    no_secret(dest, result)


def test_file_replaced_by_another_file_between_listing_and_open_is_caught(tmp_path, monkeypatch):
    src = submission(tmp_path)
    real = os.open
    swapped = []

    def swap(path, flags, *args, **kwargs):
        if path == "data.csv" and "dir_fd" in kwargs and not swapped:
            (src / "other.tmp").write_text("other")
            os.rename(src / "other.tmp", src / "data.csv")  # a new inode under the listed name
            swapped.append(path)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap)
    result = take_in(src, tmp_path / "copy")
    assert swapped
    assert result.kinds() == ["changed_while_read"]
    assert "data.csv" not in result.taken


# --------------------------------------------------------------------------- counts, depth, sizes, names


def test_ten_thousand_files_are_bounded_work(tmp_path, monkeypatch):
    src = tmp_path / "flood"
    src.mkdir()
    for i in range(10_000):
        os.close(os.open(src / f"f{i:05d}.txt", os.O_WRONLY | os.O_CREAT, 0o644))
    stats = []
    real_stat = os.stat

    def counting(*args, **kwargs):
        stats.append(args[0])
        return real_stat(*args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    limits = Limits()
    start = time.monotonic()
    dest = tmp_path / "copy"
    result = take_in(src, dest, limits=limits)
    elapsed = time.monotonic() - start
    assert elapsed < 60  # safety net only; the bound that matters is the count below
    assert len(stats) <= FLOOD_FACTOR * limits.max_files + 5
    flood = [e for e in result.events if e["kind"] == "too_many_files"]
    assert len(flood) == 1
    assert flood[0]["flood"] is True
    assert len(result.taken) == limits.max_files
    assert len(list(dest.iterdir())) == limits.max_files


def test_more_files_than_the_cap_without_a_flood(tmp_path):
    src = tmp_path / "many"
    src.mkdir()
    for i in range(10):
        (src / f"f{i}.txt").write_text(str(i))
    write_nb(src / "problem03.ipynb", notebook("x = 1"))
    result = take_in(src, tmp_path / "copy", limits=Limits(max_files=4))
    assert result.kinds() == ["too_many_files"]
    assert result.events[0]["flood"] is False
    assert result.events[0]["refused"] == 7
    assert "problem03.ipynb" in result.taken  # notebooks are taken first
    assert len(result.taken) == 4


def test_deep_nesting_is_not_listed(tmp_path):
    src = submission(tmp_path)
    folder = src
    for level in range(1, 9):
        folder = folder / f"d{level}"
        folder.mkdir()
        (folder / "f.txt").write_text(str(level))
    result = take_in(src, tmp_path / "copy", limits=Limits(max_depth=4))
    assert result.kinds() == ["too_deep"]
    assert result.events[0]["path"] == "d1/d2/d3/d4/d5"
    assert "d1/d2/d3/d4/f.txt" in result.taken
    assert not any(p.startswith("d1/d2/d3/d4/d5") for p in result.taken)


def test_sparse_100_mb_file_is_refused_without_reading_it(tmp_path, monkeypatch):
    src = submission(tmp_path)
    with open(src / "big.npy", "wb") as fh:
        fh.truncate(100 * 1024 * 1024)
    read = []
    real_read = os.read

    def counting(fd, n):
        data = real_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting)
    result = take_in(src, tmp_path / "copy")
    assert result.kinds() == ["too_large"]
    assert result.events[0]["path"] == "big.npy"
    assert result.events[0]["bytes"] == 100 * 1024 * 1024
    assert result.events[0]["cap"] == Limits().max_file_bytes  # refused for itself, not for the total
    assert sum(read) < 1024 * 1024  # only the small honest files were read
    assert "big.npy" not in result.taken


def test_file_that_grows_after_listing_is_read_only_to_the_cap(tmp_path, monkeypatch):
    src = tmp_path / "grow"
    src.mkdir()
    (src / "log.txt").write_text("small")
    real = os.open
    grown = []

    def grow(path, flags, *args, **kwargs):
        if path == "log.txt" and "dir_fd" in kwargs and not grown:
            with open(src / "log.txt", "a") as fh:
                fh.write("x" * 50_000)
            grown.append(path)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", grow)
    result = take_in(src, tmp_path / "copy", limits=Limits(max_file_bytes=1000))
    assert grown
    assert result.kinds() == ["too_large"]
    assert result.taken == []


def test_total_size_is_capped(tmp_path):
    src = tmp_path / "total"
    src.mkdir()
    for name in ("a.bin", "b.bin", "c.bin"):
        (src / name).write_bytes(b"\0" * 600)
    result = take_in(src, tmp_path / "copy", limits=Limits(max_total_bytes=1500))
    assert result.kinds() == ["too_large"]
    assert result.taken == ["a.bin", "b.bin"]
    assert result.events[0]["path"] == "c.bin"
    assert result.events[0]["cap"] == 1500


def test_bad_names_are_refused(tmp_path):
    src = submission(tmp_path)
    (src / "evil\x1b[31m.txt").write_text("escape")
    (src / "new\nline.txt").write_text("newline")
    os.close(os.open(os.fsencode(src) + b"/bad\xff.txt", os.O_WRONLY | os.O_CREAT, 0o644))
    (src / ("n" * 40 + ".txt")).write_text("long")
    result = take_in(src, tmp_path / "copy", limits=Limits(max_name_bytes=32))
    assert result.kinds() == ["bad_name"] * 4
    for e in result.events:
        assert e["message"].isprintable()
    assert sorted(result.taken) == ["data.csv", "figs/note.txt", "problem03.ipynb"]


# --------------------------------------------------------------------------- notebooks


def test_five_megabyte_cell_source_is_cut_at_a_character_boundary(tmp_path):
    src = tmp_path / "big_cell"
    huge = "€" * (5 * 1024 * 1024 // 3)  # 3 bytes a character; 100 000 is not a multiple of 3
    write_nb(src / "problem03.ipynb", notebook("x = 1", "# " + huge))
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.kinds() == ["cell_cut"]
    assert result.events[0]["cell"] == 1
    assert result.events[0]["bytes"] == len(("# " + huge).encode())
    kept = nbformat.read(dest / "problem03.ipynb", as_version=4).cells[1].source
    size = len(kept.encode("utf-8"))
    assert size <= 100_000
    assert size > 100_000 - 3
    assert ("# " + huge).startswith(kept)
    assert huge[:10] not in result.events[0]["message"]


def test_cut_text_never_splits_a_character():
    for text in ("a" * 10, "é" * 10, "€" * 10, "😀" * 10, "a€é😀" * 5):
        for cap in range(0, 25):
            cut = cut_text(text, cap)
            assert len(cut.encode()) <= cap
            assert text.startswith(cut)
            assert len(cut.encode()) > cap - 4 or cut == text


def test_too_many_cells_are_dropped(tmp_path):
    src = tmp_path / "cells"
    write_nb(src / "problem03.ipynb", notebook(*[f"x{i} = {i}" for i in range(15)]))
    dest = tmp_path / "copy"
    result = take_in(src, dest, limits=Limits(max_cells=10))
    assert result.kinds() == ["too_many_cells"]
    assert result.events[0]["cells"] == 15
    assert len(nbformat.read(dest / "problem03.ipynb", as_version=4).cells) == 10


def test_rebuilt_notebook_keeps_only_what_grading_needs(tmp_path):
    """Outputs and unknown fields go, list sources are joined, bad or repeated cell ids are replaced."""
    png = {"image/png": "iVBORw0KGgo="}
    cells = [
        {"cell_type": "code", "id": "good-id", "metadata": {"tags": ["keep"]}, "source": ["a = 1\n", "b = 2"],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": SECRET}], "execution_count": 7,
         "attachments": {"x.png": png}, "extra": SECRET},
        {"cell_type": "markdown", "id": "good-id", "metadata": {}, "source": "![x](attachment:x.png)",
         "attachments": {"x.png": png}},
        {"cell_type": "raw", "id": "not a valid id!", "metadata": {}, "source": "raw text"},
    ]
    src = tmp_path / "fields"
    src.mkdir()
    (src / "problem03.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                     "cells": cells}))
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.kinds() == []
    kept = json.loads((dest / "problem03.ipynb").read_text())
    code, markdown, raw = kept["cells"]
    assert "".join(code["source"]) == "a = 1\nb = 2"  # nbformat writes a source as a list of lines
    assert code["outputs"] == []
    assert code["execution_count"] is None
    assert code["metadata"] == {"tags": ["keep"]}
    assert code["id"] == "good-id"
    assert "attachments" not in code
    assert "extra" not in code
    assert markdown["attachments"] == {"x.png": png}
    assert markdown["id"] not in ("good-id", "")
    assert raw["id"] != "not a valid id!"
    assert len({code["id"], markdown["id"], raw["id"]}) == 3
    assert SECRET not in (dest / "problem03.ipynb").read_text()


def test_notebook_before_minor_5_gets_no_cell_ids(tmp_path):
    src = tmp_path / "old_minor"
    src.mkdir()
    (src / "problem03.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {},
                                                     "cells": [{"cell_type": "code", "metadata": {},
                                                                "source": "x = 1", "id": "abc"}]}))
    result = take_in(src, tmp_path / "copy")
    assert result.kinds() == []
    kept = json.loads((tmp_path / "copy" / "problem03.ipynb").read_text())
    assert kept["nbformat_minor"] == 4
    assert "id" not in kept["cells"][0]


def test_attachments_and_metadata_are_capped_and_nbgrader_entries_kept(tmp_path):
    """Issue 33: a 12 MB attachment and 2 MB of metadata used to be stored as they came."""
    grade = {"grade": True, "grade_id": "p1_words", "points": 2, "solution": True, "locked": False,
             "schema_version": 3}
    junk = SECRET * 60_000  # about 1.6 MB
    cells = [
        {"cell_type": "markdown", "metadata": {"nbgrader": grade, "junk": junk}, "source": "answer",
         "attachments": {"big.png": {"image/png": "iVBORw0K" * 250_000}}},
        {"cell_type": "markdown", "metadata": {"tags": ["small"]}, "source": "![x](attachment:x.png)",
         "attachments": {"x.png": {"image/png": "iVBORw0KGgo="}}},
        {"cell_type": "code", "metadata": {"nbgrader": {**grade, "grade_id": "p1_code", "junk": junk}},
         "source": "x = 1"},
    ]
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"}, "junk": junk}
    src = tmp_path / "stuffed"
    src.mkdir()
    (src / "problem03.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": meta,
                                                     "cells": cells}))
    result = take_in(src, tmp_path / "copy")
    assert result.kinds() == ["metadata_cut", "metadata_cut", "attachments_cut", "metadata_cut"]
    assert [e.get("cell") for e in result.events] == [None, 0, 0, 2]
    assert result.events[1]["dropped"] == ["junk"]
    assert result.events[2]["grade_id"] == "p1_words"
    text = (tmp_path / "copy" / "problem03.ipynb").read_text()
    assert len(text) < 10_000
    assert SECRET not in text
    kept = json.loads(text)
    assert kept["metadata"] == {k: meta[k] for k in ("kernelspec", "language_info")}
    first, second, code = kept["cells"]
    assert first["metadata"] == {"nbgrader": grade}
    assert "attachments" not in first
    assert second["attachments"] == cells[1]["attachments"]
    assert second["metadata"] == {"tags": ["small"]}
    assert code["metadata"] == {"nbgrader": {**grade, "grade_id": "p1_code"}}


@pytest.mark.parametrize("content", [
    f"{{not json {SECRET}".encode(),
    json.dumps([SECRET]).encode(),
    json.dumps({"nbformat": 3, "cells": [], "note": SECRET}).encode(),
    json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": {"a": SECRET}, "metadata": {}}).encode(),
    json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                "cells": [{"cell_type": "evil", "source": SECRET}]}).encode(),
    json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                "cells": [{"cell_type": "code", "source": {"text": SECRET}}]}).encode(),
    json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                "cells": [{"cell_type": "code", "source": SECRET, "metadata": [SECRET]}]}).encode(),
    b"[" * 200_000 + b"]" * 200_000,
], ids=["not_json", "list", "v3", "cells_not_list", "bad_cell_type", "source_not_text", "cell_metadata_not_object",
        "deeply_nested"])
def test_unreadable_notebook_is_refused_without_quoting_it(tmp_path, content):
    src = tmp_path / "bad"
    src.mkdir()
    (src / "problem03.ipynb").write_bytes(content)
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.kinds() == ["notebook_unreadable"]
    assert result.taken == []
    assert not (dest / "problem03.ipynb").exists()
    no_secret(dest, result)


def test_notebook_is_rewritten_from_what_was_validated(tmp_path):
    src = tmp_path / "rewrite"
    nb = notebook("print('hi')")
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<script>x()</script>"})]
    nb.cells[0].execution_count = 3
    raw = json.loads(nbformat.writes(nb))
    raw["extra_top_level"] = "kept out"
    src.mkdir()
    (src / "problem03.ipynb").write_text(json.dumps(raw))
    dest = tmp_path / "copy"
    result = take_in(src, dest)
    assert result.events == []
    text = (dest / "problem03.ipynb").read_text()
    assert "<script>" not in text
    assert "extra_top_level" not in text
    got = nbformat.read(dest / "problem03.ipynb", as_version=4)
    nbformat.validate(got)
    assert got.cells[0].source == "print('hi')"
    assert got.cells[0].outputs == []


# --------------------------------------------------------------------------- source copies


def test_source_notebook_with_markers_is_a_source_copy(tmp_path):
    src = tmp_path / "copy_markers"
    src.mkdir()
    (src / "problem03.ipynb").write_bytes(SOURCE03.read_bytes())
    dest = tmp_path / "copy"
    result = take_in(src, dest, sources={"problem03": source03()})
    assert result.kinds() == ["source_copy"]
    found = result.events[0]
    assert found["source"] == "problem03"
    assert found["markers"][0]["marker"] == "BEGIN SOLUTION"
    assert "### BEGIN SOLUTION" in found["message"]
    assert not (dest / "problem03.ipynb").exists()
    assert result.taken == []


def test_one_marker_line_in_a_released_notebook_is_a_source_copy(tmp_path):
    nb = released(source03())
    by_id(nb, "p3_b_K_answer")["source"] = "### BEGIN HIDDEN TESTS\nK = 1.0"
    found = source_copy(nb, source03())
    assert found == {"markers": [{"cell": nb["cells"].index(by_id(nb, "p3_b_K_answer")),
                                  "marker": "BEGIN HIDDEN TESTS"}]}


def test_solutions_without_markers_are_a_source_copy(tmp_path):
    src = tmp_path / "copy_stripped"
    write_nb(src / "problem03.ipynb", nbformat.from_dict(strip_markers(source03())))
    dest = tmp_path / "copy"
    result = take_in(src, dest, sources={"problem03": source03()})
    assert result.kinds() == ["source_copy"]
    ids = {m["grade_id"] for m in result.events[0]["cells"]}
    assert "p3_a_derivation" in ids  # the model answers in prose are strong evidence
    assert result.taken == []


def test_one_model_answer_pasted_into_another_cell_is_a_source_copy():
    source = source03()
    nb = released(source)
    model = "".join(by_id(strip_markers(source), "p3_e_assumption")["source"])
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "My notes:\n" + model})
    found = source_copy(nb, source)
    assert found
    assert [m["grade_id"] for m in found["cells"]] == ["p3_e_assumption"]


def test_honest_notebook_with_one_line_equal_to_the_solution_is_taken(tmp_path):
    nb = released(source03())
    by_id(nb, "p3_b_K_answer")["source"] = "u = nu_turn[0]\nr = nu_turn[5]\nK = -m * r_G[2] * u * r"
    src = tmp_path / "honest"
    write_nb(src / "problem03.ipynb", nbformat.from_dict(nb))
    result = take_in(src, tmp_path / "copy", sources={"problem03": source03()})
    assert result.events == []
    assert result.taken == ["problem03.ipynb"]


def test_honest_notebook_with_every_code_answer_as_the_key_writes_it_is_taken():
    """Problem 3's code answers are all but dictated: matching them all is not a copy."""
    source = source03()
    nb = released(source)
    stripped = strip_markers(source)
    for cell in solution_cells(nb):
        if cell["cell_type"] == "code":
            key = "".join(by_id(stripped, cell["metadata"]["nbgrader"]["grade_id"])["source"])
            cell["source"] = key.replace(" * ", "*")  # even reformatted, these stay honest
    assert source_copy(nb, source) is None
    # and the same notebook with one model answer in prose added is a copy
    by_id(nb, "p3_c_direction")["source"] = "".join(by_id(stripped, "p3_c_direction")["source"])
    assert source_copy(nb, source) is not None


def test_two_non_trivial_code_answers_equal_to_the_key_are_a_copy():
    sol_a = ("M_RB = np.block([[m * np.eye(3), -m * S_G],\n"
             "                 [m * S_G, I_O]])\n"
             "max_asymmetry = np.max(np.abs(M_RB - M_RB.T))\n")
    sol_b = "eigenvalues = np.linalg.eigvalsh(M_RB)\neig_min, eig_max = eigenvalues[0], eigenvalues[-1]"
    for text in (sol_a, sol_b):  # each is non-trivial, neither is strong on its own
        squeezed = _squeeze(text)
        chars = sum(map(len, squeezed))
        assert len(squeezed) >= intake.NONTRIVIAL_LINES
        assert intake.NONTRIVIAL_CHARS <= chars < intake.STRONG_CHARS
    source = notebook()
    for gid, text in (("a", sol_a), ("b", sol_b)):
        cell = nbformat.v4.new_code_cell(f"### BEGIN SOLUTION\n{text}\n### END SOLUTION")
        cell.metadata["nbgrader"] = {"solution": True, "grade_id": gid}
        source.cells.append(cell)
    one = notebook(sol_a, "x = 2")
    two = notebook(sol_a, "# mine\n" + sol_b.replace(" ", ""))
    assert source_copy(one, source) is None
    found = source_copy(two, source)
    assert found
    assert [m["grade_id"] for m in found["cells"]] == ["a", "b"]


# --------------------------------------------------------------------------- collect

#: entry times an hour or more from now, in order: the time in the name is then the submission time
#: (an entry never counts as earlier than its name says), and timestamp.txt agrees with it
_NOW = dt.datetime.now(dt.UTC)
AT = [intake.format_time(_NOW + dt.timedelta(hours=1 + k)) for k in range(7)]


def exchange_entry(inbound: Path, student: str, stamp: str, *, files=None, tail="+Zq3x") -> Path:
    entry = inbound / f"{student}+problem03+{stamp}{tail}"
    entry.mkdir(parents=True)
    for name, text in (files or {"problem03.ipynb": None}).items():
        if name.endswith(".ipynb"):
            write_nb(entry / name, notebook(text or f"who = '{student}'"))
        else:
            (entry / name).write_text(text)
    (entry / "timestamp.txt").write_text(stamp)
    return entry


def test_collect_takes_the_newest_submission(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    exchange_entry(inbound, "alice", AT[1], files={"problem03.ipynb": "old = 1"})
    exchange_entry(inbound, "alice", AT[3], files={"problem03.ipynb": "new = 1"})
    exchange_entry(inbound, "bob", AT[2], tail="")  # no random part
    exchange_entry(inbound, "carol", AT[2]).rename(
        inbound / f"carol+problem04+{AT[2]}+aa")  # another assignment
    results = dict(collect(inbound, submitted, "problem03"))
    assert sorted(results) == ["alice", "bob"]
    assert results["alice"].events == []
    assert results["alice"].timestamp == AT[3]
    nb = nbformat.read(submitted / "alice" / "problem03" / "problem03.ipynb", as_version=4)
    assert nb.cells[0].source == "new = 1"
    assert (submitted / "alice" / "problem03" / "timestamp.txt").read_text() == AT[3]
    assert (submitted / "bob" / "problem03" / "problem03.ipynb").exists()
    assert not (submitted / "carol").exists()


def test_collect_refuses_an_inbound_link_to_another_students_folder(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    alice = exchange_entry(inbound, "alice", AT[1],
                           files={"problem03.ipynb": "alice_work = 1"})
    exchange_entry(inbound, "bob", AT[0], files={"problem03.ipynb": "bob_work = 1"})
    (inbound / f"bob+problem03+{AT[5]}+xx").symlink_to(alice, target_is_directory=True)
    (inbound / f"bob+problem03+{AT[6]}+yy").write_text("not a folder")
    results = dict(collect(inbound, submitted, "problem03"))
    bob = results["bob"]
    assert bob.kinds() == ["not_a_folder", "link_refused"]
    assert "symbolic link" in bob.events[1]["message"]
    nb = nbformat.read(submitted / "bob" / "problem03" / "problem03.ipynb", as_version=4)
    assert nb.cells[0].source == "bob_work = 1"  # his own older submission, not alice's


def test_collect_rejects_bad_names_and_keeps_a_valid_timestamp(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    (inbound / "dave+problem03+not a time+zz").mkdir(parents=True)
    (inbound / "..+problem03+2024-03-01 10:00:00 UTC+zz").mkdir()
    erin = exchange_entry(inbound, "erin", AT[1])
    (erin / "timestamp.txt").write_text("x" * 500)
    results = dict(collect(inbound, submitted, "problem03"))
    assert sorted(results) == ["..", "dave", "erin"]  # a refused id is named, never used as a folder
    assert results["dave"].kinds() == ["bad_name"]
    assert results["dave"].taken == []
    assert results[".."].kinds() == ["bad_name"]
    assert "student id" in results[".."].events[0]["message"]
    assert results["erin"].kinds() == ["bad_timestamp"]
    assert not (submitted / "erin" / "problem03" / "timestamp.txt").exists()  # a bad claim is not kept
    assert results["erin"].timestamp == AT[1]  # the time comes from the entry, not the claim
    assert [p.name for p in submitted.iterdir()] == ["erin"]
    assert not (tmp_path / "problem03").exists()


def test_recollect_replaces_only_after_the_new_copy_is_complete(tmp_path, monkeypatch):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    exchange_entry(inbound, "alice", AT[1],
                   files={"problem03.ipynb": "first = 1", "old_only.txt": "old"})
    collect(inbound, submitted, "problem03")
    final = submitted / "alice" / "problem03"
    assert (final / "old_only.txt").exists()

    exchange_entry(inbound, "alice", AT[4], files={"problem03.ipynb": "second = 1"})
    real_run = Walker.run

    def fail_midway(self, src_fd, dest_fd):
        real_run(self, src_fd, dest_fd)
        raise OSError("disk full")

    monkeypatch.setattr(Walker, "run", fail_midway)
    with pytest.raises(OSError, match="disk full"):
        collect(inbound, submitted, "problem03")
    assert (final / "old_only.txt").read_text() == "old"  # the old copy is untouched
    # no temp left, and the receipt is still the one of the copy in place
    assert sorted(p.name for p in (submitted / "alice").iterdir()) == [".problem03.receipt.json", "problem03"]
    assert intake.read_receipt(submitted, "alice", "problem03")["received"] == AT[1]

    monkeypatch.setattr(Walker, "run", real_run)
    results = dict(collect(inbound, submitted, "problem03"))
    assert results["alice"].events == []
    assert not (final / "old_only.txt").exists()
    assert nbformat.read(final / "problem03.ipynb", as_version=4).cells[0].source == "second = 1"
    assert sorted(p.name for p in (submitted / "alice").iterdir()) == [".problem03.receipt.json", "problem03"]


def test_collect_takes_in_with_the_same_checks(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    secret = outside(tmp_path)
    entry = exchange_entry(inbound, "alice", AT[1])
    (entry / "key.yaml").symlink_to(secret)
    (entry / "problem03.ipynb").unlink()
    (entry / "problem03.ipynb").write_bytes(SOURCE03.read_bytes())
    results = dict(collect(inbound, submitted, "problem03", sources={"problem03": source03()}))
    assert sorted(results["alice"].kinds()) == ["link_refused", "source_copy"]
    assert results["alice"].taken == ["timestamp.txt"]
    no_secret(submitted, results["alice"])


def test_collect_refuses_a_flooded_inbound(tmp_path):
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    for i in range(30):
        (inbound / f"x{i}").mkdir()
    with pytest.raises(ValueError, match="at most 20 entries"):
        collect(inbound, tmp_path / "submitted", "problem03", limits=Limits(max_inbound_entries=20))


def test_a_flood_does_not_hide_the_assignment_notebook(tmp_path):
    """The notebooks the assignment expects are looked up by name, whatever else floods the folder."""
    source = nbformat.read(ROOT / "exercises" / "problem03" / "problem03.ipynb", as_version=4)
    sub = tmp_path / "sub"
    sub.mkdir()
    for k in range(2000):
        (sub / f"aa{k:05d}.txt").write_text("x")
    nbformat.write(nbformat.v4.new_notebook(), sub / "problem03.ipynb")
    result = take_in(sub, tmp_path / "copy", sources={"problem03": source})
    assert "problem03.ipynb" in result.taken
    assert "too_many_files" in result.kinds()
    assert len(result.taken) <= Limits().max_files
