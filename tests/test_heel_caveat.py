"""The GM/z_G caveat of Problem 3(d): GM follows G when G moves (eq-gm-shift), while the
graded key keeps the reference's stated assumption (GM fixed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rbtutor import RigidBody
from rbtutor.problems import answer_key, load_data, metacentric_height, steady_heel, vessel


def test_metacentric_height_falls_by_the_rise_of_g():
    """GM(z_G) = GM_0 - (z_G - z_G0): unchanged at z_G0, one metre less per metre of rise."""
    assert metacentric_height(1.8, -1.2, -1.2) == pytest.approx(1.8, abs=1e-15)
    heights = np.linspace(-3.0, 3.0, 13)
    values = np.array([metacentric_height(1.8, -1.2, z) for z in heights])
    assert np.allclose(np.diff(values), -np.diff(heights), rtol=0.0, atol=1e-14)
    assert metacentric_height(1.8, -1.2, 0.6) == pytest.approx(0.0, abs=1e-14)
    with pytest.raises(ValueError, match="z_g"):
        metacentric_height(1.8, -1.2, float("nan"))


@pytest.mark.parametrize("gm", [0.0, -0.2])
def test_steady_heel_refuses_a_hull_without_positive_gm(gm):
    """No steady small heel exists when the upright hull is unstable."""
    ship = vessel(load_data())
    with pytest.raises(ValueError, match="unstable"):
        steady_heel(ship, load_data()["turn"]["nu"], gm, 9.81)


def test_key_of_3d_keeps_gm_fixed_and_the_consistent_gm_is_unstable():
    """The graded 3(d) follows the statement (GM unchanged); with GM made consistent the
    raised G of 3(d) leaves GM negative, so the reference's assumption is what makes 3(d) solvable."""
    data = load_data()
    turn, g = data["turn"], data["constants"]["g"]
    u, r = turn["nu"][0], turn["nu"][5]
    z_0, z_raised = data["vessel"]["r_g"][2], turn["z_g_raised"]
    key = answer_key(data, problems=[3])
    fixed = math.degrees(z_raised * u * r / (g * turn["gm"]))
    assert key["p3.d.phi_deg"].value == pytest.approx(fixed, rel=1e-12)
    assert metacentric_height(turn["gm"], z_0, z_raised) < 0.0
    # Below the stability limit the library's heel with the consistent GM is the closed form.
    ship = vessel(data)
    for z_g in (-3.0, -1.2, 0.0, 0.4):
        gm = metacentric_height(turn["gm"], z_0, z_g)
        moved = RigidBody(ship.mass, [ship.r_g[0], ship.r_g[1], z_g], ship.inertia_g)
        phi = steady_heel(moved, turn["nu"], gm, g)[1]
        assert phi == pytest.approx(z_g * u * r / (g * gm), rel=1e-12, abs=1e-15)
