"""Step: restore. Every cell the gradebook knows gets back its type, flags, points and locked source.

:class:`RestoreCells` replaces nbgrader's ``DeduplicateIds`` and ``OverwriteCells``
in the sanitize stage of autograding, before the notebook runs; :class:`CheckMetadata`
(nbgrader's ``CheckCellMetadata``, faster) then checks the metadata, and again at the end.
"""

from __future__ import annotations

import re
import traceback
import uuid
from types import SimpleNamespace

import jsonschema
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.api import BaseCell, Gradebook, GradeCell, SolutionCell, TaskCell
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import CheckCellMetadata, OverwriteCells
from nbgrader.utils import compute_checksum
from traitlets import Bool, Unicode

from ..problems.data_cells import data_source
from ..problems.variants import per_student, variant
from .judge import course_reference, stored_variant
from .outputs import cut
from .protocol import DATA_ID
from .report import Events, event, grading_meta

# --------------------------------------------------------------------------- sanitize


def _cells_by_kind(gradebook, notebook) -> tuple[dict[str, float], set[str], set[str]]:
    """The points of each grade cell of the gradebook's ``notebook``, and the names of its solution
    and task cells: what nbgrader's ``grade_cells``, ``solution_cells`` and ``task_cells`` give, read
    in one query with the columns of each cell's kind. nbgrader's lists load a grade cell's points
    one query a cell (11 of problem03's 15 queries here, 2026-12-07)."""
    # deferred: sqlalchemy takes 0.24 s to import (python -X importtime, 2026-12-06); only this step needs it
    from sqlalchemy.orm import with_polymorphic

    kinds = with_polymorphic(BaseCell, "*")
    cells = gradebook.db.query(kinds).filter(kinds.notebook_id == notebook.id).all()
    return ({c.name: float(c.max_score) for c in cells if isinstance(c, GradeCell)},
            {c.name for c in cells if isinstance(c, SolutionCell)}, {c.name for c in cells if isinstance(c, TaskCell)})


class RestoreCells(Events, OverwriteCells):
    """Every cell the gradebook knows gets its type, flags, points and (locked) source back.

    Replaces DeduplicateIds and OverwriteCells in ``Autograde.sanitize_preprocessors``.
    A duplicated id keeps one cell: the first for a solution cell, the copy with the
    original source (else the last) for a locked cell; the other copies become plain
    cells. A cell with an id the gradebook does not know loses its nbgrader metadata.
    Deleted grade and locked cells are put back after the cell that preceded them in
    the source; a deleted written answer comes back blank (so it scores 0 by checksum).
    """

    stage = "restore"

    add_missing_cells = Bool(True, help="put deleted grade and locked cells back").tag(config=True)
    data_file = Unicode("", help="the course data (for per-student data cells); empty: the "
                        "JudgeAnswers.data_file of the same configuration").tag(config=True)
    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.db_url = resources["nbgrader"]["db_url"]
        fresh = "rbtutor" not in resources
        events: list[dict] = []
        with Gradebook(self.db_url) as gradebook:
            self.gradebook = gradebook
            source_nb = gradebook.find_notebook(self.notebook_id, self.assignment_id)
            order = [c.name for c in source_nb.source_cells]
            source = {c.name: c for c in source_nb.source_cells}
            self._personal_data_cell(source, resources)
            points, solutions, tasks = _cells_by_kind(gradebook, source_nb)
            keep = self._keepers(nb, source, solutions, events)
            for index, cell in enumerate(nb.cells):
                meta = cell.get("metadata", {}).get("nbgrader")
                if meta is None:
                    continue
                gid = meta.get("grade_id") if isinstance(meta, dict) else None
                if gid in source and keep.get(gid) is cell:
                    self._restore(cell, index, source[gid], points.get(gid), gid in solutions,
                                  gid in tasks, events)
                    continue
                if gid in source:
                    message = f"cell {index} is a duplicate of '{gid}'; it was made a plain cell"
                    events.append(event("duplicated", message, cell=index, grade_id=gid,
                                         changed_source=cell.source != source[gid].source))
                elif any(grading_meta(cell).get(k) for k in ("grade", "solution", "locked")) \
                        or gid is not None or not isinstance(meta, dict):
                    events.append(event("unknown_cell", f"cell {index} carries nbgrader metadata with an "
                                         f"id the gradebook does not know ({gid!r}); it was removed",
                                         cell=index, grade_id=gid if isinstance(gid, str) else None))
                del cell.metadata["nbgrader"]
                cell.metadata.pop("editable", None)
                cell.metadata.pop("deletable", None)
            if self.add_missing_cells:
                self._add_missing(nb, order, source, points, solutions, tasks, events)
        self.gradebook = None
        self._store(resources, events, fresh=fresh)
        return nb, resources

    # the student's own data cell when per-student variants are switched on
    def _data_file(self) -> str:
        """``data_file``, else the one configured for JudgeAnswers (the course's), else none."""
        return self.data_file or self._judge_option("data_file")

    def _judge_option(self, name: str) -> str:
        """The option ``name`` of JudgeAnswers in the same configuration, or empty."""
        try:
            section = self.config.JudgeAnswers
            return str(section[name]) if name in section else ""
        except AttributeError:
            return ""

    def _variant(self, data: dict, student: str) -> dict:
        """The student's problem data: from the class's store of the run
        (:func:`rbtutor.grading.judge.write_class_keys`) when it holds it, else worked out here."""
        store = self._judge_option("class_keys")
        stored = stored_variant(store, data, student) if store else None
        return stored if stored is not None else variant(data, student)

    def _personal_data_cell(self, source: dict, resources) -> None:
        """With variants on, the locked data cell is restored to the student's own numbers.

        ``source[DATA_ID]`` is replaced by a stand-in with the source
        :class:`rbtutor.course.personal.PersonalFetchAssignment` writes for this student,
        and its checksum, so that the student's untouched cell counts as untouched.
        """

        student = (resources.get("nbgrader") or {}).get("student")
        src = source.get(DATA_ID)
        if student is None or src is None:
            return
        data, _ = course_reference(self._data_file() or None)
        if not per_student(data):
            return
        match = re.match(r"#\s*Problem\s+(\d+)\s+data\b", src.source)
        if match is None:
            raise ValueError(f"the {DATA_ID} cell of the source does not start with '# Problem N data'")

        text = data_source(int(match.group(1)), self._variant(data, student))
        probe = from_dict({"cell_type": src.cell_type, "source": text, "metadata": {"nbgrader": {
            "grade": False, "solution": False, "locked": bool(src.locked), "grade_id": src.name}}})
        source[DATA_ID] = SimpleNamespace(name=src.name, cell_type=src.cell_type, locked=src.locked,
                                          source=text, checksum=compute_checksum(probe))

    def _keepers(self, nb, source, solutions, events):
        """For each known id, the one cell that keeps it."""
        found: dict[str, list] = {}
        for cell in nb.cells:
            gid = grading_meta(cell).get("grade_id")
            if isinstance(gid, str) and gid in source:
                found.setdefault(gid, []).append(cell)
        keep = {}
        for gid, cells in found.items():
            if len(cells) == 1 or gid in solutions:
                keep[gid] = cells[0]
            else:
                intact = [c for c in cells if c.source == source[gid].source]
                keep[gid] = intact[0] if intact else cells[-1]
        return keep

    def _restore(self, cell, index, src, max_score, is_solution, is_task, events):
        meta = grading_meta(cell)
        gid = src.name
        changes = []
        if cell.cell_type != src.cell_type:
            changes.append(("cell_type", cell.cell_type, src.cell_type))
            self.update_cell_type(cell, src.cell_type)
        want = {"grade": max_score is not None and not is_task, "solution": is_solution,
                "locked": bool(src.locked), "task": is_task}
        for key, value in want.items():
            if bool(meta.get(key, False)) != value:
                changes.append((key, bool(meta.get(key, False)), value))
        if max_score is not None:
            try:
                old = float(meta.get("points"))
            except (TypeError, ValueError):
                old = meta.get("points")
            if old != max_score:
                changes.append(("points", old, max_score))
        if src.locked and cell.source != src.source:
            changes.append(("source", cut(cell.source, 300), "the original source"))
            cell.source = src.source
        claimed = meta.get("checksum")
        if (src.locked or max_score is not None) and claimed and claimed != src.checksum:
            changes.append(("checksum", claimed, src.checksum))
        new = {"grade_id": gid, "schema_version": 3, **want, "checksum": src.checksum}
        if max_score is not None:
            new["points"] = max_score
        cell.metadata["nbgrader"] = NotebookNode(new)
        if src.locked:
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
        if changes:
            kinds = {"cell_type": "retyped", "grade": "reflagged", "solution": "reflagged",
                     "locked": "reflagged", "task": "reflagged", "points": "points_changed",
                     "source": "locked_edited", "checksum": "checksum_forged"}
            for key, old, value in changes:
                self.report_change(gid, key, value, old)
                events.append(event(kinds[key], f"'{gid}': {key} was {old!r}, restored to {value!r}",
                                     cell=index, grade_id=gid, field=key, submitted=old, restored=value))
        return cell

    def _add_missing(self, nb, order, source, points, solutions, tasks, events):
        present = {grading_meta(c).get("grade_id") for c in nb.cells if grading_meta(c).get("grade_id")}
        for position, gid in enumerate(order):
            if gid in present or gid in tasks:
                continue
            src = source[gid]
            if gid not in points and not src.locked:
                continue  # a deleted answer cell: the answer is simply missing
            if gid in points and gid not in solutions:
                cell = self.missing_cell_transform(src, points[gid])
            else:
                cell = self._copy_of(src, points.get(gid), gid in solutions)
            anchor = -1
            for previous in reversed(order[:position]):
                indices = [i for i, c in enumerate(nb.cells) if grading_meta(c).get("grade_id") == previous]
                if indices:
                    anchor = indices[0]
                    break
            if nb.get("nbformat", 4) >= 4 and nb.get("nbformat_minor", 0) >= 5 and "id" not in cell:
                cell["id"] = uuid.uuid4().hex[:8]
            nb.cells.insert(anchor + 1, cell)
            present.add(gid)
            events.append(event("deleted", f"'{gid}' was missing from the submission; it was put back",
                                 cell=anchor + 1, grade_id=gid))
        if tasks:
            self.add_missing_task_cells(nb, None)

    @staticmethod
    def _copy_of(src, max_score, is_solution):
        meta = {"grade": max_score is not None, "grade_id": src.name, "locked": bool(src.locked),
                "solution": is_solution, "task": False, "schema_version": 3, "checksum": src.checksum}
        if max_score is not None:
            meta["points"] = max_score
        cell = {"cell_type": src.cell_type, "source": src.source, "metadata": {"nbgrader": meta}}
        if src.locked:
            cell["metadata"].update(editable=False, deletable=False)
        if src.cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        return MetadataValidator().upgrade_cell_metadata(NotebookNode(cell))




# --------------------------------------------------------------------------- metadata check


class _SchemaCompiledOnce(BaseMetadataValidator):
    """nbgrader's per-cell schema check with one compiled validator per process.

    ``jsonschema.validate``, which nbgrader calls for every cell, checks the schema itself and
    builds a new validator each time (about 11 ms per notebook); the verdicts are the same.
    """

    _compiled = None

    def validate_cell(self, cell):
        meta = cell.metadata.get("nbgrader")
        if meta is None or meta.get("schema_version", 0) != self.schema_version:
            return super().validate_cell(cell)  # no metadata, or nbgrader's own version errors
        if _SchemaCompiledOnce._compiled is None:
            kind = jsonschema.validators.validator_for(self.schema)
            kind.check_schema(self.schema)
            _SchemaCompiledOnce._compiled = kind(self.schema)
        error = jsonschema.exceptions.best_match(_SchemaCompiledOnce._compiled.iter_errors(meta))
        if error is not None:
            raise error


class _MetadataValidator(MetadataValidator, _SchemaCompiledOnce):
    """nbgrader's current metadata validator; its call to the base class's per-cell check lands in
    :class:`_SchemaCompiledOnce` (next in the method order), the rest of its checks unchanged."""


class CheckMetadata(CheckCellMetadata):
    """nbgrader's CheckCellMetadata (valid cell metadata, unique grade ids), the schema compiled once."""

    def preprocess(self, nb, resources):
        try:
            _MetadataValidator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            raise ValidationError("Notebook failed to validate; the nbgrader metadata may be corrupted.") from None
        return nb, resources
