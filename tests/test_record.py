"""The class record cannot be forged: who handed in, when, which answer a hand grade is for, ids, escaping.

Each test is an attack a student on a shared server could make (planting an entry under a
classmate's name, backdating their own, resubmitting after a hand grade, a hostile id), tried
for real: entries made by real Unix accounts where ownership matters (created here as root
with ``useradd``; skipped without root locally, a failure in CI).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from rbtutor.grading import intake
from rbtutor.grading.intake import collect, format_time, parse_time, read_receipt

ACCOUNTS = ("rbt-rec-a", "rbt-rec-b")
NOW = dt.datetime.now(dt.UTC)


def stamp(delta: dt.timedelta) -> str:
    return format_time(NOW + delta)


def make_entry(inbound: Path, student: str, when: str, *, source="x = 1", claim: str | None = None,
               tail="+Zq3x") -> Path:
    """An exchange entry as nbgrader's submit makes it (the claim defaults to the name's time)."""
    entry = inbound / f"{student}+problem03+{when}{tail}"
    entry.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, entry / "problem03.ipynb")
    (entry / "timestamp.txt").write_text(when if claim is None else claim)
    return entry


def first_source(folder: Path) -> str:
    return nbformat.read(folder / "problem03.ipynb", as_version=4).cells[0].source


# --------------------------------------------------------------------------- real accounts


def _require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the ownership tests as root (they create Unix accounts)", pytrace=False)
        pytest.skip("creating the Unix accounts of the ownership tests needs root")
    if not shutil.which("useradd"):
        pytest.fail("useradd is missing: the ownership tests need real Unix accounts", pytrace=False)


@pytest.fixture(scope="module")
def accounts():
    """Two real Unix accounts (``rbt-rec-a``, ``rbt-rec-b``), removed afterwards."""
    _require_root()
    made = []
    try:
        for name in ACCOUNTS:
            try:
                pwd.getpwnam(name)
            except KeyError:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
                made.append(name)
        yield {name: pwd.getpwnam(name) for name in ACCOUNTS}
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False)


@pytest.fixture
def exchange():
    """An inbound folder every account may write (as nbgrader's is), on a path they can reach."""
    top = Path(tempfile.mkdtemp(prefix="rbt-rec-", dir="/tmp"))
    os.chmod(top, 0o755)
    inbound = top / "inbound"
    inbound.mkdir()
    os.chmod(inbound, 0o1777)
    yield inbound, top / "submitted"
    shutil.rmtree(top)


AS_STUDENT = """
import json, os, sys
entry, when, source, mode = sys.argv[1:5]
os.mkdir(entry)
nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                 "source": source}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
with open(os.path.join(entry, "problem03.ipynb"), "w") as out:
    json.dump(nb, out)
with open(os.path.join(entry, "timestamp.txt"), "w") as out:
    out.write(when)
os.chmod(entry, int(mode, 8))
"""


def as_user(account: str, entry: Path, when: str, source: str, mode: str = "755") -> Path:
    """``account`` itself makes the exchange entry ``entry`` (a process running with its uid)."""
    user = pwd.getpwnam(account)
    subprocess.run(["/usr/bin/python3", "-c", AS_STUDENT, str(entry), when, source, mode], check=True,
                   user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert entry.stat().st_uid == user.pw_uid
    return entry


def test_entry_planted_under_a_classmates_name_is_refused_and_names_the_planter(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "mine = 9")
    # b plants a later, blank "submission" of a's
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"]
    refused = results[a].events[0]
    assert refused["owner"] == [b] and b in refused["message"]
    assert first_source(submitted / a / "problem03") == "mine = 9"  # a's own newest entry
    assert read_receipt(submitted, a, "problem03")["entry"].endswith("+aa")


def test_a_file_planted_inside_a_classmates_entry_refuses_that_entry(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "first = 1")
    # a's newer entry is world-writable (a's mistake); b swaps a notebook into it
    newer = as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=2))}+cc",
                    stamp(dt.timedelta(hours=2)), "second = 2", mode="777")
    user_b = pwd.getpwnam(b)
    subprocess.run(["/usr/bin/python3", "-c",
                    "import os, sys; os.rename(sys.argv[1], sys.argv[1] + '.x'); "
                    "open(sys.argv[1], 'w').write(open(sys.argv[1] + '.x').read().replace('second = 2', 'b = 0'))",
                    str(newer / "problem03.ipynb")], check=True, user=user_b.pw_uid, group=user_b.pw_gid,
                   extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"})
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"]
    assert results[a].events[0]["owner"] == [b] and "problem03.ipynb" in results[a].events[0]["paths"]
    assert first_source(submitted / a / "problem03") == "first = 1"


def test_only_foreign_entries_means_nothing_is_collected(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+bb", stamp(dt.timedelta(hours=1)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"] and results[a].taken == []
    assert not (submitted / a / "problem03").exists() and read_receipt(submitted, a, "problem03") is None


def test_without_the_owner_check_the_planted_entry_is_taken(accounts, exchange):
    """What the course setting gives up (an exchange where one service account owns every entry)."""
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "mine = 9")
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03", check_owner=False))
    assert results[a].events == []
    assert first_source(submitted / a / "problem03") == "blank = 0"


def test_an_id_without_an_account_is_not_owner_checked(accounts, exchange):
    inbound, submitted = exchange
    make_entry(inbound, "no-such-account-rbt", stamp(dt.timedelta(hours=1)))  # owned by root
    results = dict(collect(inbound, submitted, "problem03"))
    assert results["no-such-account-rbt"].events == []


# --------------------------------------------------------------------------- when


def test_backdated_entry_name_and_claim_count_from_when_the_entry_appeared(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    old = "2020-01-01 10:00:00.000000 UTC"
    entry = make_entry(inbound, "ann", old)  # name and timestamp.txt both say 2020
    newest = max(os.stat(p, follow_symlinks=False).st_ctime for p in [entry, *entry.iterdir()])
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    received = parse_time(result.timestamp)
    assert abs(received.timestamp() - newest) < 1e-5 and received > parse_time(old)
    assert result.kinds() == ["timestamp_mismatch"]
    assert result.events[0]["claimed"] == old and result.events[0]["received"] == result.timestamp
    assert result.claimed == old
    assert (submitted / "ann" / "problem03" / "timestamp.txt").read_text() == old  # kept as the claim only


def test_a_rewritten_claim_is_named_and_changes_nothing(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    later = stamp(dt.timedelta(days=2, hours=12))  # the entry's own time (its name)
    make_entry(inbound, "ann", later, claim="2020-01-01 00:00:00.000000 UTC")
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.timestamp == later
    assert result.kinds() == ["timestamp_mismatch"]


def test_an_answer_rewritten_inside_an_old_entry_moves_its_time(tmp_path):
    """An entry made early and filled in later: the newest change of anything read is the time."""
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", "2020-01-01 10:00:00.000000 UTC", source="early = 0")
    folder_ctime = entry.stat().st_ctime
    with (entry / "problem03.ipynb").open("r+") as handle:  # same file, new contents, folder untouched
        text = handle.read().replace("early = 0", "later = 1")
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    file_ctime = (entry / "problem03.ipynb").stat().st_ctime
    assert entry.stat().st_ctime == folder_ctime and file_ctime > folder_ctime
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert abs(parse_time(result.timestamp).timestamp() - file_ctime) < 1e-5


def test_recollect_keeps_the_time_of_an_unchanged_entry_and_moves_a_changed_one(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", "2020-01-01 10:00:00.000000 UTC")
    first = dict(collect(inbound, submitted, "problem03"))["ann"].timestamp
    os.chmod(entry, 0o700)  # a status change (a backup restore, a chmod) that leaves the contents alone
    assert entry.stat().st_ctime > parse_time(first).timestamp()
    again = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert again.timestamp == first and "entry_changed" not in again.kinds()
    (entry / "extra.txt").write_text("added later")
    changed = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert "entry_changed" in changed.kinds() and parse_time(changed.timestamp) > parse_time(first)
    assert read_receipt(submitted, "ann", "problem03")["received"] == changed.timestamp


@pytest.mark.parametrize(("claim", "why"), [
    (None, "is missing"),
    ("x" * 500, "larger than"),
    ("2024-03-01 10:00:00" + " " * 95, "larger than"),
    ("next friday", "not a date"),
    ("2024-13-45 10:00:00 UTC", "not a date"),
    ("0001-01-01 00:00:00.000000 UTC", "not a date"),
    ("9999-12-31 23:59:59.999999 -1000", "not a date"),  # overflows when put into UTC
    ("2024-03-01 10:00:00 America/../../../etc/passwd", "not a date"),  # no zone files looked up
    ("\udcff", "not a date"),
])
def test_bad_claims_are_named_never_crash_and_never_make_it_on_time(tmp_path, claim, why):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    when = stamp(dt.timedelta(days=3))
    entry = make_entry(inbound, "ann", when)
    if claim is None:
        (entry / "timestamp.txt").unlink()
    else:
        (entry / "timestamp.txt").write_bytes(claim.encode("utf-8", "surrogateescape"))
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.kinds() == ["bad_timestamp"] and why in result.events[0]["message"]
    assert result.timestamp == when and result.claimed is None
    assert not (submitted / "ann" / "problem03" / "timestamp.txt").exists()


@pytest.mark.parametrize("when", ["0001-01-01 00:00:00.000000 UTC", "1969-12-31 23:59:59 UTC",
                                  "9999-12-31 23:59:59 -1000", "2024-02-30 10:00:00 UTC"])
def test_entry_names_with_impossible_times_are_not_collected(tmp_path, when):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    make_entry(inbound, "ann", when)
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.kinds() == ["bad_name"] and result.taken == []


def test_parse_time_reads_nbgraders_formats():
    assert parse_time("2024-03-01 10:00:00.000000 UTC") == dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-03-01 12:00:00+0200") == dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-03-01T10:00:00.5") == dt.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=dt.UTC)
    with pytest.raises(ValueError, match="at most 14 hours"):
        parse_time("2024-03-01 10:00:00 +2300")


def test_receipt_lives_beside_the_copy_where_no_entry_can_write(tmp_path):
    """A file named like the receipt inside an entry lands inside the copy, never on the receipt."""
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", stamp(dt.timedelta(days=1)))
    forged = {"entry": entry.name, "received": "2020-01-01 00:00:00.000000 UTC", "claimed": None,
              "digest": "0" * 64, "first_seen": "2020-01-01 00:00:00.000000 UTC"}
    (entry / ".problem03.receipt.json").write_text(json.dumps(forged))
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert read_receipt(submitted, "ann", "problem03")["received"] == result.timestamp != forged["received"]


def test_a_damaged_receipt_is_an_error_not_a_time(tmp_path):
    (tmp_path / "ann").mkdir()
    intake.receipt_path(tmp_path, "ann", "problem03").write_text("{not json")
    with pytest.raises(ValueError, match="expected a receipt"):
        read_receipt(tmp_path, "ann", "problem03")
