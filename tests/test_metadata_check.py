"""CheckMetadata (the schema compiled once) gives nbgrader's CheckCellMetadata verdicts, error for error."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from rbtutor.grading.restore import CheckMetadata, _MetadataValidator

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "exercises").glob("problem*/problem*.ipynb"))

# each changes one cell's nbgrader metadata the way a damaged or tampered notebook could
DAMAGE = {
    "points not a number": lambda m: m.update(points="x"),
    "flag not a boolean": lambda m: m.update(grade="yes"),
    "no grade id": lambda m: m.pop("grade_id"),
    "empty grade id": lambda m: m.update(grade_id=""),
    "older schema": lambda m: m.update(schema_version=2),
    "newer schema": lambda m: m.update(schema_version=9),
    "unknown key": lambda m: m.update(unknown=1),
    "cell type not a string": lambda m: m.update(cell_type=3),
    "grade without points": lambda m: (m.update(grade=True), m.pop("points", None)),
    "no metadata left": lambda m: m.clear(),
}


def verdict(validator, nb) -> str:
    try:
        validator.validate_nb(nb)
    except Exception as exc:  # noqa: BLE001 - the verdict is the exception itself
        return f"{type(exc).__name__}: {exc}"
    return "valid"


def damaged(nb, index: int, change) -> nbformat.NotebookNode:
    copy_ = copy.deepcopy(nb)
    change(copy_.cells[index].metadata.nbgrader)
    return copy_


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_same_verdicts_as_nbgrader(source):
    nb = nbformat.read(source, as_version=4)
    graded = [k for k, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata]
    assert graded
    cases = [nb] + [damaged(nb, k, change) for k in graded[:4] for change in DAMAGE.values()]
    twin = copy.deepcopy(nb)  # two cells with one grade id
    ids = [k for k in graded if twin.cells[k].metadata.nbgrader.get("grade_id")]
    twin.cells[ids[1]].metadata.nbgrader.grade_id = twin.cells[ids[0]].metadata.nbgrader.grade_id
    cases.append(twin)
    verdicts = [(verdict(MetadataValidator(), case), verdict(_MetadataValidator(), case)) for case in cases]
    assert verdicts[0] == ("valid", "valid")
    assert all(stock == ours for stock, ours in verdicts), [v for v in verdicts if v[0] != v[1]]
    assert sum(stock != "valid" for stock, _ in verdicts) >= 20  # the damage is seen, not waved through


def test_preprocessor_refuses_as_nbgrader_does():
    nb = nbformat.read(SOURCES[0], as_version=4)
    index = next(k for k, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata)
    bad = damaged(nb, index, DAMAGE["points not a number"])
    for step in (CheckCellMetadata(), CheckMetadata()):
        assert step.preprocess(copy.deepcopy(nb), {})[0] == nb
        with pytest.raises(ValidationError, match="nbgrader metadata may be corrupted"):
            step.preprocess(copy.deepcopy(bad), {})
