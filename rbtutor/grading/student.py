"""Step: student helpers. The code of the locked ``course_helpers`` cell, as a module that is tested.

Everything below the line ``# --- notebook cell ---`` is copied verbatim into the
locked helper cell of every assignment notebook by
:func:`rbtutor.course.render.render` (so the notebook never imports rbtutor, which
the grading kernel refuses). It defines

* ``AUTOGRADING``: True while the course grades (plots are skipped then);
* ``check_form``: the form of an answer (type, shape, finite entries, symmetry,
  rotation, unit norm) for Validate, in the student's kernel; never its value;
* ``hand_in``: passes the value to the grader as one output of the MIME type of
  :mod:`rbtutor.grading.protocol`; nothing is judged in the kernel;
* ``ANSWER_FORMS``: the form of each answer id of the notebook (a shape as a list, ``"text"``,
  ``"quaternion"`` or ``"rotation"``), written by the renderer
  (:func:`rbtutor.course.render.answer_forms`); not secret;
* ``form_problem``: what is wrong with the form of a value for a check (it does not parse, has the
  wrong shape, is not a unit quaternion or a rotation), or None; the check service uses the same
  function, so a value refused in the kernel and one refused by the service get the same words;
* ``check``: asks the hub's check service (:mod:`rbtutor.course.checks`) for
  an instant verdict and prints it in one line (:func:`reply_line`); off the hub it says that
  checks are not available. An unknown answer id and a value of the wrong form are answered in
  the kernel, with what was expected, and nothing is sent, so nothing is spent.
  Under nbgrader's Validate (``NBGRADER_EXECUTION=validate``) and while the course
  grades (``NBGRADER_EXECUTION=autograde`` or ``RBTUTOR_AUTOGRADING=1``) it sends
  nothing and says so in one line, so that pressing Validate spends none of the
  limited checks. It never raises.

A failed form check shows as one line, the student's problem first ("Form check failed:
K should have shape (3,), got (4,); ..."), without the helper's internals; a NameError in a
test cell gets a hint about the answer cell that defines the name.
"""

# --- notebook cell ---
# Course helpers: locked, do not edit. Validate runs check_form, which looks only at the
# FORM of an answer (type, shape, finite entries, structure). The VALUES are graded after
# you submit, by the course's grader, outside this notebook.
import json
import os
import sys
import urllib.error
import urllib.request
from urllib.parse import urljoin

import numpy as np
from IPython import get_ipython
from IPython.display import display

AUTOGRADING = os.environ.get("RBTUTOR_AUTOGRADING") == "1"  # True while the course grades
ANSWER_MIME = "application/vnd.rbtutor.answer+json"
ANSWER_FORMS = {}  # the form of each answer of this notebook; written by `rbtutor render`


class FormCheckFailed(AssertionError):
    """The form of an answer is wrong (type, shape, entries); the message says what to fix."""


def _short_errors(shell, etype, value, tb, tb_offset=None):
    """Show a failed form check as its message alone, and add a hint to a NameError."""
    if issubclass(etype, FormCheckFailed):
        shell._showtraceback(etype, value, [f"Form check failed: {value}"])
        return
    hint = (f"Hint: {value}. Run the answer cell of this part and assign your answer to that name "
            "(a cell that still raises NotImplementedError has not been answered yet).")
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb + [hint])


if get_ipython() is not None:
    get_ipython().set_custom_exc((NameError, FormCheckFailed), _short_errors)


def _require(condition, message):
    if not condition:
        raise FormCheckFailed(message)


def check_form(name, value, shape=None, symmetric=False, positive_definite=False,
               skew_symmetric=False, rotation=False, unit_quaternion=False, text=False):
    """Raise FormCheckFailed, saying what to fix, when the answer has the wrong form."""
    if "rbtutor" in sys.modules:
        print("Warning: this notebook imports rbtutor, the instructor's library. It is not "
              "available while your work is graded, so compute everything yourself.", file=sys.stderr)
    if text:
        _require(isinstance(value, str) and value.strip(), f"{name} should be a non-empty string")
        return
    _require(value is not None, f"{name} is None: assign your answer to it")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise FormCheckFailed(f"{name} should be a number or an array of numbers, "
                              f"got {type(value).__name__}") from None
    if shape is not None:
        _require(arr.size == int(np.prod(shape)) and arr.squeeze().shape == tuple(s for s in shape if s != 1),
                 f"{name} should have shape {shape}, got {arr.shape}; check which quantities you stacked")
        arr = arr.reshape(shape)
    _require(np.all(np.isfinite(arr)), f"{name} has NaN or infinite entries; look for a division by zero")
    if symmetric:
        _require(np.allclose(arr, arr.T, rtol=1e-9, atol=1e-9 * np.abs(arr).max()),
                 f"{name} should be symmetric; compare the off-diagonal blocks "
                 "and the signs of the products of inertia")
    if positive_definite:
        _require(np.all(np.linalg.eigvalsh((arr + arr.T) / 2) > 0),
                 f"{name} should be positive definite (kinetic energy is positive for any motion)")
    if skew_symmetric:
        _require(np.allclose(arr, -arr.T, atol=1e-9 * max(np.abs(arr).max(), 1.0)),
                 f"{name} should be skew-symmetric: C + C^T = 0 for any velocity; check the signs of its blocks")
    if rotation:
        _require(np.allclose(arr.T @ arr, np.eye(3), atol=1e-9) and np.linalg.det(arr) > 0,
                 f"{name} should be a rotation: orthonormal with determinant +1")
    if unit_quaternion:
        _require(abs(np.linalg.norm(arr) - 1.0) < 1e-6, f"{name} should be a unit quaternion (norm 1)")


def hand_in(answer_id, value):
    """Pass the value to the grader. Nothing is judged here."""
    if isinstance(value, str):
        payload = {"id": answer_id, "text": value}
    else:
        try:
            payload = {"id": answer_id, "value": np.asarray(value, dtype=float).tolist()}
        except (TypeError, ValueError):
            payload = {"id": answer_id, "unreadable": type(value).__name__}
    note = f"{answer_id}: form checks passed; the value is graded after you submit"
    display({ANSWER_MIME: payload, "text/plain": note}, raw=True)


# check(): an instant verdict from the course hub's check service (rbtutor.course.checks)
CHECK_SERVICE = "rbtutor-check"


def _check_url():
    """The check service's address: RBTUTOR_CHECK_URL (set by the hub), else from the hub's public URL."""
    url = os.environ.get("RBTUTOR_CHECK_URL")
    if url:
        return url.rstrip("/") + "/api/check"
    public = os.environ.get("JUPYTERHUB_PUBLIC_HUB_URL") or os.environ.get("JUPYTERHUB_PUBLIC_URL")
    if not public:
        return None

    base = os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/"
    return urljoin(public, f"{base}services/{CHECK_SERVICE}/api/check")


def _not_now():
    """Why check() must not call the service in this run (Validate, grading), or None."""
    execution = os.environ.get("NBGRADER_EXECUTION")
    if execution == "validate":
        return "not sent during Validate, which would use up your checks; run the cell yourself to check"
    if AUTOGRADING or execution == "autograde":
        return "not sent while the course grades; the grader judges the value handed in"
    return None


#: how far a quaternion's norm, or R^T R, may be from 1 or I before a check is refused
#: (far more than a right answer's round-off)
FORM_SLACK = 0.05


def _count(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe(shape):
    """A shape in words: a single number, 4 numbers, a 3 x 3 matrix."""
    if shape == ():
        return "a single number"
    if len(shape) == 1:
        return _count(shape[0], "number") if shape[0] else "no numbers"
    if len(shape) == 2:
        return f"a {shape[0]} x {shape[1]} matrix"
    return f"an array of shape {shape}"


def expected_form(form):
    """What an answer of ``form`` (see ANSWER_FORMS) is, in words: "4 numbers (a unit quaternion)"."""
    if form == "text":
        return "a short text"
    shape = (4,) if form == "quaternion" else (3, 3) if form == "rotation" else tuple(form)
    structure = {"quaternion": " (a unit quaternion)", "rotation": " (a rotation)"}
    return _describe(shape) + (structure[form] if isinstance(form, str) else "")


def form_problem(value, form):
    """What keeps ``value`` from being checked as an answer of ``form`` (see ANSWER_FORMS), or None."""
    if form == "text":
        if not isinstance(value, str) or not value.strip():
            return f"expected {expected_form(form)}, got {type(value).__name__}"
        return None if len(value) <= 200 else f"expected a short text, got {len(value)} characters"
    shape = (4,) if form == "quaternion" else (3, 3) if form == "rotation" else tuple(form)
    expected = expected_form(form)
    if isinstance(value, str):
        return f"expected {expected}, got text"
    try:
        arr = np.squeeze(np.asarray(value, dtype=float))
    except (TypeError, ValueError, OverflowError):
        return f"expected {expected}, got {type(value).__name__}"
    if arr.shape != shape:
        swapped = " (rows and columns swapped?)" if arr.ndim == 2 and arr.shape == shape[::-1] else ""
        return f"expected {expected}, got {_describe(arr.shape)}{swapped}"
    if not np.all(np.isfinite(arr)):
        return f"expected {expected}, got NaN or infinity"
    if form == "quaternion" and abs(np.linalg.norm(arr) - 1.0) > FORM_SLACK:
        return f"expected a unit quaternion, got norm {np.linalg.norm(arr):.3g}: normalise it"
    if form == "rotation" and (np.abs(arr.T @ arr - np.eye(3)).max() > FORM_SLACK or np.linalg.det(arr) < 0):
        return "expected a rotation matrix: orthonormal, with determinant +1"
    return None


def reply_line(answer_id, verdict):
    """The one line check() prints for a reply of the check service."""
    head = "right" if verdict.get("passed") else "not right yet"
    words = verdict.get("message") or ""
    left = verdict.get("checks_left")
    tail = "" if left is None else f" {_count(left, 'check')} of this part left this hour."
    return f"{answer_id}: {head}{': ' + words if words else ''}.{tail}"


def check(answer_id, value):
    """Ask the course hub whether the answer is right; print its verdict (never the value). Never raises.

    An unknown answer id, or a value that does not parse or has the wrong form, is answered here,
    in the kernel, and nothing is sent: no check is spent.
    """
    reason = _not_now()
    if reason:
        print(f"{answer_id}: check {reason}.")
        return None
    if answer_id not in ANSWER_FORMS:
        known = ", ".join(sorted(ANSWER_FORMS)[:3]) + (", ..." if len(ANSWER_FORMS) > 3 else "")
        print(f"{answer_id!r}: not checked (nothing spent): no answer of this notebook has this id; "
              f"the ids are those of the test cells ({known})")
        return None
    problem = form_problem(value, ANSWER_FORMS[answer_id])
    if problem:
        print(f"{answer_id}: not checked (nothing spent): {problem}")
        return None
    token = os.environ.get("JUPYTERHUB_API_TOKEN")
    url = _check_url() if token else None
    if not token or not url:
        print(f"{answer_id}: checks are not available here. They are answered by the course hub, and "
              "this kernel was not started by it (no JUPYTERHUB_API_TOKEN"
              + ("" if not token else " or hub address") + "). Your answer is still graded after you submit.")
        return None

    sent = value if isinstance(value, str) else np.asarray(value, dtype=float).tolist()
    body = json.dumps({"id": answer_id, "value": sent}, allow_nan=False).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    print(f"{answer_id}: checking with the course hub (a few seconds at most)...", flush=True)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            verdict = json.loads(response.read().decode())
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read().decode()).get("error") or exc.reason
        except (ValueError, AttributeError, OSError):
            reason = exc.reason
        spent = "" if exc.code == 500 else " (nothing spent)"  # only a reply held back for the key counts
        print(f"{answer_id}: not checked{spent}: {reason}")
        return None
    except (OSError, ValueError) as exc:
        print(f"{answer_id}: not checked: the check service did not answer ({exc}). "
              "Your answer is still graded after you submit.")
        return None
    print(reply_line(answer_id, verdict))
    return None
