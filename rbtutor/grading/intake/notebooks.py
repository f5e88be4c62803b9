"""Step: intake, notebooks. Each ``.ipynb`` the walk takes is parsed, rebuilt, cut to the caps and rewritten.

Notebooks are parsed from the capped bytes, checked to be nbformat 4 notebooks,
their cells rebuilt from the fields grading needs (outputs cleared, as nbgrader's
``ClearOutput`` does first anyway), cut to the caps, and written with nbformat:
nbgrader reads what intake validated, not the submitted bytes. What a student controls
and the grader stores is capped too: a cell's source, its attachments, its metadata and
the notebook's metadata; nbgrader's own entries (a cell's ``nbgrader``, the notebook's
``kernelspec`` and ``language_info``) are what is kept when metadata is cut.

The two steps are methods of :class:`NotebookStep`, which the walker of
:mod:`.files` inherits: they read its ``limits`` and ``solutions`` and report
through its ``note``. A notebook holding the instructor's source is refused here,
by the rule of :mod:`.copies`.
"""

from __future__ import annotations

import json
import re
import uuid

import nbformat

from .copies import Submitted, copy_message
from .limits import show_name

_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: what nbgrader writes into a cell's ``nbgrader`` metadata (nbgrader 0.9, schema 3)
_NBGRADER_KEYS = ("grade", "grade_id", "locked", "points", "schema_version", "solution", "task", "checksum",
                  "cell_type")
#: the notebook metadata grading reads, kept when the rest is cut
_NOTEBOOK_KEYS = ("kernelspec", "language_info", "nbgrader")


def _json_bytes(value) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


class NotebookStep:
    """The notebook part of one walk over a submission (mixed into :class:`.files.Walker`)."""

    def notebook(self, data: bytes, path: str) -> bytes | None:
        """The validated, cut and rewritten notebook, or None (with an event) if it is refused."""
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else "not valid JSON"
            self.note("notebook_unreadable", f"{show_name(path)} is {reason}; it was not taken.", path=path)
            return None
        nb, problem = self.rebuild(raw, path)
        if nb is None:
            self.note("notebook_unreadable", f"{show_name(path)} is not an nbformat 4 notebook ({problem}); "
                      "it was not taken.", path=path)
            return None
        found = Submitted(nb).copy_of(self.solutions)
        if found:
            name, evidence = found
            stem = path.rsplit("/", 1)[-1][: -len(".ipynb")]
            name = name if name is not None else (stem if stem in self.solutions else None)
            self.note("source_copy", copy_message(path, name, evidence), path=path, source=name, **evidence)
            return None
        try:
            text = nbformat.writes(nb, version=4)
            return text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (valid JSON escapes, not UTF-8): keep them escaped
            return nbformat.writes(nb, version=4, ensure_ascii=True).encode("ascii")

    def rebuild(self, raw, path: str):
        """An nbformat 4 notebook holding only the fields grading needs, cut to the caps."""
        if not isinstance(raw, dict):
            return None, "not a JSON object"
        if raw.get("nbformat") != 4:
            return None, "nbformat is not 4"
        minor = raw.get("nbformat_minor", 0)
        if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
            return None, "nbformat_minor is not a number"
        minor = min(minor, 5)
        cells, meta = raw.get("cells"), raw.get("metadata", {})
        if not isinstance(cells, list):
            return None, "no list of cells"
        if not isinstance(meta, dict):
            return None, "metadata is not an object"
        lim = self.limits
        meta = self.cap_notebook_metadata(meta, path)
        if len(cells) > lim.max_cells:
            self.note("too_many_cells", f"{show_name(path)} has {len(cells)} cells; only the first {lim.max_cells} "
                      "were kept.", path=path, cells=len(cells), cap=lim.max_cells)
            cells = cells[:lim.max_cells]
        out, ids = [], set()
        for index, cell in enumerate(cells):
            new, problem = self.rebuild_cell(cell, index, path)
            if new is None:
                return None, problem
            if minor >= 5:
                cid = cell.get("id")
                if not (isinstance(cid, str) and _CELL_ID.match(cid)) or cid in ids:
                    cid = uuid.uuid4().hex[:16]
                ids.add(cid)
                new["id"] = cid
            out.append(new)
        nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": minor, "metadata": meta, "cells": out})
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as exc:
            where = "/".join(str(p) for p in list(exc.absolute_path)[:6]) or "top level"
            return None, f"schema check failed at {where}"
        return nb, None

    def rebuild_cell(self, cell, index: int, path: str):
        """``(cell, None)`` with the fields grading needs and the source cut to its cap, or ``(None, problem)``."""
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            return None, f"cell {index} has no known cell_type"
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            return None, f"cell {index} has a source that is not text"
        cell_meta = cell.get("metadata", {})
        if not isinstance(cell_meta, dict):
            return None, f"cell {index} has metadata that is not an object"
        lim = self.limits
        size = len(source.encode("utf-8", "surrogatepass"))
        if size > lim.max_cell_source_bytes:
            source = cut_text(source, lim.max_cell_source_bytes)
            grade = cell_meta.get("nbgrader")
            grade_id = grade.get("grade_id") if isinstance(grade, dict) else None
            self.note("cell_cut", f"Cell {index} of {show_name(path)} has a source of {size} bytes; it was cut "
                      f"to {lim.max_cell_source_bytes}.", path=path, cell=index,
                      grade_id=grade_id if isinstance(grade_id, str) else None, bytes=size,
                      cap=lim.max_cell_source_bytes)
        new = {"cell_type": cell["cell_type"], "metadata": self.cap_cell_metadata(cell_meta, index, path),
               "source": source}
        if cell["cell_type"] == "code":
            new.update(outputs=[], execution_count=None)
        elif isinstance(cell.get("attachments"), dict):
            size = _json_bytes(cell["attachments"])
            if size <= lim.max_attachment_bytes:
                new["attachments"] = cell["attachments"]
            else:
                self.note("attachments_cut", f"Cell {index} of {show_name(path)} has attachments of {size} bytes; "
                          f"above {lim.max_attachment_bytes} they were dropped.", path=path, cell=index,
                          grade_id=_grade_id(cell_meta), bytes=size, cap=lim.max_attachment_bytes)
        return new, None

    def cap_cell_metadata(self, cell_meta: dict, index: int, path: str) -> dict:
        """``cell_meta``, or only its ``nbgrader`` entry (nbgrader's keys only, if need be) when it is too large."""
        cap = self.limits.max_cell_metadata_bytes
        size = _json_bytes(cell_meta)
        if size <= cap:
            return cell_meta
        kept = {}
        grade = cell_meta.get("nbgrader")
        if isinstance(grade, dict):
            kept["nbgrader"] = grade if _json_bytes(grade) <= cap else \
                {k: grade[k] for k in _NBGRADER_KEYS if k in grade and _json_bytes(grade[k]) <= 256}
        dropped = sorted(set(cell_meta) - set(kept))
        self.note("metadata_cut", f"Cell {index} of {show_name(path)} has metadata of {size} bytes; above {cap} "
                  f"only its nbgrader entry was kept ({len(dropped)} other entries dropped).", path=path,
                  cell=index, grade_id=_grade_id(cell_meta), bytes=size, cap=cap,
                  dropped=[show_name(str(k)) for k in dropped[:20]])
        return kept

    def cap_notebook_metadata(self, meta: dict, path: str) -> dict:
        """``meta``, or only the entries grading reads (each if it fits) when it is too large."""
        cap = self.limits.max_notebook_metadata_bytes
        size = _json_bytes(meta)
        if size <= cap:
            return meta
        kept = {k: meta[k] for k in _NOTEBOOK_KEYS if k in meta and _json_bytes(meta[k]) <= cap // 4}
        dropped = sorted(set(meta) - set(kept))
        self.note("metadata_cut", f"{show_name(path)} has notebook metadata of {size} bytes; above {cap} only "
                  f"{', '.join(kept) or 'none of its entries'} was kept ({len(dropped)} entries dropped).",
                  path=path, cell=None, bytes=size, cap=cap, dropped=[show_name(str(k)) for k in dropped[:20]])
        return kept


def _grade_id(cell_meta: dict) -> str | None:
    grade = cell_meta.get("nbgrader")
    grade_id = grade.get("grade_id") if isinstance(grade, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def cut_text(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text
    end = cap
    while end > 0 and (data[end] & 0xC0) == 0x80:  # data[end] continues a character: back off
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")
