"""Step: judge, its keys. The course's reference data and the store of each student's key
(written once by the grader, read by every judge)."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...problems import PROBLEMS, Answer, answer_key
from ...problems.variants import data_digest, load_course_data, per_student, problem_of, student_key, variant
from ..protocol import HAND_IN


@lru_cache(maxsize=4)
def cached_reference(data_file: str | None):
    """``(data, key)`` of the data file ``data_file`` (None: the book's reference data), read once per process."""
    # the course data file may carry a `variants` section (per-student switch, salt)

    data = load_course_data(data_file)
    return data, answer_key(data)


_PROBLEM_KEYS: dict[tuple[str, int], dict] = {}  # (data digest, problem): that problem's key of those data


def problem_key(data: dict, problem: int) -> dict:
    """``answer_key(data, [problem])``, worked out once per process: every failed answer is checked
    against the course's and the book's key, which took a twelfth of a worker's time when each
    check worked them out again."""
    found = (data_digest(data), int(problem))
    if found not in _PROBLEM_KEYS:
        if len(_PROBLEM_KEYS) >= 64:  # the course's and the book's data, twelve problems each
            _PROBLEM_KEYS.clear()
        _PROBLEM_KEYS[found] = answer_key(data, [problem])
    return _PROBLEM_KEYS[found]


def course_reference(data_file: str | Path | None = None):
    """``(data, key)`` of the course: ``data_file`` (a rendered variant) if it exists, else the reference."""
    return cached_reference(str(data_file) if data_file and Path(data_file).exists() else None)


def variants_on(data: dict) -> bool:
    """Whether the course data give each student their own variant."""
    return per_student(data)


def _encode_value(value):
    if isinstance(value, str):
        return {"text": value}
    array = np.asarray(value, dtype=float)
    return {"array": array.tolist()} if array.ndim else {"number": float(array)}


def _decode_value(stored: dict):
    if set(stored) == {"text"} and isinstance(stored["text"], str):
        return stored["text"]
    if set(stored) == {"array"}:
        return np.asarray(stored["array"], dtype=float)
    if set(stored) == {"number"}:
        return float(stored["number"])
    raise ValueError(f"expected a stored value with one of 'text', 'array', 'number', got {sorted(stored)}")


def _encode_answer(answer: Answer) -> dict:
    return {"value": _encode_value(answer.value), "unit": answer.unit, "kind": answer.kind,
            "periodic": answer.periodic, "quaternion": answer.quaternion, "bound": answer.bound,
            "mistakes": [[code, _encode_value(wrong)] for code, wrong in answer.mistakes]}


def _decode_answer(stored: dict) -> Answer:
    return Answer(value=_decode_value(stored["value"]), unit=stored["unit"], kind=stored["kind"],
                  periodic=stored["periodic"], quaternion=stored["quaternion"], bound=stored["bound"],
                  mistakes=tuple((code, _decode_value(wrong)) for code, wrong in stored["mistakes"]))


# The classmates' keys, worked out once per run: a student's key costs up to 0.3 s for one problem,
# so a judge that derived every classmate's key itself would cost each process that much per
# classmate. write_class_keys runs in the grading process before the workers start and stores the
# keys of the whole class, one JSON file per problem, in a folder of the grader's scratch folder
# (private to the grader, hidden from every kernel); JudgeAnswers reads a problem's file once per
# process. The folder is named by the digest of the course data, so a store never serves other data.

VARIANTS_FILE = "variants.json"  # in the store's folder: each student's problem data


def problems_answered(notebooks) -> set[int]:
    """The problem numbers of the answer cells (``hand_in("p3.b.K", ...)``) of ``notebooks``: an
    assignment's source notebooks name the problems whose keys its judges read."""

    return {problem_of(answer_id) for nb in notebooks for cell in nb.cells if cell.cell_type == "code"
            for answer_id in HAND_IN.findall(cell.source)}


def class_keys_folder(store: str | Path, data: dict) -> Path:
    """Where the class's keys for ``data`` are kept under ``store``: a folder named by the data's digest."""

    return Path(store) / data_digest(data)


def write_class_keys(store: str | Path, data: dict, students, problems=None, new_pool=None) -> Path:
    """Work out the variant and key of every student of ``students`` once and store them for the
    judges and restorers of a run.

    One file per problem, ``<store>/<digest of data>/p<N>.json``, mapping each student to
    their answers of that problem, and :data:`VARIANTS_FILE` mapping each student to their
    problem data; folders are made with mode 0700. ``problems`` (numbers; all of the course's by
    default) are the problems worked out: those of the assignments a run grades, since a judge
    works out a problem missing from the store itself. What is already stored for the same data
    (an earlier run) is not worked out again. ``new_pool(jobs)``, when given, makes a
    ``concurrent.futures`` executor that works them out in parallel (only made when some are
    missing). Returns the folder.
    """
    folder = class_keys_folder(store, data)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(store, 0o700)
    os.chmod(folder, 0o700)
    stored: dict[int, dict] = {}
    for path in folder.glob("p*.json"):
        stored[int(path.stem[1:])] = json.loads(path.read_text(encoding="utf-8"))
    variants_path = folder / VARIANTS_FILE
    variants = json.loads(variants_path.read_text(encoding="utf-8")) if variants_path.exists() else {}
    chosen = sorted(set(range(1, len(PROBLEMS) + 1) if problems is None else (int(p) for p in problems)))
    wanted = [(s, tuple(p for p in chosen if s not in stored.get(p, {}))) for s in sorted(set(students))]
    missing = [(s, needed) for s, needed in wanted if needed or s not in variants]
    if not missing:
        return folder
    if new_pool is None or len(missing) < 2:
        _merge_keys(stored, variants, missing, (_worked_out(data, s, needed) for s, needed in missing))
    else:
        with new_pool(None) as pool:
            _merge_keys(stored, variants, missing, pool.map(_worked_out, [data] * len(missing),
                                                            *zip(*missing, strict=True), chunksize=8))
    for problem, keys in stored.items():
        _write_json(folder / f"p{problem}.json", keys)
    _write_json(variants_path, variants)
    return folder


def _write_json(path: Path, content) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(content, out)
    os.replace(temporary, path)


def _merge_keys(stored: dict[int, dict], variants: dict[str, dict], missing: list[tuple[str, tuple]],
                worked_out) -> None:
    for (student, _), (own_data, by_problem) in zip(missing, worked_out, strict=True):
        variants[student] = own_data
        for problem, answers in by_problem.items():
            stored.setdefault(problem, {})[student] = answers


def _worked_out(data: dict, student: str, problems: tuple[int, ...]) -> tuple[dict, dict[int, dict]]:
    """One student's problem data and key of ``problems``, encoded for the store, by problem (runs
    in a pool's worker)."""

    by_problem: dict[int, dict] = {problem: {} for problem in problems}
    if problems:
        for answer_id, answer in student_key(data, student, problems).items():
            by_problem.setdefault(_problem(answer_id), {})[answer_id] = _encode_answer(answer)
    return variant(data, student), by_problem


def _problem(answer_id: str) -> int:
    return problem_of(answer_id)


def _read_stored(path: str) -> dict:
    stored = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(stored, dict):
        raise ValueError(f"expected a mapping of students in {path}, got {type(stored).__name__}")
    return stored


@lru_cache(maxsize=16)
def _stored_json(path: str, modified: int, size: int) -> dict:
    """A file of the store, read once per process (and again when it changes)."""
    return _read_stored(path)


@lru_cache(maxsize=16)
def _stored_keys(path: str, modified: int, size: int) -> dict[str, dict]:
    """The class's answers of one problem, decoded once per process (and again when the file changes).

    The file's JSON is not kept beside them: with it, the eleven problems of 273 students held
    45.5 MB in every worker; without it, 15.2 MB (tracemalloc, 2026-12-05)."""
    return {student: {answer_id: _decode_answer(answer) for answer_id, answer in answers.items()}
            for student, answers in _read_stored(path).items()}


def _stat_key(path: Path) -> tuple[str, int, int] | None:
    try:
        facts = path.stat()
    except FileNotFoundError:
        return None
    return str(path), facts.st_mtime_ns, facts.st_size


def stored_class_keys(store: str | Path, data: dict, problem: int) -> dict[str, dict]:
    """The stored keys of ``problem`` for every student of the class (empty when none are stored)."""
    found = _stat_key(class_keys_folder(store, data) / f"p{int(problem)}.json")
    return {} if found is None else _stored_keys(*found)


def stored_variant(store: str | Path, data: dict, student: str) -> dict | None:
    """The stored problem data of ``student`` (a copy), or None when it is not in the store."""
    found = _stat_key(class_keys_folder(store, data) / VARIANTS_FILE)
    own = None if found is None else _stored_json(*found).get(student)
    return None if own is None else copy.deepcopy(own)

