"""The 12-state simulation: Problem 10, its energy identity, both attitudes, gimbal lock."""

import numpy as np
import pytest
from tolerances import ATTITUDE_AGREEMENT, ENERGY_RTOL

import rbtutor
from rbtutor.problems import load_data, vessel

TAU = [2.0e5, 0.0, 0.0, 0.0, 0.0, 1.5e6]


@pytest.fixture(scope="module")
def ship():
    return vessel(load_data())


@pytest.fixture(scope="module")
def runs(ship):
    return {a: rbtutor.simulate(ship, TAU, 90.0, attitude=a) for a in rbtutor.simulation.ATTITUDES}


@pytest.mark.parametrize("attitude", ["euler_angles", "euler_parameters"])
def test_energy_identity(runs, attitude):
    r = runs[attitude]
    assert abs(r.energy_residual[-1]) / r.work[-1] < ENERGY_RTOL
    assert np.all(np.abs(r.energy_residual) < ENERGY_RTOL * r.work[-1])


def test_attitudes_agree(runs):
    a, b = runs["euler_angles"], runs["euler_parameters"]
    assert np.max(np.abs(a.final_state - b.final_state)) < ATTITUDE_AGREEMENT
    assert np.max(np.abs(b.quaternion_norm_error)) < 1e-9


def test_callable_load_equals_constant(ship, runs):
    r = rbtutor.simulate(ship, lambda t, x: np.array(TAU), 90.0)
    assert np.allclose(r.final_state, runs["euler_angles"].final_state, atol=1e-9)


def test_wrong_integration_is_detected(ship, runs):
    """The energy identity sees a Coriolis sign error (Problem 4e): the check can fail."""
    class Broken(rbtutor.RigidBody):
        def _coriolis_forces(self, nu):
            f = super()._coriolis_forces(nu)
            momentum = self.mass * (nu[:3] + np.cross(nu[3:], self.r_g))
            return np.concatenate([f[:3], f[3:] - 2 * np.cross(nu[:3], momentum)])

    broken = Broken(ship.mass, ship.r_g, ship.inertia_g)
    r = rbtutor.simulate(broken, TAU, 90.0)
    assert abs(r.energy_residual[-1]) / r.work[-1] > 1e3 * ENERGY_RTOL


def tumbling_start():
    """A box spun mostly about its intermediate axis y, so that it flips and pitch passes 90 deg."""
    inertia = rbtutor.box_inertia(4.5e4, [6.0, 3.0, 2.0])
    body = rbtutor.RigidBody(4.5e4, [0.0, 0.0, 0.0], inertia)
    return body, [0, 0, 0, 1e-3, 1.2, 1e-3] + [0] * 6


def test_euler_parameters_pass_through_ninety_degrees():
    body, x0 = tumbling_start()
    r = rbtutor.simulate(body, np.zeros(6), 20.0, x0=x0, attitude="euler_parameters",
                         t_eval=np.linspace(0.0, 20.0, 8001))
    assert r.t[-1] == 20.0
    assert np.max(np.abs(r.eta[:, 4])) > np.radians(89.9)
    assert np.ptp(r.kinetic_energy) < 1e-8 * r.kinetic_energy[0]


def test_euler_angles_refuse_ninety_degrees():
    body, x0 = tumbling_start()
    with pytest.raises(rbtutor.GimbalLockError, match=r"attitude='euler_parameters'"):
        rbtutor.simulate(body, np.zeros(6), 20.0, x0=x0)


def test_mini_example_of_the_node():
    """Reference 003: spun at pi/2 rad/s about z, the body has turned pi/2 after one second."""
    box = rbtutor.RigidBody(8.0, [0, 0, 0], rbtutor.box_inertia(8.0, [0.4, 0.2, 0.1]))
    r = rbtutor.simulate(box, np.zeros(6), 1.0, x0=[0, 0, 0, 0, 0, np.pi / 2, 0.5, 0.2, 0.1, 0, 0, 0],
                         attitude="euler_parameters")
    out = rbtutor.euler_parameters.node_outputs(r.position[-1], r.euler_parameters[-1])
    assert out.rotation[2] == pytest.approx(np.pi / 2, abs=1e-9)
    assert np.allclose(out.position, [0.5, 0.2, 0.1])


def test_plots_draw(runs):
    import matplotlib

    matplotlib.use("Agg")
    r = runs["euler_angles"]
    for fig in (r.plot_trajectory().figure, r.plot_motion(), r.plot_energy()):
        assert fig.axes


def test_scipy_is_loaded_only_when_a_motion_is_integrated():
    """`import rbtutor` alone does not import SciPy; its integrating names load their module on first use."""
    import subprocess
    import sys

    code = ("import sys, rbtutor; before = 'scipy' in sys.modules; from rbtutor import simulate; "
            "import rbtutor.simulation as s, rbtutor.torque_free as t; "
            "print(before, simulate is s.simulate, rbtutor.spin_stability is t.spin_stability, "
            "rbtutor.SimulationResult is s.SimulationResult, set(rbtutor.__all__) <= set(dir(rbtutor)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True", "True"]
