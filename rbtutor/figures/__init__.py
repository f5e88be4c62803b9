"""Schematic figures of the physics, drawn from the library's data (presentation only).

Step: none of the grading pipeline; the book calls these functions to draw the
pictures of its chapters, so each picture is computed from the same vessel,
load and box data as the answers and changes with them.

Every function returns a :class:`matplotlib.figure.Figure`. The artists that
carry data (points, arrows, arcs) have a ``gid`` (``"G"``, ``"r_G"``,
``"arc-p"``, ...) so a test can read back where they were drawn; arrows are
:class:`matplotlib.text.Annotation` objects whose ``xyann`` is the tail and
``xy`` the head, in data coordinates (metres unless the axis says otherwise).

Conventions as everywhere in rbtutor: BCS with origin O at midship, on the
centreline, in the waterline; x forward, y to port, z up. The side views look
at the starboard side (x to the right, z up, y into the page); the section view
of the heel looks from astern (port on the left, z up, x into the page).

matplotlib is imported inside the functions, so ``import rbtutor`` does not pay
for it.

The figures are in :mod:`.frames` (frames, six motions), :mod:`.loads` (towline, heeling couple) and
:mod:`.tumbling` (tumbling box), :mod:`.transfer` (velocity of a body point, a moment moved from O to G),
on the common ground of :mod:`.drawing`; this package re-exports them.
"""

from .drawing import COURSE_HULL, Hull, project, rotation_arc
from .frames import frames_figure, six_motions_figure
from .loads import heel_couple_figure, towline_figure
from .transfer import moment_transfer_figure, point_velocity_figure
from .tumbling import tumbling_box_figure

__all__ = ["COURSE_HULL", "Hull", "frames_figure", "heel_couple_figure", "moment_transfer_figure",
           "point_velocity_figure", "project", "rotation_arc", "six_motions_figure", "towline_figure",
           "tumbling_box_figure"]
