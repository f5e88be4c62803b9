"""Every number of the printed answer key, reproduced by `python -m rbtutor key`."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from rbtutor.problems import PUBLISHED_KEY, read_yaml
from rbtutor.problems.printed import agrees_with_printed, printed_value

KEY_FILE = PUBLISHED_KEY  # the published key, shipped as package data
PUBLISHED = read_yaml(KEY_FILE.read_text())


@pytest.fixture(scope="module")
def computed():
    out = subprocess.run([sys.executable, "-m", "rbtutor", "key", "--format", "json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_every_published_id_is_computed(computed):
    missing = sorted(set(PUBLISHED) - set(computed))
    assert not missing, f"ids of answer_key.yaml that `rbtutor key` does not print: {missing}"


@pytest.mark.parametrize("answer_id", sorted(PUBLISHED))
def test_published_number(answer_id, computed):
    entry, value = PUBLISHED[answer_id], computed[answer_id]["value"]
    assert computed[answer_id]["unit"] == entry["unit"], f"{answer_id}: units differ"
    if entry.get("kind") == "roundoff":
        assert abs(value) <= entry["bound"], f"{answer_id}: residual {value} above {entry['bound']}"
        return
    erratum = entry.get("erratum")
    if erratum is None:
        assert agrees_with_printed(value, entry["printed"]), \
            f"{answer_id}: computed {value}, printed {entry['printed']}"
    else:
        assert agrees_with_printed(value, erratum["correct"]), \
            f"{answer_id}: computed {value}, erratum says {erratum['correct']}"
        assert not agrees_with_printed(value, entry["printed"]), \
            f"{answer_id}: the printed {entry['printed']} is not wrong after all"
        assert len(erratum["why"]) > 40
        assert isinstance(erratum["accept_printed"], bool)


def test_errata_are_marked():
    errata = {k for k, e in PUBLISHED.items() if "erratum" in e}
    plain = {k for k in errata if not PUBLISHED[k]["erratum"]["accept_printed"]}
    assert len(plain) >= 2
    assert len(errata) >= 4


def test_the_precision_rule_can_fail():
    """A value one printed unit away from the key is refused."""
    assert not agrees_with_printed(2.1601e6, "2.1600e6")
    assert agrees_with_printed(2.16004e6, "2.1600e6")
    assert not agrees_with_printed([0.088, 0.066, 0.2741], ["0.0880", "0.0660", "0.2740"])
    assert not agrees_with_printed([0.088, 0.066], ["0.0880", "0.0660", "0.2740"])
    assert not agrees_with_printed(math.nan, "0.0")
    assert printed_value("-5.669e-4") == pytest.approx(-5.669e-4)


def test_sign_error_in_coriolis_changes_the_key(monkeypatch):
    """The key is sensitive to the physics: a flipped C_RB block breaks Problem 5."""
    from rbtutor import RigidBody
    from rbtutor.problems import answer_key

    original = RigidBody.coriolis_forces

    def flipped(self, nu):
        f = original(self, nu)
        return np.concatenate([f[:3], -f[3:]])

    monkeypatch.setattr(RigidBody, "coriolis_forces", flipped)
    key = answer_key(problems=[5])
    assert not agrees_with_printed(key["p5.c.K"].value, PUBLISHED["p5.c.K"]["printed"])


# --- Problem 11: the course's own key, reproduced by an independent path ---------------------

def test_problem11_entries_are_marked_as_the_course_key():
    p11 = {k: e for k, e in PUBLISHED.items() if k.startswith("p11.")}
    from rbtutor.problems import answer_key

    assert set(p11) == set(answer_key(problems=[11]))
    assert all(e.get("source") == "course" for e in p11.values())
    assert not any(e.get("source") for k, e in PUBLISHED.items() if not k.startswith("p11."))


def test_problem11_key_by_an_independent_path():
    """scipy's Rotation (scalar last, its own conventions), quaternion products and closed forms."""
    from scipy.integrate import solve_ivp
    from scipy.spatial.transform import Rotation

    from rbtutor.problems import answer_key, load_data

    data = load_data()
    key = {k: np.asarray(a.value, dtype=float) for k, a in answer_key(data, problems=[11]).items()}
    eul = data["euler"]

    def close(name, value, rtol=1e-9, atol=1e-12):
        np.testing.assert_allclose(key[name], value, rtol=rtol, atol=atol, err_msg=name)

    def scalar_first(rotation):
        q = np.roll(rotation.as_quat(), 1)
        return q if q[0] >= 0 else -q

    def product(a, b):
        return np.concatenate([[a[0] * b[0] - a[1:] @ b[1:]], a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])])

    def conj(a):
        return a * np.array([1.0, -1.0, -1.0, -1.0])

    phi, theta, psi = eul["attitude"]
    attitude = Rotation.from_euler("ZYX", [psi, theta, phi])  # intrinsic z-y-x: Rz Ry Rx
    close("p11.a.q", scalar_first(attitude))
    given = np.asarray(eul["theta_given"], dtype=float)
    psi_g, theta_g, phi_g = Rotation.from_quat(np.roll(given, -1)).as_euler("ZYX")
    close("p11.a.angles", [phi_g, theta_g, psi_g])

    # (b) omega from the quaternion product: omega_0 = 2 vec(theta_dot theta*), omega_b = 2 vec(theta* theta_dot)
    q, rates = key["p11.a.q"], np.asarray(eul["theta_dot"], dtype=float)
    close("p11.b.omega_global", 2.0 * product(rates, conj(q))[1:])
    close("p11.b.omega_body", 2.0 * product(conj(q), rates)[1:])
    for k in range(4):  # G columns: the same products with unit rates
        e = np.eye(4)[k]
        np.testing.assert_allclose(key["p11.b.G_global"][:, k], 2.0 * product(e, conj(q))[1:], atol=1e-12)
        np.testing.assert_allclose(key["p11.b.G_body"][:, k], 2.0 * product(conj(q), e)[1:], atol=1e-12)

    # (c) closed forms: forward Euler multiplies |theta|^2 by 1 + h^2 |omega|^2 / 4 per step; classical
    # Runge-Kutta multiplies theta by the degree-4 Taylor polynomial of exp(hA), |.|^2 at z = i h |omega| / 2
    w = np.linalg.norm(eul["omega_body"])
    h, n = eul["step"], round(eul["t_end"] / eul["step"])
    close("p11.c.residual_euler", (1.0 + h * h * w * w / 4.0) ** n - 1.0, rtol=1e-10)
    z = 1j * h * w / 2.0
    gain = abs(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24) ** 2
    close("p11.c.residual_rk4", np.expm1(n * np.log(gain)), rtol=1e-6)
    assert abs(key["p11.c.constraint_rate"]) < 1e-15

    # (d) the node
    node = Rotation.from_quat(np.roll(np.asarray(eul["node_theta"], dtype=float), -1))
    rot = node.as_matrix()
    close("p11.d.R", rot)
    close("p11.d.rotation_xyz", node.as_euler("XYZ"))  # intrinsic x-y-z: Rx Ry Rz
    node_q = scalar_first(node)
    node_rates = np.asarray(eul["node_theta_dot"], dtype=float)
    if node_q @ np.asarray(eul["node_theta"]) < 0:
        node_q = -node_q
    omega_0 = 2.0 * product(node_rates, conj(node_q))[1:]
    close("p11.d.omega_global", omega_0, atol=1e-9)
    close("p11.d.omega_body", rot.T @ omega_0, atol=1e-9)
    arm = node.apply(data["crane"]["point"])
    close("p11.d.position_P", np.asarray(eul["node_position"]) + arm)
    close("p11.d.velocity_P", np.asarray(eul["node_velocity"]) + np.cross(omega_0, arm), atol=1e-8)

    # (e) the tumble: Euler's equations with the rotation matrix integrated (dR/dt = R S(omega_b)),
    # no quaternion at all; the minimum of R[2, 0] found on a fine grid and refined by a parabola
    mod = data["module"]
    a, b, c = mod["dimensions"]
    inertia = mod["mass"] / 12.0 * np.array([b * b + c * c, c * c + a * a, a * a + b * b])

    def rhs(t, y):
        om, rm = y[:3], y[3:].reshape(3, 3)
        dom = [(inertia[1] - inertia[2]) * om[1] * om[2] / inertia[0],
               (inertia[2] - inertia[0]) * om[2] * om[0] / inertia[1],
               (inertia[0] - inertia[1]) * om[0] * om[1] / inertia[2]]
        s = np.array([[0, -om[2], om[1]], [om[2], 0, -om[0]], [-om[1], om[0], 0]])
        return np.concatenate([dom, (rm @ s).ravel()])

    t_late = eul["tumble_time"]
    sol = solve_ivp(rhs, (0.0, t_late), np.concatenate([mod["omega0"], np.eye(3).ravel()]), method="DOP853",
                    rtol=1e-12, atol=1e-14, dense_output=True)
    grid = np.linspace(0.0, 3.0, 30001)
    r20 = sol.sol(grid)[3 + 6]
    i = int(np.argmin(r20))
    t0, dt = grid[i], grid[1] - grid[0]
    f_m, f_0, f_p = r20[i - 1], r20[i], r20[i + 1]
    t_min = t0 + 0.5 * dt * (f_m - f_p) / (f_m - 2 * f_0 + f_p)
    close("p11.e.t_pitch_max", t_min, rtol=1e-7)
    rm_top = sol.sol(t_min)[3:].reshape(3, 3)
    close("p11.e.pitch_max_deg", np.degrees(np.arctan2(-rm_top[2, 0], np.hypot(rm_top[0, 0], rm_top[1, 0]))),
          rtol=1e-7)
    late = Rotation.from_matrix(sol.sol(t_late)[3:].reshape(3, 3))
    q_late = np.roll(late.as_quat(), 1)
    q_late = q_late if q_late @ key["p11.e.q_late"] > 0 else -q_late
    close("p11.e.q_late", q_late, atol=1e-8)


def test_quiz_key_by_an_independent_path():
    """Problem 12 (the quiz), course numbers: closed forms and scipy's Rotation (the check of every
    student's variant, tests/test_variants.py, applied to the course's own numbers)."""
    import sys
    from pathlib import Path

    from rbtutor.problems import answer_key, load_data

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_variants import check_quiz_key

    data = load_data()
    key = answer_key(data, problems=[12])
    check_quiz_key("course", data["quiz"], key)
    assert {i for i in key if i.endswith("_line")} == {"p12.a.q10_line", "p12.b.q18_line", "p12.d.q37_line"}
