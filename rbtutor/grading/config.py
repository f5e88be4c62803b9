"""Every grading option, once: limits, timeouts, seeds, the late share and the check limits.

:class:`GradingConfig` declares each option with its type, default, unit, a one-sentence
description, the pipeline step that reads it and the name that step reads it under
(``where``). :data:`GRADING` is the instance with the defaults; the modules of every step
take their constants and trait defaults from it, so an edit here is an edit everywhere and
the old names (``sandbox.plan.DEFAULT_MEMORY``, ``BoundedExecute.notebook_timeout`` ...)
stay importable where they were. The sandbox's own constants are the exception: its launcher
imports the standard library only (this module would add about 60 ms to each kernel start), so
they stay literals there, and ``tests/test_config.py`` fails when any reader of rbtutor's, literal
or not, holds another value than its entry here. A trait of another package (nbgrader's
``Execute.timeout``, whose own default is 30) gets its value from
:func:`rbtutor.course.nbgrader.configure`, which sets every trait option of a course.

A course sets an option in its ``course.toml`` (:mod:`rbtutor.course.settings`: section the step,
key :func:`course_key`) when the option is read through a trait (``where`` names a
``Class.trait``, which :func:`rbtutor.course.nbgrader.configure` sets in the grading run's
configuration) or handed to the sandbox's launcher (``env`` names the internal variable the grader
sets for it); :func:`settable` says which. The others are constants of the code. Every value is
checked by :func:`check_value` (type, finite, at least 0 but where a negative value means "none",
one of the ``choices``), and :func:`expected` says in words what an option takes. ``rbtutor
config`` prints the table (:func:`option_rows`, :func:`format_table`) with each value's source.

This module imports nothing of :mod:`rbtutor.grading`, so every step can import it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields

KIB = 2**10
MIB = 2**20
GIB = 2**30

#: the configurable classes among the readers: their options can be set in ``nbgrader_config.py``
TRAIT_CLASSES = frozenset({"Execute", "BoundedExecute", "CapOutput", "PercentPerDay"})
#: the steps, in the order a submission meets them (the ``step`` of every option is one of these)
STEPS = ("intake", "sandbox", "execute", "outputs", "feedback", "run", "late", "checks")


def option(default, *, unit: str, step: str, where: tuple[str, ...], help: str, env: str | None = None,
           choices: tuple[str, ...] | None = None):
    """A field of :class:`GradingConfig` with what the table shows about it.

    ``where`` lists the ``module:name`` each reader takes the value from: a module constant
    (``rbtutor.grading.feedback:PAGE_TIME_LIMIT``), a trait (``module:Class.trait``), a
    dataclass field (``module:Class.field``) or a dict entry (``module:NAME[key]``). ``env`` names
    the variable through which the grader hands the value to the sandbox's launcher (internal: a
    course sets the option in ``course.toml``); ``choices`` lists the only values a text option takes.
    """
    if step not in STEPS:
        raise ValueError(f"expected step to be one of {STEPS}, got {step!r}")
    if not where or not help.strip() or not unit.strip():
        raise ValueError(f"expected a unit, a description and at least one reader for an option, got "
                         f"unit={unit!r}, help={help!r}, where={where!r}")
    return field(default=default, metadata={"unit": unit, "step": step, "where": where, "help": help,
                                            "env": env, "choices": choices})


@dataclass(frozen=True)
class GradingConfig:
    """The grading options with their defaults (see the module docstring); frozen, checked on creation."""

    # --- intake: what one submission may hold (rbtutor.grading.intake) ---
    intake_max_files: int = option(
        64, unit="files", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_files",),
        help="Files taken from one submission; more are refused.")
    intake_flood_factor: int = option(
        4, unit="× intake_max_files", step="intake", where=("rbtutor.grading.intake.files:FLOOD_FACTOR",),
        help="The listing of a submission stops after this many entries per allowed file.")
    intake_max_depth: int = option(
        4, unit="folders", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_depth",),
        help="Folders below the submission folder that are listed.")
    intake_max_file_bytes: int = option(
        16 * MIB, unit="bytes", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_file_bytes",),
        help="Largest file taken that is not a notebook.")
    intake_max_total_bytes: int = option(
        64 * MIB, unit="bytes", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_total_bytes",),
        help="Bytes of everything taken from one submission.")
    intake_max_notebook_bytes: int = option(
        16 * MIB, unit="bytes", step="intake",
        where=("rbtutor.grading.intake.limits:Limits.max_notebook_bytes",),
        help="Largest .ipynb file; it is parsed from at most this many bytes.")
    intake_max_cells: int = option(
        1000, unit="cells", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_cells",),
        help="Cells kept of one notebook; the rest are dropped.")
    intake_max_cell_source_bytes: int = option(
        100_000, unit="bytes", step="intake",
        where=("rbtutor.grading.intake.limits:Limits.max_cell_source_bytes",),
        help="UTF-8 bytes of one cell's source; a longer source is cut at a character boundary.")
    intake_max_attachment_bytes: int = option(
        1 * MIB, unit="bytes", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_attachment_bytes",),
        help="JSON bytes of one markdown or raw cell's attachments; larger attachments are dropped.")
    intake_max_cell_metadata_bytes: int = option(
        16 * KIB, unit="bytes", step="intake",
        where=("rbtutor.grading.intake.limits:Limits.max_cell_metadata_bytes",),
        help="JSON bytes of one cell's metadata; past it only the cell's nbgrader entry is kept.")
    intake_max_notebook_metadata_bytes: int = option(
        64 * KIB, unit="bytes", step="intake",
        where=("rbtutor.grading.intake.limits:Limits.max_notebook_metadata_bytes",),
        help="JSON bytes of the notebook's metadata; past it only kernelspec, language_info and nbgrader are kept.")
    intake_max_name_bytes: int = option(
        255, unit="bytes", step="intake", where=("rbtutor.grading.intake.limits:Limits.max_name_bytes",),
        help="Longest file or folder name taken.")
    intake_max_inbound_entries: int = option(
        100_000, unit="entries", step="intake",
        where=("rbtutor.grading.intake.limits:Limits.max_inbound_entries",),
        help="Entries of the exchange's inbound folder that collect lists; more is an error.")
    intake_timestamp_bytes: int = option(
        100, unit="bytes", step="intake", where=("rbtutor.grading.intake.limits:TIMESTAMP_BYTES",),
        help="Largest timestamp.txt read from a submission.")
    intake_timestamp_mismatch: float = option(
        60.0, unit="seconds", step="intake", where=("rbtutor.grading.intake.times:MISMATCH_SECONDS",),
        help="A claimed submission time further than this from the time the entry appeared is reported.")

    # --- sandbox: the confined kernel (rbtutor.grading.sandbox) ---
    sandbox_memory: int = option(
        4 * GIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:DEFAULT_MEMORY",),
        env="RBTUTOR_KERNEL_MEMORY", help="Address space of each kernel process (RLIMIT_AS).")
    sandbox_tree_memory: int = option(
        2 * GIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:DEFAULT_TREE_MEMORY",),
        env="RBTUTOR_KERNEL_TREE_MEMORY",
        help="Resident memory of the kernel and all its processes together, where a cgroup can be made.")
    sandbox_nproc: int = option(
        128, unit="processes", step="sandbox", where=("rbtutor.grading.sandbox.plan:DEFAULT_NPROC",),
        env="RBTUTOR_KERNEL_NPROC", help="Processes the kernel's user may start beyond those it already has.")
    sandbox_fsize: int = option(
        1 * GIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:DEFAULT_FSIZE",),
        env="RBTUTOR_KERNEL_FSIZE", help="Largest file the kernel may write (RLIMIT_FSIZE).")
    sandbox_tmp_bytes: int = option(
        512 * MIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:TMP_SIZE",),
        help="Size of the kernel's private /tmp.")
    sandbox_work_bytes: int = option(
        256 * MIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:WORK_SIZE",),
        help="Size of the kernel's working folder, a tmpfs inside the sandbox.")
    sandbox_hide_bytes: int = option(
        4 * MIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:HIDE_SIZE",),
        help="Size of each empty tmpfs laid over a path the kernel must not see.")
    sandbox_socket_bytes: int = option(
        16 * KIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:SOCKET_FS_SIZE",),
        help="Size of the tmpfs that holds the kernel's IPC sockets.")
    sandbox_output_keep: int = option(
        64 * KIB, unit="bytes", step="sandbox", where=("rbtutor.grading.sandbox.plan:OUTPUT_KEEP",),
        help="Bytes of the kernel's own stdout and stderr kept for the grader.")
    sandbox_hash_seed: str = option(
        "0", unit="PYTHONHASHSEED", step="sandbox", where=("rbtutor.grading.sandbox.plan:KERNEL_HASH_SEED",),
        help="String hashing seed of every grading kernel, so set and dict order repeat between runs.")
    sandbox_zygote_receive_timeout: int = option(
        10, unit="seconds", step="sandbox", where=("rbtutor.grading.sandbox.zygote:RECEIVE_TIMEOUT",),
        help="Time a launcher has to send its request to the zygote once connected.")

    # --- execute: the notebook run (rbtutor.grading.execute) ---
    execute_cell_timeout: int = option(
        120, unit="seconds", step="execute", where=("nbgrader.preprocessors:Execute.timeout",),
        help="Time limit of one cell (nbgrader's own option, whose own default is 30; met by BoundedExecute "
             "with the time left).")
    execute_notebook_timeout: float = option(
        300.0, unit="seconds", step="execute",
        where=("rbtutor.grading.execute:BoundedExecute.notebook_timeout",),
        help="Time limit of the whole notebook, counted from kernel start; zero or less means none.")
    execute_max_cell_output_bytes: int = option(
        1_000_000, unit="bytes", step="execute",
        where=("rbtutor.grading.execute:BoundedExecute.max_cell_output_bytes",),
        help="Outputs kept of one cell while it runs; the rest is dropped on arrival.")
    execute_max_notebook_output_bytes: int = option(
        20_000_000, unit="bytes", step="execute",
        where=("rbtutor.grading.execute:BoundedExecute.max_notebook_output_bytes",),
        help="Outputs kept of the whole notebook while it runs.")
    execute_max_message_bytes: int = option(
        64 * MIB, unit="bytes", step="execute",
        where=("rbtutor.grading.execute:BoundedExecute.max_message_bytes",),
        help="A kernel message larger than this is dropped by zmq before the grader decodes it.")
    execute_max_message_depth: int = option(
        64, unit="levels", step="execute", where=("rbtutor.grading.execute:MAX_MESSAGE_DEPTH",),
        help="Deepest nesting of a message's content and metadata the grader accepts.")
    execute_seed_key: str | None = option(
        None, unit="text", step="execute", where=("rbtutor.grading.execute:BoundedExecute.seed_key",),
        help="Key of each kernel's random seed; None takes the grader's random key in the course's "
             ".grading folder (never the variants salt, which a seed must not reveal).")
    execute_output_grace: float = option(
        4.0, unit="seconds", step="execute", where=("rbtutor.grading.execute:BoundedExecute.output_grace",),
        help="Time a cell's remaining output has to arrive after the cell's deadline (nbclient's iopub_timeout, "
             "which counts from the cell's reply instead).")
    execute_shutdown_kernel: str = option(
        "immediate", unit="graceful | immediate", step="execute", choices=("graceful", "immediate"),
        where=("rbtutor.grading.execute:BoundedExecute.shutdown_kernel",),
        help="How the kernel is stopped once its notebook has run.")

    # --- outputs: the byte budget of what the kernel sent back (rbtutor.grading.outputs) ---
    outputs_max_answer_bytes: int = option(
        1_000_000, unit="bytes", step="outputs",
        where=("rbtutor.grading.execute:BoundedExecute.max_answer_bytes",
               "rbtutor.grading.outputs:CapOutput.max_answer_bytes"),
        help="A hand-in payload larger than this is dropped, so the answer is not judged.")
    outputs_max_output_bytes: int = option(
        100_000, unit="bytes", step="outputs", where=("rbtutor.grading.outputs:CapOutput.max_output_bytes",),
        help="Bytes of one output kept in the graded notebook; text is cut, rich outputs dropped.")
    outputs_max_notebook_bytes: int = option(
        1_000_000, unit="bytes", step="outputs", where=("rbtutor.grading.outputs:CapOutput.max_notebook_bytes",),
        help="Bytes of all outputs kept in the graded notebook; later outputs are dropped.")

    # --- feedback: the page a student gets back (rbtutor.grading.feedback) ---
    feedback_time_limit: float = option(
        20.0, unit="seconds", step="feedback", where=("rbtutor.grading.feedback:PAGE_TIME_LIMIT",),
        help="Rendering time of one feedback page after which the remaining cells are left out.")
    feedback_max_bytes: int = option(
        4_000_000, unit="bytes", step="feedback", where=("rbtutor.grading.feedback:PAGE_MAX_BYTES",),
        help="Rendered cells of one feedback page after which the remaining cells are left out.")
    feedback_hard_time_factor: float = option(
        1.5, unit="× feedback_time_limit", step="feedback", where=("rbtutor.grading.feedback:HARD_TIME_FACTOR",),
        help="Past this multiple of the time limit rendering stops and the page shows the scores only.")
    sanitize_max_html_depth: int = option(
        128, unit="levels", step="feedback", where=("rbtutor.grading.html_shape:MAX_HTML_DEPTH",),
        help="HTML whose open elements (re-opened formatting elements included) nest deeper is shown as text, "
             "never parsed.")
    sanitize_max_html_chars: int = option(
        1_000_000, unit="characters", step="feedback", where=("rbtutor.grading.html_shape:MAX_HTML_CHARS",),
        help="HTML fragment longer than this (markdown rendered included) is shown as text, never parsed.")
    sanitize_text_shown_chars: int = option(
        10_000, unit="characters", step="feedback", where=("rbtutor.grading.html_shape:TEXT_SHOWN_CHARS",),
        help="Characters of text shown of a fragment that was not parsed; the rest is counted.")
    sanitize_max_markdown_chars: int = option(
        200_000, unit="characters", step="feedback", where=("rbtutor.grading.mathml:MAX_MARKDOWN_CHARS",),
        help="Markdown text longer than this is shown as text, never rendered.")
    sanitize_max_inline_marks: int = option(
        2_000, unit="characters", step="feedback", where=("rbtutor.grading.mathml:MAX_INLINE_MARKS",),
        help="A paragraph with more emphasis, link, code or HTML marks (* _ [ ] ! < ` ~) is shown literally.")
    sanitize_time_limit: float = option(
        60.0, unit="seconds", step="feedback", where=("rbtutor.grading.sanitize:SANITIZE_TIME_LIMIT",),
        help="Sanitising one autograded notebook runs in a child process killed after this long.")
    sanitize_max_notebook_bytes: int = option(
        4 * MIB, unit="bytes", step="feedback", where=("rbtutor.grading.sanitize:MAX_STORED_BYTES",),
        help="Stored autograded notebook: past this, student-written cell contents are replaced by a note.")

    # --- run: one grading run (rbtutor.course.grade, rbtutor.course.cluster) ---
    run_submission_seconds: float = option(
        600.0, unit="seconds", step="run", where=("rbtutor.course.grade:SUBMISSION_SECONDS",),
        help="Longest one submission may take in a grading worker, all steps together, before it is not graded.")
    run_allowed_failures: int = option(
        2, unit="lost workers", step="run", where=("rbtutor.course.cluster:ALLOWED_FAILURES",),
        help="Times a Dask task may lose its worker before it is listed as failed.")
    run_retries: int = option(
        1, unit="retries", step="run", where=("rbtutor.course.cluster:RETRIES",),
        help="Times a Dask task that raised is tried again.")
    run_connect_timeout: float = option(
        10.0, unit="seconds", step="run", where=("rbtutor.course.cluster:CONNECT_TIMEOUT",),
        help="Wait for the Dask scheduler to answer.")
    run_worker_timeout: float = option(
        30.0, unit="seconds", step="run", where=("rbtutor.course.cluster:WORKER_TIMEOUT",),
        help="Wait for a first Dask worker to join the scheduler.")

    # --- late: the penalty (rbtutor.course.late) ---
    late_percent_per_day: float = option(
        10.0, unit="percent per started day", step="late",
        where=("rbtutor.course.late:PercentPerDay.percent_per_day",),
        help="Share of a notebook's score taken off for every day, or part of one, it is late.")

    # --- checks: the instant-check service (rbtutor.course.checks) ---
    check_enabled: bool = option(
        True, unit="yes/no", step="checks", where=("rbtutor.course.checks.core:DEFAULTS[enabled]",),
        help="Whether the check service judges an assignment that exercises/checks.yaml does not name.")
    check_per_hour: int = option(
        10, unit="attempts per hour", step="checks", where=("rbtutor.course.checks.core:DEFAULTS[per_hour]",),
        help="Checks of one answer a student may ask for in the sliding window.")
    check_window: float = option(
        3600.0, unit="seconds", step="checks", where=("rbtutor.course.checks.core:WINDOW",),
        help="Length of the sliding window the attempt limit counts in.")
    check_stuck_after: int = option(
        3, unit="attempts", step="checks", where=("rbtutor.course.checks.core:STUCK_AFTER",),
        help="Failed attempts after which the statistics count a student as stuck on a part.")
    check_max_body: int = option(
        64 * KIB, unit="bytes", step="checks", where=("rbtutor.course.checks.core:MAX_BODY",),
        help="A check request with a longer body is refused (HTTP 413).")
    check_drain_limit: int = option(
        1 * MIB, unit="bytes", step="checks", where=("rbtutor.course.checks.core:DRAIN_LIMIT",),
        help="Refused bodies up to this size are read to the end before the refusal is sent.")
    check_key_cache: int = option(
        1024, unit="keys", step="checks", where=("rbtutor.course.checks.core:KEY_CACHE",),
        help="Answer keys the service keeps in memory, one per student and problem.")

    def __post_init__(self):
        for spec in fields(self):
            check_value(spec.name, spec.type, getattr(self, spec.name), spec.metadata["choices"])


#: options where a negative value has a meaning (zero or less: no limit)
_MAY_BE_NEGATIVE = frozenset({"execute_notebook_timeout"})
_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "str | None": (str, type(None))}


def check_value(name: str, declared: str, value, choices: tuple[str, ...] | None = None) -> None:
    """Raise ValueError unless ``value`` is of the ``declared`` type, finite, at least 0 (but for the
    options of ``_MAY_BE_NEGATIVE``) and one of ``choices`` when given (a bool is not a number here)."""
    allowed = _TYPES[declared]
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise ValueError(f"expected {name} to be {declared}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"expected {name} to be a finite number, got {value!r}")
        if value < 0 and name not in _MAY_BE_NEGATIVE:
            raise ValueError(f"expected {name} to be at least 0, got {value!r}")
    if choices is not None and value not in choices:
        raise ValueError(f"expected {name} to be one of {', '.join(choices)}, got {value!r}")


def expected(name: str) -> str:
    """What a course may give for option ``name``, in words (``"bytes as a whole number ≥ 0"``)."""
    spec = _SPECS[name]
    unit, choices = spec.metadata["unit"], spec.metadata["choices"]
    if choices:
        return "one of " + ", ".join(f'"{choice}"' for choice in choices)
    if spec.type == "bool":
        return "true or false"
    if spec.type in ("str", "str | None"):
        return f"{unit} as a quoted string" if unit != "text" else "a quoted string"
    bound = "" if name in _MAY_BE_NEGATIVE else " ≥ 0"
    number = "a whole number" if spec.type == "int" else "a number"
    return f"{unit} as {number}{bound}"


#: the defaults, read by every step
GRADING = GradingConfig()
_SPECS = {spec.name: spec for spec in fields(GradingConfig)}


def trait_keys(where: tuple[str, ...]) -> list[tuple[str, str]]:
    """The ``(Class, trait)`` pairs of ``where`` that a course's nbgrader configuration can set."""
    keys = []
    for reader in where:
        _, name = reader.split(":")
        cls, _, trait = name.partition(".")
        if cls in TRAIT_CLASSES:
            keys.append((cls, trait))
    return keys


def settable(name: str) -> bool:
    """Whether a course can set option ``name``: a trait of the grading run, or a limit handed to the sandbox."""
    meta = _SPECS[name].metadata
    return bool(trait_keys(meta["where"]) or meta["env"])


def course_key(name: str) -> tuple[str, str]:
    """``(section, key)`` of option ``name`` in ``course.toml``: its step, and its name without the step's word.

    ``sandbox_memory`` is ``[sandbox] memory``, ``check_per_hour`` is ``[checks] per_hour``; a name that
    starts with another word keeps it (``sanitize_time_limit`` is ``[feedback] sanitize_time_limit``).
    """
    step = _SPECS[name].metadata["step"]
    for word in (step, step.removesuffix("s")):
        if name.startswith(word + "_"):
            return step, name[len(word) + 1:]
    return step, name


def option_rows(config=None, environ=None, chosen=None) -> list[dict]:
    """One dict per option: name, key, settable, type, value, default, source, set_in, unit, step, reads,
    env, ignored_env, description.

    ``chosen`` maps an option's name to ``(value, source)`` as the course's files set it
    (:func:`rbtutor.course.settings.effective`: ``"course.toml:LINE"``, ``"nbgrader_config.py:LINE"``);
    without it, ``config`` (a loaded traitlets configuration) alone gives a trait's value where it
    differs from the default, with source ``"nbgrader_config.py"``. ``set_in`` names those traits
    (``c.Class.trait``) of ``config`` that differ from the default. ``key`` is the option's name in
    ``course.toml`` (``"sandbox.memory"``) and ``ignored_env`` the internal variable of an option
    found set in ``environ`` (default ``os.environ``), which a grading run replaces by the course's value.
    """
    environ = os.environ if environ is None else environ
    chosen = chosen or {}
    rows = []
    for spec in fields(GradingConfig):
        meta, default = spec.metadata, getattr(GRADING, spec.name)
        value, source, set_in = default, "default", []
        for cls, trait in trait_keys(meta["where"]):
            if config is not None and cls in config and trait in config[cls] and config[cls][trait] != default:
                value, source = config[cls][trait], "nbgrader_config.py"
                set_in.append(f"c.{cls}.{trait}")
        if spec.name in chosen:
            value, source = chosen[spec.name]
        ignored = meta["env"] if meta["env"] and meta["env"] in environ else None
        rows.append({"name": spec.name, "key": ".".join(course_key(spec.name)), "settable": settable(spec.name),
                     "type": spec.type, "value": value, "default": default, "source": source, "set_in": set_in,
                     "unit": meta["unit"], "step": meta["step"], "reads": list(meta["where"]), "env": meta["env"],
                     "ignored_env": ignored, "description": meta["help"]})
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows of :func:`option_rows` as a plain-text table, one option a line, description last.

    The column ``course.toml`` gives the key a course sets the option with (``-``: a constant of the code).
    """
    header = ("option", "value", "default", "unit", "source", "course.toml")
    lines = [(r["name"], repr(r["value"]), repr(r["default"]), r["unit"], r["source"],
              r["key"] if r["settable"] else "-") for r in rows]
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + "  description",
           "  ".join("-" * w for w in widths) + "  " + "-" * 11]
    for line, row in zip(lines, rows, strict=True):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + "  " + row["description"])
    return "\n".join(out)
