"""Every grading option, once: limits, timeouts, seeds, the late share and the check limits.

:class:`GradingConfig` declares each option with its type, default, unit, a one-sentence
description, the pipeline step that reads it and the name that step reads it under
(``where``). :data:`GRADING` is the instance with the defaults; the modules of every step
take their constants and trait defaults from it, so an edit here is an edit everywhere and
the old names (``sandbox.plan.DEFAULT_MEMORY``, ``BoundedExecute.notebook_timeout`` ...)
stay importable where they were. The sandbox's own constants are the exception: its launcher
imports the standard library only (this module would add about 60 ms to each kernel start), so
they stay literals there, and ``tests/test_config.py`` fails when any reader, literal or not,
holds another value than its entry here.

An option read through a trait (``where`` names a ``Class.trait``) can be set in a course's
``nbgrader_config.py`` as before (``c.BoundedExecute.notebook_timeout = 300``); an option
with an ``env`` name can be set in the grader's environment; the others are constants of
the code. ``python -m rbtutor.course config`` prints the table (:func:`option_rows`,
:func:`format_table`), with the values a course's configuration sets.

This module imports nothing of :mod:`rbtutor.grading`, so every step can import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

KIB = 2**10
MIB = 2**20
GIB = 2**30

#: the configurable classes among the readers: their options can be set in ``nbgrader_config.py``
TRAIT_CLASSES = frozenset({"Execute", "BoundedExecute", "CapOutput", "PercentPerDay"})
#: the steps, in the order a submission meets them (the ``step`` of every option is one of these)
STEPS = ("intake", "sandbox", "execute", "outputs", "feedback", "run", "late", "checks")


def option(default, *, unit: str, step: str, where: tuple[str, ...], help: str, env: str | None = None):
    """A field of :class:`GradingConfig` with what the table shows about it.

    ``where`` lists the ``module:name`` each reader takes the value from: a module constant
    (``rbtutor.grading.feedback:PAGE_TIME_LIMIT``), a trait (``module:Class.trait``), a
    dataclass field (``module:Class.field``) or a dict entry (``module:NAME[key]``).
    """
    if step not in STEPS:
        raise ValueError(f"expected step to be one of {STEPS}, got {step!r}")
    if not where or not help.strip() or not unit.strip():
        raise ValueError(f"expected a unit, a description and at least one reader for an option, got "
                         f"unit={unit!r}, help={help!r}, where={where!r}")
    return field(default=default, metadata={"unit": unit, "step": step, "where": where, "help": help,
                                            "env": env})


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
        30, unit="seconds", step="execute", where=("nbgrader.preprocessors:Execute.timeout",),
        help="Time limit of one cell (nbgrader's own option, met by BoundedExecute with the time left).")
    execute_notebook_timeout: float = option(
        240.0, unit="seconds", step="execute",
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
    execute_shutdown_kernel: str = option(
        "immediate", unit="graceful | immediate", step="execute",
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
        128, unit="levels", step="feedback", where=("rbtutor.grading.allowlist:MAX_HTML_DEPTH",),
        help="HTML whose open elements (re-opened formatting elements included) nest deeper is shown as text, "
             "never parsed.")
    sanitize_max_html_chars: int = option(
        1_000_000, unit="characters", step="feedback", where=("rbtutor.grading.allowlist:MAX_HTML_CHARS",),
        help="HTML fragment longer than this (markdown rendered included) is shown as text, never parsed.")
    sanitize_text_shown_chars: int = option(
        10_000, unit="characters", step="feedback", where=("rbtutor.grading.allowlist:TEXT_SHOWN_CHARS",),
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
            _check_type(spec.name, spec.type, getattr(self, spec.name))


#: options where a negative value has a meaning (zero or less: no limit)
_MAY_BE_NEGATIVE = frozenset({"execute_notebook_timeout"})
_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "str | None": (str, type(None))}


def _check_type(name: str, declared: str, value) -> None:
    """Raise ValueError unless ``value`` is of the ``declared`` type (a bool is not a number here)."""
    allowed = _TYPES[declared]
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise ValueError(f"expected {name} to be {declared}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0 and name not in _MAY_BE_NEGATIVE:
        raise ValueError(f"expected {name} to be at least 0, got {value!r}")


#: the defaults, read by every step
GRADING = GradingConfig()


def trait_keys(where: tuple[str, ...]) -> list[tuple[str, str]]:
    """The ``(Class, trait)`` pairs of ``where`` that a course's nbgrader configuration can set."""
    keys = []
    for reader in where:
        _, name = reader.split(":")
        cls, _, trait = name.partition(".")
        if cls in TRAIT_CLASSES:
            keys.append((cls, trait))
    return keys


def option_rows(config=None, environ=None) -> list[dict]:
    """One dict per option: name, type, value, default, unit, step, set_in, reads, description.

    ``config`` is a loaded traitlets configuration (a course's ``nbgrader_config.py``); a trait it
    sets is shown as the value with ``set_in`` naming it. ``environ`` (default ``os.environ``)
    does the same for options with an environment name.
    """
    environ = os.environ if environ is None else environ
    rows = []
    for spec in fields(GradingConfig):
        meta = spec.metadata
        value, set_in = getattr(GRADING, spec.name), []
        for cls, trait in trait_keys(meta["where"]):
            if config is not None and cls in config and trait in config[cls]:
                value = config[cls][trait]
                set_in.append(f"c.{cls}.{trait}")
        if meta["env"] and meta["env"] in environ:
            value = environ[meta["env"]]
            set_in.append(f"${meta['env']}")
        rows.append({"name": spec.name, "type": spec.type, "value": value, "default": getattr(GRADING, spec.name),
                     "unit": meta["unit"], "step": meta["step"], "set_in": set_in, "reads": list(meta["where"]),
                     "env": meta["env"], "description": meta["help"]})
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows of :func:`option_rows` as a plain-text table, one option a line, description last."""
    header = ("option", "value", "default", "unit", "set in")
    lines = [(r["name"], repr(r["value"]), repr(r["default"]), r["unit"], ", ".join(r["set_in"]) or "-")
             for r in rows]
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + "  description",
           "  ".join("-" * w for w in widths) + "  " + "-" * 11]
    for line, row in zip(lines, rows, strict=True):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + "  " + row["description"])
    return "\n".join(out)
