"""Step: protocol. What a graded notebook and the grader agree on, and nothing else.

A locked test cell calls ``hand_in(answer_id, value)`` (see
:mod:`rbtutor.grading.student`), which displays one output of MIME type
:data:`ANSWER_MIME` whose payload is a small JSON object:

``{"id": "p3.b.K", "value": <nested lists of floats>}``, or ``{"id": ..., "text": "..."}``
for a text answer, or ``{"id": ..., "unreadable": "<type name>"}`` when the value
could not be turned into numbers in the kernel.

Everything else the kernel sends is ignored by the judge. The payload is read by
:func:`handed_in` only, which checks its shape and never trusts its content.
"""

from __future__ import annotations

import re

ANSWER_MIME = "application/vnd.rbtutor.answer+json"
#: grade ids of the two locked cells every assignment notebook carries
HELPERS_ID, DATA_ID = "course_helpers", "problem_data"
#: how a test cell names the answer it hands in: ``hand_in("p3.b.K", K)``
HAND_IN = re.compile(r"""^\s*hand_in\(\s*["'](p\d+\.[a-z]\.\w+)["']""", re.M)


def handed_in(cell, answer_id: str) -> dict | None:
    """The last well-formed payload for ``answer_id`` among a cell's outputs, or None.

    A payload is well formed when it is a dict whose ``id`` is ``answer_id`` and which
    carries exactly one of ``value``, ``text`` or ``unreadable``.
    """
    found = None
    for output in cell.get("outputs", []):
        if not isinstance(output, dict) or output.get("output_type") not in ("display_data", "execute_result"):
            continue
        data = output.get("data")
        payload = data.get(ANSWER_MIME) if isinstance(data, dict) else None
        if isinstance(payload, dict) and payload.get("id") == answer_id \
                and sum(key in payload for key in ("value", "text", "unreadable")) == 1:
            found = payload
    return found
