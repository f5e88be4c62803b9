"""Command line: ``python -m rbtutor key [--data FILE.yaml] [--format json|yaml|table]``.

Prints every answer of Problems 1-11 computed from the problem data: the
reference data by default, or the reference data with ``FILE.yaml`` merged over
it (a variant for another ship). Ids are ``p<problem>.<part>.<name>``.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rbtutor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    key_cmd = sub.add_parser("key", help="print the answer key computed from the problem data")
    key_cmd.add_argument("--data", help="YAML file with problem data to merge over the reference data")
    key_cmd.add_argument("--format", choices=("json", "yaml", "table"), default="table")
    key_cmd.add_argument("--problem", type=int, action="append",
                         help="only this problem (1-11); repeat for several")
    args = parser.parse_args(argv)

    from .problems import answer_key, load_data

    try:
        data = load_data(args.data)
        key = answer_key(data, args.problem)
    except (OSError, ValueError, KeyError) as exc:
        print(f"rbtutor key: {exc}", file=sys.stderr)
        return 2
    plain = {name: {"value": _plain(a.value), "unit": a.unit} for name, a in key.items()}
    if args.format == "json":
        print(json.dumps(plain, indent=1))
    elif args.format == "yaml":
        import yaml

        print(yaml.safe_dump(plain, sort_keys=False, width=200), end="")
    else:
        print(_table(key))
    return 0


if __name__ == "__main__":
    sys.exit(main())
