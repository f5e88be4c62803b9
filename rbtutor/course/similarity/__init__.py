"""Step: after collection, beside grading. Which students handed in the same code for one assignment.

``python -m rbtutor.course similarity problem03`` compares the code of every pair of
students and writes ``similarity/problem03.csv`` (``student_a,student_b,score``, then
``outside_solution_a,outside_solution_b``; most similar first) and
``similarity/problem03.html`` (the pairs, and the most similar ones side by side, cell by
cell, with the shared regions marked).

How code is compared
--------------------
* **What is read.** For each folder ``submitted/<student>/<assignment>/`` whose name is
  a valid student id, the submission is first copied by the intake
  (:func:`rbtutor.grading.intake.take_in`: no link is followed, sizes and cells are
  capped, malformed notebooks are dropped), and only that copy is read. Every code cell
  of every notebook is kept, in notebook order, notebooks in name order; a cell whose
  ``grade_id`` is a solution cell of the instructor's source notebook is a *solution
  cell*, any other is not (the student's own cells, and cells they were given). Copied
  code moved into cells of one's own is therefore still compared, and the report says
  how much of a pair's shared code lies outside the solution cells.
* **Normalising.** Each cell is parsed with :mod:`ast` (IPython magic lines are blanked
  if it does not parse otherwise). In the syntax tree every name and parameter becomes
  ``V`` (built-in names such as ``len`` stay, unless the student binds them), every number ``N``, every string ``S``; an
  attribute or keyword argument becomes ``V`` when the student's code binds that name
  and keeps its name otherwise (``np.cross``, ``key=``: what a library named cannot be
  renamed). Statements that do nothing are dropped (``pass``, a bare
  expression without a call, a docstring, ``x = x``, ``x += 0``, a constant stored in
  a name nothing reads). The statements of each block are put in one canonical order:
  each after the statements it depends on (through the names they read and write), and
  otherwise by their normalised text. Each statement is written back
  (:func:`ast.unparse`, which keeps only the parentheses the syntax needs) without blank
  space. Renaming, re-parenthesising, reformatting numbers, changing strings and
  comments, adding statements that do nothing and reordering independent statements
  therefore change nothing. A cell that is not Python even then, or a statement nested
  too deeply to walk, is reduced token by token (Pygments) in the same letters (there
  every attribute and keyword is ``V``).
* **Fingerprints.** The normalised text is cut into overlapping pieces of
  :data:`NOISE` characters, each piece hashed, and the hashes thinned by winnowing
  (the method of MOSS: Schleimer, Wilkerson and Aiken, SIGMOD 2003): any shared run
  of at least :data:`GUARANTEE` characters shares a fingerprint. The winnowing and
  the matching are those of the ``copydetect`` package (MIT licence). The hashing is
  done here, with BLAKE2b, so that a class gets the same scores on every run; so is
  the tokenising, because ``copydetect`` keeps numbers and maps matches back to the
  source only roughly. A match is traced back to whole statements of the original
  code (to tokens in a cell that is not Python).
* **Given code.** The code the students were given is the source notebook's code cells
  with their solution regions removed, and the stub nbgrader puts in their place.
  A student's top-level statement that is one of the given code's (the same syntax
  tree: only layout and comments may differ) is left out, and so is every piece of
  normalised code that also occurs in the given code.
* **Score.** For a pair, the share of each student's fingerprinted code that the other
  student's code also holds; the pair's score is the larger of the two shares, so a
  student who copied a classmate's whole answer and added code of their own is still
  found. Pairs at or above :data:`THRESHOLD` are flagged.

Per-student numbers make equal values impossible, so this finds shared *code*; a
short answer that every student writes the same way (one formula) scores high for
everyone and says nothing. The report is evidence for a person to read, never a verdict.
"""

from .compare import GUARANTEE, Fingerprints, Match, compare, fingerprint, given_hashes
from .normalise import NOISE, Normalised, hashed_pieces, normalise, normalise_cells, read_given
from .report import (
    MAX_CODE_CHARS,
    MAX_SHOWN_PAIRS,
    RELEASE_STUB,
    SHOWN_CHARS,
    SHOWN_PAIRS,
    TABLE_PAIRS,
    THRESHOLD,
    Cell,
    Pair,
    Submissions,
    rank_pairs,
    read_sources,
    read_submissions,
    render_html,
    similarity_report,
)

__all__ = ["GUARANTEE", "MAX_CODE_CHARS", "MAX_SHOWN_PAIRS", "NOISE", "RELEASE_STUB", "SHOWN_CHARS", "SHOWN_PAIRS",
           "TABLE_PAIRS", "THRESHOLD", "Cell", "Fingerprints", "Match", "Normalised", "Pair", "Submissions", "compare",
           "fingerprint", "given_hashes", "hashed_pieces", "normalise", "normalise_cells", "rank_pairs", "read_given",
           "read_sources", "read_submissions", "render_html", "similarity_report"]
