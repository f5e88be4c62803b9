"""Bad input fails loudly, saying what was expected and what came."""

import numpy as np
import pytest

import rbtutor
from rbtutor import euler_parameters as ep
from rbtutor.problems import answer_key, load_data

I3 = np.eye(3)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rbtutor.skew([1.0, 2.0]), r"expected a of shape \(3,\), got \(2,\)"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0, 0], I3), r"expected r_g of shape \(3,\), got \(4,\)"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], np.eye(4)), r"expected inertia_g of shape \(3, 3\), got \(4, 4\)"),
    (lambda: rbtutor.RigidBody(1.0, [0, np.nan, 0], I3), r"expected finite values in r_g"),
    (lambda: rbtutor.RigidBody(np.inf, [0, 0, 0], I3), r"expected finite values in mass"),
    (lambda: rbtutor.RigidBody(0.0, [0, 0, 0], I3), r"expected mass > 0, got 0.0"),
    (lambda: rbtutor.RigidBody(-5.0, [0, 0, 0], I3), r"expected mass > 0, got -5.0"),
    (lambda: rbtutor.RigidBody("heavy", [0, 0, 0], I3), r"expected mass to be numeric"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), r"to be symmetric"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], np.diag([1.0, -1.0, 1.0])), r"to be positive definite"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], np.diag([1.0, 1.0, 3.0])), r"triangle inequality"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], I3).accelerations([0] * 5, [0] * 6), r"expected nu of shape \(6,\)"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], I3).accelerations([0] * 6, [0, 0, np.inf, 0, 0, 0]),
     r"expected finite values in tau"),
    (lambda: rbtutor.rotation_matrix(0.0, np.nan, 0.0), r"expected finite values in theta"),
    (lambda: rbtutor.euler_rate_matrix(0.0, np.pi / 2), r"singular at theta = 90\.0000 deg.*Euler parameters"),
    (lambda: ep.rotation_matrix_ep([1.0, 0.1, 0.0, 0.0]), r"expected theta to be a unit quaternion \(norm 1\)"),
    (lambda: ep.rates_from_angular_velocity([2.0, 0, 0, 0], [0, 0, 1]), r"unit quaternion"),
    (lambda: ep.rates_from_angular_velocity([1.0, 0, 0, 0], [0, 0, 1], frame="world"), r"expected frame"),
    (lambda: rbtutor.box_inertia(1.0, [1.0, -2.0, 1.0]), r"expected positive box dimensions"),
    (lambda: rbtutor.spin_stability([1.0, 0.0, 2.0], 1.0), r"expected positive principal moments"),
    (lambda: rbtutor.sign_change_times([1.0, 2.0, 3.0], [0, 1, 0], 10.0, component=3), r"expected component"),
    (lambda: rbtutor.sign_change_count([1.0, 2.0, 3.0], [0, 1, 0], 10.0, component=3), r"expected component"),
    (lambda: rbtutor.sign_change_count([1.0, 2.0, 3.0], [0, 1, 0], -1.0), r"t_end"),
    (lambda: rbtutor.simulate(rbtutor.RigidBody(1.0, [0, 0, 0], I3), [0] * 6, 1.0, attitude="quaternions"),
     r"expected attitude in"),
    (lambda: rbtutor.simulate(rbtutor.RigidBody(1.0, [0, 0, 0], I3), [0] * 6, -1.0), r"expected t_end > 0"),
    (lambda: rbtutor.simulate(rbtutor.RigidBody(1.0, [0, 0, 0], I3), [0] * 6, 1.0, x0=[0] * 13),
     r"expected x0 of shape \(12,\), got \(13,\)"),
    (lambda: rbtutor.simulate(rbtutor.RigidBody(1.0, [0, 0, 0], I3), lambda t, x: [0, 0], 1.0),
     r"expected tau\(t, state\) of shape \(6,\), got \(2,\)"),
    (lambda: rbtutor.RigidBody(1.0, [0, 0, 0], I3).with_point_masses([-1.0], [[0, 0, 0]]), r"positive point masses"),
    (lambda: answer_key(problems=[13]), r"expected problem numbers from 1 to 12"),
])
def test_bad_input_raises(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_variant_with_unknown_key_is_refused(tmp_path):
    path = tmp_path / "ship.yaml"
    path.write_text("vessel:\n  mas: 5.0e6\n")
    with pytest.raises(ValueError, match=r"unknown problem data key vessel\.'mas'"):
        load_data(path)
