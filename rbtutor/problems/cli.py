"""Command line: ``python -m rbtutor key|data ...``.

``key [--data FILE.yaml] [--student ID] [--format json|yaml|table]`` prints every
answer of Problems 1-12 (12 is the quiz) computed from the problem data: the reference data by
default, or the reference data with ``FILE.yaml`` merged over it (a variant for
another ship); with ``--student`` the key of that student's own variant
(:mod:`rbtutor.problems.variants`). Ids are ``p<problem>.<part>.<name>``.

``data --student ID [--data FILE.yaml]`` prints that student's data as YAML, in the
format of ``reference_data.yaml`` (so it can be passed back with ``--data``).
``data --class FILE --out FOLDER`` (or ``--students a,b,c``) writes the whole class:
``FOLDER/<id>.yaml`` with each student's data, and ``FOLDER/key.csv`` with one row
per student and answer id (``student,id,unit,value``, the value as JSON). ``FILE``
lists one student id a line (blank lines and lines starting with ``#`` skipped).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import yaml

from ..command_line import BriefParser
from . import answer_key
from .variants import load_course_data, student_key, to_yaml, variant


def _plain(value):
    if isinstance(value, str):
        return value
    arr = np.asarray(value, dtype=float)
    return arr.tolist() if arr.ndim else float(arr)


def _table(key) -> str:
    width = max(len(k) for k in key)
    lines = [f"{'id':<{width}}  {'unit':<16}  value"]
    for name, answer in key.items():
        if isinstance(answer.value, str):
            shown = answer.value
        elif np.ndim(answer.value) == 0:
            shown = f"{float(answer.value):.6g}"
        else:
            shown = np.array2string(np.asarray(answer.value, dtype=float), precision=6,
                                    max_line_width=200, separator=", ")
            shown = shown.replace("\n", "\n" + " " * (width + 20))
        lines.append(f"{name:<{width}}  {answer.unit:<16}  {shown}")
    return "\n".join(lines)


def main(argv=None, prog: str = "python -m rbtutor") -> int:
    parser = BriefParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    key_cmd = sub.add_parser("key", help="print the answer key computed from the problem data",
                             description="Print the answer key computed from the problem data.",
                             epilog=f"example: {prog} key --problem 3 --format yaml")
    key_cmd.add_argument("--data", help="YAML file with problem data to merge over the reference data")
    key_cmd.add_argument("--format", choices=("json", "yaml", "table"), default="table")
    key_cmd.add_argument("--problem", type=int, action="append",
                         help="only this problem (1-12); repeat for several")
    key_cmd.add_argument("--student", help="the key of this student's own variant")
    data_cmd = sub.add_parser("data", help="print a student's problem data, or write a whole class's",
                              description="Print a student's problem data, or write a whole class's with its key.",
                              epilog=f"example: {prog} data --class students.txt --out class-data")
    data_cmd.add_argument("--data", help="the course data (YAML merged over the reference data)")
    who = data_cmd.add_mutually_exclusive_group(required=True)
    who.add_argument("--student", help="print this student's data as YAML")
    who.add_argument("--class", dest="class_file", help="file of student ids, one a line")
    who.add_argument("--students", help="student ids separated by commas")
    data_cmd.add_argument("--out", help="folder for a class: <id>.yaml per student and key.csv")
    args = parser.parse_args(argv)

    if args.command == "data":
        return _data_command(args)


    try:
        data = load_course_data(args.data)
        if args.student is not None:
            key = student_key(data, args.student, args.problem)
        else:
            key = answer_key(data, args.problem)
    except (OSError, ValueError, KeyError) as exc:
        print(f"rbtutor key: {exc}", file=sys.stderr)
        return 2
    plain = {name: {"value": _plain(a.value), "unit": a.unit} for name, a in key.items()}
    if args.format == "json":
        print(json.dumps(plain, indent=1))
    elif args.format == "yaml":

        print(yaml.safe_dump(plain, sort_keys=False, width=200), end="")
    else:
        print(_table(key))
    return 0


def _class_ids(args) -> list[str]:
    if args.students is not None:
        ids = [s.strip() for s in args.students.split(",")]
    else:
        with open(args.class_file, encoding="utf-8") as handle:
            ids = [line.strip() for line in handle if line.strip() and not line.lstrip().startswith("#")]
    ids = [i for i in ids if i]
    bad = [i for i in ids if "/" in i or i in (".", "..") or i.startswith(".")]
    if bad:
        raise ValueError(f"expected plain student ids (no '/', not starting with '.'), got {bad}")
    if len(set(ids)) != len(ids):
        raise ValueError("a student id is listed twice")
    return ids


def _data_command(args) -> int:


    try:
        data = load_course_data(args.data)
        if args.student is not None:
            print(to_yaml(variant(data, args.student)), end="")
            return 0
        if not args.out:
            raise ValueError("--out FOLDER is needed with --class or --students")
        ids = _class_ids(args)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with (out / "key.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["student", "id", "unit", "value"])
            for student in ids:
                (out / f"{student}.yaml").write_text(to_yaml(variant(data, student)), encoding="utf-8")
                for name, answer in student_key(data, student).items():
                    writer.writerow([student, name, answer.unit, json.dumps(_plain(answer.value))])
    except (OSError, ValueError, KeyError) as exc:
        print(f"rbtutor data: {exc}", file=sys.stderr)
        return 2
    print(f"{len(ids)} students: {out}/<id>.yaml and {out / 'key.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
