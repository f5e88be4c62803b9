"""Identities that hold for any body and state, checked with hypothesis."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from tolerances import IDENTITY_RTOL

import rbtutor
from rbtutor import euler_parameters as ep

finite = st.floats(-50.0, 50.0, allow_nan=False, allow_infinity=False)
vec3 = st.lists(finite, min_size=3, max_size=3).map(np.array)
vec6 = st.lists(finite, min_size=6, max_size=6).map(np.array)
angle = st.floats(-np.pi, np.pi, allow_nan=False)
pitch = st.floats(-1.5, 1.5, allow_nan=False)


@st.composite
def bodies(draw):
    """A random physical body: positive mass, any G, a tensor from principal moments and axes."""
    mass = draw(st.floats(1.0, 1e7))
    a, b = draw(st.floats(0.1, 10.0)), draw(st.floats(0.1, 10.0))
    principal = mass * np.array([a, b, draw(st.floats(abs(a - b) + 0.05, a + b))])
    rot = Rotation.from_rotvec(draw(vec3) / 20.0).as_matrix()
    return rbtutor.RigidBody(mass, draw(vec3) / 5.0, rot @ np.diag(principal) @ rot.T)


def same_angles(a, b):
    """Angles equal modulo 2 pi (psi = pi and psi = -pi are one heading)."""
    return close(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b)))), np.zeros(np.shape(a)))


def close(a, b, scale=1.0):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) <= IDENTITY_RTOL * max(scale, np.max(np.abs(a)), np.max(np.abs(b)), 1.0)


@given(vec3, vec3)
def test_skew_is_cross_product(a, b):
    assert close(rbtutor.skew(a) @ b, np.cross(a, b))
    assert close(rbtutor.skew(a), -rbtutor.skew(a).T)


@given(angle, pitch, angle)
def test_rotation_is_proper_and_matches_scipy(phi, theta, psi):
    r = rbtutor.rotation_matrix(phi, theta, psi)
    assert close(r.T @ r, np.eye(3))
    assert np.isclose(np.linalg.det(r), 1.0)
    assert close(r, Rotation.from_euler("ZYX", [psi, theta, phi]).as_matrix())
    assert same_angles(rbtutor.euler_angles_from_matrix(r), [phi, theta, psi])


@given(angle, pitch, vec3)
def test_euler_rates_invert_angular_velocity(phi, theta, omega):
    rates = rbtutor.euler_rate_matrix(phi, theta) @ omega
    assert close(rbtutor.angular_velocity_from_euler_rates(phi, theta, rates), omega, scale=np.abs(rates).max())


@settings(max_examples=60)
@given(bodies(), vec6)
def test_mass_matrix_symmetric_positive_definite(body, nu):
    m = body.mass_matrix()
    assert np.array_equal(m, m.T)
    assert np.all(np.linalg.eigvalsh(m) > 0.0)
    assert body.kinetic_energy(nu) >= 0.0


@settings(max_examples=60)
@given(bodies(), vec6)
def test_coriolis_skew_and_workless(body, nu):
    c = body.coriolis_matrix(nu)
    scale = np.abs(c).max() * np.abs(nu).max() ** 2
    assert close(c + c.T, np.zeros((6, 6)), scale=np.abs(c).max())
    assert abs(nu @ c @ nu) <= IDENTITY_RTOL * max(scale, 1.0)
    assert close(c @ nu, body.coriolis_forces(nu), scale=np.abs(c).max() * np.abs(nu).max())


@settings(max_examples=60)
@given(bodies(), vec6, vec6)
def test_forward_and_inverse_dynamics_agree(body, nu, tau):
    tau = tau * body.mass
    assert close(body.forces(nu, body.accelerations(nu, tau)), tau,
                 scale=np.abs(body.coriolis_forces(nu)).max())


@settings(max_examples=60)
@given(bodies(), vec6, vec6, vec3)
def test_same_motion_about_o_and_about_g(body, nu, tau, offset):
    """Moving the origin (to G, or anywhere) describes the same motion (Problem 7)."""
    tau = tau * body.mass
    for origin in (body.r_g, offset):
        moved = body.moved_to(origin)
        nu_dot = body.accelerations(nu, tau)
        nu_dot_moved = moved.accelerations(rbtutor.shift_velocity(nu, origin), rbtutor.shift_load(tau, origin))
        # a point fixed in the body: the BCS derivative of v + w x d is v_dot + w_dot x d
        expected = rbtutor.shift_velocity(nu_dot, origin)
        scale = np.abs(nu_dot).max() + np.abs(nu).max() ** 2 * (1 + np.abs(origin).max())
        assert close(nu_dot_moved, expected, scale=scale)
        assert np.isclose(moved.kinetic_energy(rbtutor.shift_velocity(nu, origin)), body.kinetic_energy(nu),
                          rtol=1e-9, atol=1e-9 * body.mass)


@given(bodies(), vec3)
def test_parallel_axis_built_two_ways(body, point):
    """A body split into itself plus a point mass equals the directly combined tensor."""
    m_load = body.mass / 3.0
    combined = body.with_point_masses([m_load], [point])
    direct_o = body.inertia_o + rbtutor.parallel_axis(np.zeros((3, 3)), m_load, point)
    assert close(combined.inertia_o, direct_o)
    assert close(combined.inertia_o, rbtutor.parallel_axis(combined.inertia_g, combined.mass, combined.r_g))


@given(angle, pitch, angle, st.booleans())
def test_euler_angles_parameters_matrix_round_trip(phi, theta, psi, flip):
    q = ep.from_euler_angles(phi, theta, psi)
    sign = -1.0 if flip else 1.0
    r = rbtutor.rotation_matrix(phi, theta, psi)
    assert close(ep.rotation_matrix_ep(sign * q), r)
    assert same_angles(ep.to_euler_angles(sign * q), [phi, theta, psi])
    q_back = ep.from_rotation_matrix(r)
    assert close(q_back, q) or close(q_back, -q)
    scipy_q = Rotation.from_matrix(r).as_quat(scalar_first=True)
    assert close(q, scipy_q) or close(q, -scipy_q)


@given(st.lists(finite, min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1), vec3)
def test_g_matrices(raw, omega):
    q = np.array(raw) / np.linalg.norm(raw)
    for frame, g in (("body", ep.g_matrix_body(q)), ("global", ep.g_matrix_global(q))):
        rates = ep.rates_from_angular_velocity(q, omega, frame)
        assert close(g @ rates, omega)
        assert abs(ep.constraint_residuals(q, rates)[1]) < 1e-12 * max(1.0, np.abs(omega).max())
    r = ep.rotation_matrix_ep(q)
    assert close(ep.g_matrix_global(q), r @ ep.g_matrix_body(q))


def test_tait_bryan_xyz_matches_scipy():
    r = Rotation.from_euler("xyz", [0.3, -0.4, 1.1], degrees=False)  # extrinsic x, y, z
    intrinsic = Rotation.from_euler("XYZ", [0.3, -0.4, 1.1])  # Rx Ry Rz
    assert close(ep.tait_bryan_xyz(intrinsic.as_matrix()), [0.3, -0.4, 1.1])
    assert not close(r.as_matrix(), intrinsic.as_matrix())


def test_node_outputs_of_a_spinning_node():
    omega_body = np.array([0.2, -0.1, 0.5])
    q = ep.from_euler_angles(0.1, 0.2, 0.3)
    qd = ep.rates_from_angular_velocity(q, omega_body)
    out = ep.node_outputs([1.0, 2.0, 3.0], q, [0.1, 0, 0], qd, reference_position=[1.0, 0.0, 0.0])
    assert close(out.angular_velocity_local, omega_body)
    assert close(out.angular_velocity, ep.rotation_matrix_ep(q) @ omega_body)
    assert close(out.displacement, [0.0, 2.0, 3.0])
    assert close(out.rotation_matrix.reshape(3, 3), rbtutor.rotation_matrix(0.1, 0.2, 0.3))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_spin_stability_intermediate_axis(axis):
    inertia = np.roll([1.0, 2.0, 3.0], axis)
    kinds = {s.axis: s.kind for s in rbtutor.spin_stability(inertia, 1.0)}
    middle = "xyz"[int(np.argsort(inertia)[1])]
    assert kinds[middle] == "growth"
    assert sum(k == "oscillation" for k in kinds.values()) == 2


def test_torque_free_conserves_energy_and_momentum():
    inertia = np.array([48750.0, 150000.0, 168750.0])
    body = rbtutor.RigidBody(4.5e4, [0, 0, 0], np.diag(inertia))
    result = rbtutor.simulate(body, np.zeros(6), 40.0, x0=[0, 0, 0, 1e-3, 1.2, 1e-3] + [0] * 6,
                              attitude="euler_parameters")
    w = result.nu[:, 3:]
    momentum = np.linalg.norm(w * inertia, axis=1)
    assert np.ptp(result.kinetic_energy) < 1e-8 * result.kinetic_energy[0]
    assert np.ptp(momentum) < 1e-8 * momentum[0]
    assert np.ptp(np.linalg.norm(w, axis=1)) > 0.1  # |omega| itself is not conserved
    flips = rbtutor.sign_change_times(inertia, [1e-3, 1.2, 1e-3], 40.0)
    assert np.all(np.diff(np.sign(np.interp(np.r_[flips - 0.01, flips + 0.01], result.t, w[:, 1]))
                          .reshape(2, -1), axis=0) != 0)


def test_the_closed_form_count_of_sign_changes_agrees_with_integration():
    """sign_change_count (Jacobi's elliptic functions) gives sign_change_times's count on random
    spins: every component, both sides of the separatrix, negative rates, 0 to several changes."""
    from rbtutor.torque_free import _elliptic_count

    rng = np.random.default_rng(38)
    counts, sides, closed = set(), set(), 0
    for _ in range(300):
        inertia = rng.uniform(1.0, 10.0, 3)
        omega = rng.normal(size=3) * rng.choice([1.0, 1e-3], 3)
        t_end, component = rng.uniform(1.0, 80.0), int(rng.integers(3))
        integrated = len(rbtutor.sign_change_times(inertia, omega, t_end, component))
        assert rbtutor.sign_change_count(inertia, omega, t_end, component) == integrated, (inertia, omega, t_end)
        middle = inertia[np.argsort(inertia)[1]]
        sides.add(bool(np.sum(inertia * (inertia - middle) * omega ** 2) > 0))  # sign of L^2 - 2 E I_middle
        counts.add(integrated)
        closed += _elliptic_count(inertia, omega, t_end, component) is not None
    assert sides == {True, False}, sides
    assert {0, 1, 2, 3} <= counts, counts
    assert closed >= 290, f"the closed form answered {closed} of 300 times"


@pytest.mark.parametrize(("inertia", "omega", "t_end"), [
    ([1.0, 2.0, 3.0], [0.0, 1.0, 1e-3], 60.0),  # a rate exactly zero
    ([2.0, 2.0, 3.0], [1e-3, 1.0, 1e-3], 60.0),  # two equal moments
    ([1.0, 2.0, 3.0], [0.0, 1.0, 0.0], 60.0),  # a steady spin: no change
])
def test_sign_change_count_integrates_where_the_closed_form_does_not_hold(inertia, omega, t_end):
    from rbtutor.torque_free import _elliptic_count

    assert _elliptic_count(np.asarray(inertia), np.asarray(omega), t_end, 1) is None
    assert rbtutor.sign_change_count(inertia, omega, t_end) == len(rbtutor.sign_change_times(inertia, omega, t_end))


def test_sign_change_count_integrates_when_a_change_falls_on_t_end():
    from rbtutor.torque_free import _elliptic_count

    inertia, omega = np.array([1.0, 2.0, 3.0]), np.array([1e-3, 1.0, 1e-3])
    second = rbtutor.sign_change_times(inertia, omega, 60.0)[1]
    assert _elliptic_count(inertia, omega, second, 1) is None
    assert _elliptic_count(inertia, omega, second * 1.01, 1) == 2
    assert rbtutor.sign_change_count(inertia, omega, second * 0.99) == 1


# --------------------------------------------------------------------------- what an accelerometer reads

angles = st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3)


@given(angles)
@settings(max_examples=50, deadline=None)
def test_a_sensor_at_rest_reads_g_upwards_in_the_hull_s_axes(attitude):
    """At rest an accelerometer reads +g along the inertial vertical, whatever the attitude."""
    f = rbtutor.specific_force([3.0, -1.0, 2.0], np.zeros(6), np.zeros(6), attitude)
    up_in_body = rbtutor.rotation_matrix(*attitude).T @ [0.0, 0.0, 1.0]
    np.testing.assert_allclose(f, 9.81 * up_in_body, atol=1e-12)


def test_a_heeled_sensor_at_rest_and_a_sensor_in_free_fall():
    phi = 0.3  # heeled to starboard: part of g shows on the sway channel
    f = rbtutor.specific_force(np.zeros(3), np.zeros(6), np.zeros(6), [phi, 0.0, 0.0])
    np.testing.assert_allclose(f, [0.0, 9.81 * np.sin(phi), 9.81 * np.cos(phi)], atol=1e-12)
    attitude = [0.2, -0.1, 1.0]  # falling freely without rotation: nothing is sensed
    falling = rbtutor.rotation_matrix(*attitude).T @ [0.0, 0.0, -9.81]
    f = rbtutor.specific_force([5.0, 1.0, 2.0], np.zeros(6), np.r_[falling, 0, 0, 0], attitude)
    np.testing.assert_allclose(f, np.zeros(3), atol=1e-12)


def test_the_specific_force_is_the_point_s_acceleration_less_gravity():
    rng = np.random.default_rng(7)
    point, nu, nu_dot, attitude = rng.normal(size=3), rng.normal(size=6), rng.normal(size=6), rng.normal(size=3)
    gravity_body = rbtutor.rotation_matrix(*attitude).T @ [0.0, 0.0, -9.81]
    np.testing.assert_allclose(rbtutor.specific_force(point, nu, nu_dot, attitude),
                               rbtutor.point_acceleration(point, nu, nu_dot) - gravity_body, atol=1e-12)
    with pytest.raises(ValueError, match="attitude"):
        rbtutor.specific_force(point, nu, nu_dot, [0.0, 0.0])
