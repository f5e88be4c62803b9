"""Grading, as the pipeline it is: each module is one step, in the order a submission meets them.

1. :mod:`.protocol`: what a graded notebook and the grader agree on (the hand-in payload).
2. :mod:`.student`: the helpers rendered into every notebook (form checks for Validate, ``hand_in``).
3. :mod:`.intake`: a submission's files checked and copied before nbgrader sees them (no links, no
   special files, bounded counts and sizes, source copies refused).
4. :mod:`.restore`: every cell the gradebook knows gets back its type, flags, points and locked source.
5. :mod:`.scan`: suspicious code flagged for the instructor (a flag, not a protection).
6. :mod:`.sandbox`: the confined kernel (bubblewrap) that runs the student's code.
7. :mod:`.execute`: the notebook run in a throwaway folder, bounded in time, surviving a dead kernel
   or a malformed message.
8. :mod:`.outputs`: the byte budget of what the kernel sent back.
9. :mod:`.judge`: each handed-in value judged in the grading process against the key of
   :mod:`rbtutor.problems`; the verdict is recorded on its test cell.
10. :mod:`.scores`: where a grade is decided: points from the verdicts into the gradebook (a
    passed answer earns its points, anything else 0); the late penalty and the final score come
    after it, in :mod:`rbtutor.course`.
11. :mod:`.feedback`: sanitised feedback pages with math as MathML, no scripts; the model answer and
    rubric beside each written answer for the grader (never for the student).
12. :mod:`.report`: the integrity events of every step, and the class's integrity report.

The threat model is in the README's grading section: everything a student controls (files, names,
links, sizes, their code and every message their kernel sends) is untrusted.
"""
