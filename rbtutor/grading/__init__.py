"""Grading, as the pipeline it is: each module is one step, in the order a submission meets them.

1. :mod:`.protocol`: what a graded notebook and the grader agree on (the hand-in payload).
2. :mod:`.student`: the helpers rendered into every notebook (form checks for Validate, ``hand_in``);
   :mod:`.student_ids`: the one test of a student id, used wherever an id comes in.
3. :mod:`.intake` (a package: exchange, files, notebooks, copies, times, limits): a submission's
   files checked and copied before nbgrader sees them (no links, no special files, bounded counts
   and sizes, source copies refused).
4. :mod:`.restore`: every cell the gradebook knows gets back its type, flags, points and locked source.
5. :mod:`.scan`: suspicious code flagged for the instructor (a flag, not a protection).
6. :mod:`.sandbox` (a package: plan, launch, cgroups, zygote_client, zygote): the confined kernel
   (bubblewrap) that runs the student's code.
7. :mod:`.execute`: the notebook run in a throwaway folder, bounded in time, surviving a dead kernel
   or a malformed message.
8. :mod:`.outputs`: the byte budget of what the kernel sent back.
9. :mod:`.judge`: each handed-in value judged in the grading process against the key of
   :mod:`rbtutor.problems`; the verdict is recorded on its test cell.
10. :mod:`.scores`: where a grade is decided: points from the verdicts into the gradebook (a
    passed answer earns its points, anything else 0); the late penalty and the final score come
    after it, in :mod:`rbtutor.course`.
11. The pages, in layers that build on each other: :mod:`.allowlist` (which HTML, MathML and SVG
    may pass, and the nh3 cleaners made from that list), :mod:`.mathml` (TeX in markdown turned
    into sanitised MathML), :mod:`.sanitize` (the autograded notebook made safe to render before
    it is stored), :mod:`.grader_notes` (for the Formgrader only: the model answer and rubric
    beside each written answer, and the student's own due date and submission time at the top;
    never on a page a student sees) and :mod:`.feedback` (the student's feedback page: no
    scripts, math as MathML).
12. :mod:`.report`: the integrity events of every step, and the class's integrity report.

Beside the steps: :mod:`.config` declares every grading option once (limits, timeouts, seeds, the
late share, the check limits) and the steps read their defaults from it; :mod:`.time_bound` puts a
wall-time bound on a block of the grading process (a whole submission, one feedback page), in the
main thread or in a Dask worker's task thread; :mod:`.sources` reads each of the instructor's
source notebooks once per process, for the intake and the grader's notes.

The threat model is in the manual's Operator guide (``book/manual/operator/security.md``):
everything a student controls (files, names, links, sizes, their code and every message their
kernel sends) is untrusted.
"""
