"""rbtutor.symbolic: each derivation of the chapter holds symbolically, and each
symbolic matrix, turned into a numeric function, agrees with the numeric library."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import rbtutor
from rbtutor import symbolic as sym

SEEDS = range(5)


def _zero(matrix) -> bool:
    return sp.Matrix(matrix).is_zero_matrix is True


# ---------------------------------------------------------------------------
# The tools themselves
# ---------------------------------------------------------------------------


def test_trig_reduce_is_exact_and_catches_a_wrong_identity():
    """trig_reduce proves true trig identities and leaves false ones non-zero."""
    a, b, x = sp.symbols("a b x")
    assert sym.trig_reduce(sp.sin(a) ** 4 - sp.cos(a) ** 4 - sp.sin(a) ** 2 + sp.cos(a) ** 2) == 0
    assert sym.trig_reduce(sp.cos(a) ** 2 * sp.sin(b) + sp.sin(a) ** 2 * sp.sin(b) - sp.sin(b)) == 0
    assert sym.trig_reduce((sp.sin(a) ** 2 + sp.cos(a) ** 2) / x) == 1 / x
    assert sym.trig_reduce(sp.sin(a) ** 2 - sp.cos(a) ** 2) != 0
    assert not sym.is_identity(sp.Matrix([sp.sin(a)]), sp.Matrix([sp.cos(a)]))


def test_term_difference_reports_the_odd_terms():
    """term_difference names the terms that differ, and nothing when they agree."""
    p, q, r = sp.symbols("p q r")
    assert sym.term_difference(p * (q + r), p * q + p * r) == (set(), set())
    assert sym.term_difference(p * q + r, p * q - r) == ({r}, {-r})


def test_dot_notation_replaces_functions_and_derivatives():
    """dot_notation turns phi(t), phi'(t), phi''(t) into phi, dot phi, ddot phi."""
    phi = sp.Function("phi")(sym.TIME)
    out = sym.dot_notation(phi.diff(sym.TIME, 2) + phi.diff(sym.TIME) * sp.sin(phi))
    names = {s.name for s in out.free_symbols}
    assert names == {r"\ddot{\phi}", r"\dot{\phi}", "phi"}


# ---------------------------------------------------------------------------
# Section 5.2: rotation, angular velocity, cross products, accelerations
# ---------------------------------------------------------------------------


def test_rotation_matrix_is_the_printed_one_and_orthonormal():
    """R from the elementary rotations equals the chapter's matrix and R^T R = I."""
    angles = sym.euler_angle_symbols()
    rot = sym.rotation_matrix(*angles)
    assert sym.is_identity(rot, sym.printed_rotation_matrix(*angles))
    assert sym.is_identity(rot.T * rot, sp.eye(3))


def test_rdot_rt_is_the_skew_matrix_of_omega0():
    """eq-RdotRT-compact-1: Rdot R^T = S(omega0), and the printed matrix is right."""
    rdot_rt, s_omega0 = sym.rdot_rt()
    assert sym.is_identity(rdot_rt, s_omega0)
    assert sym.is_identity(rdot_rt, sym.printed_rdot_rt())
    assert _zero(rdot_rt + rdot_rt.T)


def test_angular_velocities():
    """eq-ang-vel-bcs-repeat from the elementary rotations and from R^T Rdot; eq-ang-vel-gcs."""
    omega = sym.body_angular_velocity()
    assert sym.is_identity(omega, sym.printed_body_angular_velocity())
    assert sym.is_identity(omega, sym.angular_velocity_from_rotation())
    assert sym.is_identity(sym.global_angular_velocity(), sym.printed_global_angular_velocity())


def test_cross_product_as_matrix_products():
    """a x b = S(a) b = -S(b) a, and S(a) S(a) = a a^T - (a.a) I."""
    by_components, s_a_b, minus_s_b_a = sym.cross_product_as_matrix()
    assert _zero(sp.expand(by_components - s_a_b))
    assert _zero(sp.expand(by_components - minus_s_b_a))
    a = sp.Matrix(sp.symbols("a1:4"))
    b = sp.Matrix(sp.symbols("b1:4"))
    assert _zero(sp.expand(by_components - a.cross(b)))
    assert _zero(sp.expand(sym.skew_square_identity()[0] - sym.skew_square_identity()[1]))
    assert _zero(sym.unskew(sym.skew(a)) - a)


def test_jacobi_identity():
    """a x (b x c) + b x (c x a) + c x (a x b) = 0, also for the vectors of eq-inertia-simplify-2."""
    assert _zero(sym.jacobi_identity())
    body = sym.rigid_body_symbols()
    w, r = body.angular_velocity, body.r_g
    assert _zero(sym.jacobi_identity(r, w, w.cross(r)))


def test_rotation_carries_cross_products():
    """R^T (R a x R b) = a x b (the step from eq-newtons-eom to eq-newtons-eom-1)."""
    assert sym.is_identity(*sym.rotated_cross_product())


def test_body_frame_derivative():
    """eq-acc-vel-der-bcs: R^T d/dt (R v) = v_dot + omega x v."""
    assert sym.is_identity(*sym.body_frame_derivative())


def test_acceleration_of_g():
    """eq-acc-triangle-law-2 in the GCS, and eq-newtons-eom-1/-2 in the BCS."""
    assert sym.is_identity(*sym.acceleration_of_g_gcs())
    assert sym.is_identity(*sym.acceleration_of_g())


def test_moment_transfer():
    """eq-ext-moment: R^T M_0G = M - r_G x F for a force at any point plus a couple."""
    assert sym.is_identity(*sym.moment_transfer())


def test_printed_position_vectors_are_the_slip_and_cannot_hold():
    """eq-bcs-origin-vec-gcs, eq-cog-vec-gcs: the printed y component repeats x."""
    vectors = sym.printed_position_vectors()
    assert set(vectors) == {"eq-bcs-origin-vec-gcs", "eq-cog-vec-gcs"}
    for printed, intended in vectors.values():
        difference = printed - intended
        assert difference[0] == 0
        assert difference[2] == 0
        assert difference[1] != 0
    # With the printed forms, r_0G - r_0O has equal x and y components, which
    # eq-position-vec-triangle-law contradicts at psi = 90 deg for r_G on the x axis.
    printed_o, _ = vectors["eq-bcs-origin-vec-gcs"]
    printed_g, _ = vectors["eq-cog-vec-gcs"]
    x_g = sp.Symbol("x_G", positive=True)
    moved = sym.rotation_matrix(0, 0, sp.pi / 2) * sp.Matrix([x_g, 0, 0])
    unknowns = list((printed_g - printed_o).free_symbols)
    assert sp.solve(list(printed_g - printed_o - moved), unknowns, dict=True) == []


# ---------------------------------------------------------------------------
# Section 5.3: inertia and the rotational equations
# ---------------------------------------------------------------------------


def test_parallel_axis_theorem_components():
    """eq-parallel-axes-theorem entry by entry: I_x^O = I_x^G + m(y^2+z^2), I_xz^O = I_xz^G + m x z."""
    for name, (from_tensor, scalar) in sym.parallel_axis_components().items():
        assert sp.expand(from_tensor - scalar) == 0, name


def test_parallel_axis_theorem_from_the_definition():
    """Three point masses: the tensor about O equals I_G - m S(r_G) S(r_G)."""
    about_o, moved = sym.parallel_axis_from_point_masses(3)
    assert _zero(sp.simplify(about_o - moved))


def test_triple_product_simplifications():
    """eq-inertia-simplify-1/-1a and eq-inertia-simplify-2 to -4: every stage is equal."""
    for stages in (sym.angular_acceleration_terms(), sym.gyroscopic_terms()):
        for stage in stages[:-1]:
            assert _zero(sp.expand(stage - stages[-1]))


def test_rotational_equation_about_g_equals_the_one_about_o():
    """eq-euler-eom-2 (about G, I_G) equals eq-euler-eom-final (about O, I_O from I_G)."""
    body = sym.rigid_body_symbols()
    i_o = sym.parallel_axis(body.inertia_g, body.mass, body.r_g)
    difference = sym.rotational_equations_about_g(body) - sym.rotational_equations(body, i_o)
    assert _zero(sp.expand(difference))


# ---------------------------------------------------------------------------
# Section 5.4 and 5.5: the six equations, M_RB, C_RB, linearisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", range(6))
def test_expanded_equations_match_the_printed_ones_term_by_term(row):
    """eq-eom-expanded-1..6 agree term for term with the expanded vector equations."""
    body = sym.rigid_body_symbols()
    derived = sym.expanded_equations(body)[row]
    printed = sym.printed_expanded_equations(body)[row]
    assert sym.term_difference(derived, printed) == (set(), set())
    assert sp.expand(derived - printed) == 0


def test_mass_and_coriolis_matrices():
    """eq-mass-matrix from blocks equals the printed matrix; C_RB is skew; nu^T C nu = 0;
    M nu_dot + C nu gives the six expanded equations."""
    body = sym.rigid_body_symbols()
    mass = sym.mass_matrix(body)
    coriolis = sym.coriolis_matrix(body)
    assert _zero(mass - sym.printed_mass_matrix(body))
    assert _zero(mass - mass.T)
    assert _zero(sp.expand(coriolis + coriolis.T))
    assert sp.expand((body.nu.T * coriolis * body.nu)[0, 0]) == 0
    assert _zero(sp.expand(sym.matrix_form(body) - sym.expanded_equations(body)))
    at_g = sym.mass_matrix(body).subs({c: 0 for c in body.r_g})
    assert _zero(at_g[:3, 3:])
    assert _zero(at_g[3:, :3])


def test_linearised_equations():
    """eq-eom-matrix-form-linear: first order in epsilon is M_RB nu_dot; the rest is C_RB nu."""
    body = sym.rigid_body_symbols()
    parts = sym.linearised_equations(body)
    assert _zero(sp.expand(parts["first_order"] - parts["linear"]))
    assert _zero(sp.expand(parts["second_order"] - sym.coriolis_matrix(body) * body.nu))
    rebuilt = parts["epsilon"] * parts["first_order"] + parts["epsilon"] ** 2 * parts["second_order"]
    assert _zero(sp.expand(parts["scaled"] - rebuilt))


def test_linearisation_about_forward_speed_steps():
    """eq-eom-linear-forward-speed: no force at the steady run; first order = C_RB(nu0) dnu + C_RB(dnu) nu0
    = C_lin dnu; second order = C_RB(dnu) dnu; C_lin has exactly the m U couplings."""
    body = sym.rigid_body_symbols()
    parts = sym.linearised_about_forward_speed(body)
    dnu, eps, u_speed = parts["dnu"], parts["epsilon"], parts["U"]
    assert _zero(parts["zeroth_order"])
    assert _zero(sp.expand(parts["first_order"] - parts["from_steady"] - parts["from_perturbation"]))
    assert _zero(sp.expand(parts["first_order"] - parts["C_lin"] * dnu))
    perturbation_only = sym.coriolis_matrix(body).xreplace(dict(zip(body.nu, dnu, strict=True))) * dnu
    assert _zero(sp.expand(parts["second_order"] - perturbation_only))
    rebuilt = parts["zeroth_order"] + eps * parts["first_order"] + eps**2 * parts["second_order"]
    assert _zero(sp.expand(parts["substituted"] - rebuilt))
    # Neither half alone is the answer: C_RB(nu0) dnu has heave and sway terms in pitch and yaw
    # that C_RB(dnu) nu0 cancels.
    assert not _zero(parts["from_steady"] - parts["first_order"])
    m, (x_g, y_g, z_g) = body.mass, body.r_g
    expected = sp.zeros(6, 6)
    expected[1, 5], expected[2, 4] = m * u_speed, -m * u_speed
    expected[3, 4], expected[3, 5] = -m * u_speed * y_g, -m * u_speed * z_g
    expected[4, 4], expected[5, 5] = m * u_speed * x_g, m * u_speed * x_g
    assert _zero(sp.expand(parts["C_lin"] - expected))
    assert _zero(sym.linearised_coriolis_matrix(body, speed=0))


@pytest.mark.parametrize("seed", SEEDS)
def test_linearised_coriolis_matrix_is_the_numerical_jacobian(seed):
    """C_lin(U) agrees with central finite differences of rbtutor's C_RB(nu) nu at nu0 = [U,0,0,0,0,0]."""
    rng = np.random.default_rng(200 + seed)
    body = _random_body(rng)
    speed = rng.uniform(0.5, 12.0)
    symbols = sym.rigid_body_symbols()
    u_speed = sp.Symbol("U")
    c_lin = sp.lambdify([symbols.mass, list(symbols.r_g), u_speed],
                        sym.linearised_coriolis_matrix(symbols, u_speed))(body.mass, body.r_g, speed)
    nu0 = np.array([speed, 0.0, 0.0, 0.0, 0.0, 0.0])
    step = 1e-4
    jacobian = np.empty((6, 6))
    for k in range(6):
        dnu = np.zeros(6)
        dnu[k] = step
        jacobian[:, k] = (body.coriolis_forces(nu0 + dnu) - body.coriolis_forces(nu0 - dnu)) / (2 * step)
    scale = body.mass * speed * max(1.0, np.abs(body.r_g).max())
    # C_RB(nu) nu is quadratic, so central differences are exact up to round-off.
    np.testing.assert_allclose(c_lin, jacobian, rtol=0.0, atol=1e-9 * scale)
    assert np.abs(c_lin).max() > 0.1 * body.mass * speed


def test_linearised_kinematics():
    """eq-kinematics-dynamics-linear: to first order eta_dot = nu."""
    parts = sym.linearised_kinematics()
    assert _zero(parts["first_order"] - parts["nu"])
    assert not _zero(parts["second_order"])


# ---------------------------------------------------------------------------
# Lambdified symbolic matrices against the numeric library
# ---------------------------------------------------------------------------


def _random_body(rng):
    mass = rng.uniform(1.0, 10.0)
    radii = rng.uniform(1.0, 1.3, 3)
    products = mass * rng.uniform(-0.05, 0.05, 3)
    inertia_g = rbtutor.inertia_from_gyration(mass, radii, *products)
    return rbtutor.RigidBody(mass, rng.uniform(-2.0, 2.0, 3), inertia_g)


def _inertia_values(tensor) -> list[float]:
    products = rbtutor.products_of_inertia(tensor)
    return [tensor[0, 0], tensor[1, 1], tensor[2, 2], products["xy"], products["xz"], products["yz"]]


@pytest.fixture(scope="module")
def numeric():
    """The symbolic matrices turned into numpy functions, once per module."""
    body = sym.rigid_body_symbols()
    angles = sym.euler_angle_symbols()
    a = sp.symbols("a1:4")
    i_g = list(sym.inertia_symbols("G").values())
    i_o = list(sym.inertia_symbols("O").values())
    r_g, nu, nu_dot = list(body.r_g), list(body.nu), list(body.nu_dot)
    r_p = sp.symbols("x_P y_P z_P")
    rates = sp.symbols("phidot thetadot psidot")
    lam = sp.lambdify
    return {
        "rotation": lam(angles, sym.rotation_matrix(*angles)),
        "skew": lam([a], sym.skew(a)),
        "omega": lam([angles[:2], rates], sym.euler_rate_jacobian(*angles[:2]) * sp.Matrix(rates)),
        "rates": lam([angles[:2]], sym.euler_rate_matrix(*angles[:2])),
        "parallel": lam([i_g, body.mass, r_g], sym.parallel_axis(body.inertia_g, body.mass, body.r_g)),
        "mass": lam([body.mass, r_g, i_o], sym.mass_matrix(body)),
        "coriolis": lam([body.mass, r_g, i_o, nu], sym.coriolis_matrix(body)),
        "forces": lam([body.mass, r_g, i_o, nu, nu_dot], sym.printed_expanded_equations(body)),
        "point": lam([r_p, nu, nu_dot], sym.point_acceleration(r_p, body)),
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_lambdified_kinematics_match_the_library(numeric, seed):
    """rotation_matrix, skew, euler_rate_matrix and angular_velocity_from_euler_rates."""
    rng = np.random.default_rng(seed)
    phi, psi = rng.uniform(-np.pi, np.pi, 2)
    theta = rng.uniform(-1.4, 1.4)
    a = rng.normal(size=3)
    rates = rng.normal(size=3)
    np.testing.assert_allclose(numeric["rotation"](phi, theta, psi),
                               rbtutor.rotation_matrix(phi, theta, psi), atol=1e-14)
    np.testing.assert_allclose(numeric["skew"](a), rbtutor.skew(a), atol=0)
    np.testing.assert_allclose(numeric["omega"]((phi, theta), rates).ravel(),
                               rbtutor.angular_velocity_from_euler_rates(phi, theta, rates),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(numeric["rates"]((phi, theta)),
                               rbtutor.euler_rate_matrix(phi, theta), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_lambdified_dynamics_match_the_library(numeric, seed):
    """parallel_axis, M_RB, C_RB, the six expanded equations and point_acceleration."""
    rng = np.random.default_rng(100 + seed)
    body = _random_body(rng)
    nu, nu_dot, r_p = rng.normal(size=6), rng.normal(size=6), rng.normal(size=3)
    i_g, i_o = _inertia_values(body.inertia_g), _inertia_values(body.inertia_o)
    np.testing.assert_allclose(numeric["parallel"](i_g, body.mass, body.r_g), body.inertia_o,
                               rtol=1e-13)
    np.testing.assert_allclose(numeric["mass"](body.mass, body.r_g, i_o), body.mass_matrix(),
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(numeric["coriolis"](body.mass, body.r_g, i_o, nu),
                               body.coriolis_matrix(nu), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(numeric["forces"](body.mass, body.r_g, i_o, nu, nu_dot).ravel(),
                               body.forces(nu, nu_dot), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(numeric["point"](r_p, nu, nu_dot).ravel(),
                               rbtutor.point_acceleration(r_p, nu, nu_dot), rtol=1e-13, atol=1e-13)


def test_sympy_is_loaded_only_by_rbtutor_symbolic():
    """`import rbtutor` alone does not import sympy."""
    import subprocess
    import sys

    code = "import sys, rbtutor; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
