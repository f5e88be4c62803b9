"""Per-student variants: every student's data sensible, every student's key reproduced independently,
the fetch hook giving each student their own numbers, and grading against each student's own key.

The graded class (Problem 3, variants on): ``alice`` and ``bob`` answer with the key's computations
on their own data (full marks); ``copier`` computes with bob's numbers and ``booker`` with the
reference data the book prints (zero on every autograded part, and named in the integrity report).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import sympy as sp
from nbformat.v4 import new_code_cell

from rbtutor import symbolic as sym
from rbtutor.course.trial import exchange_config
from rbtutor.inertia import box_inertia, check_inertia
from rbtutor.problems import answer_key, load_data, read_yaml
from rbtutor.problems.variants import (
    MAX_CHANGE,
    RESERVED_IDS,
    load_course_data,
    student_key,
    to_yaml,
    variant,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_assignments import (
    ROOT,
    answered,
    grade_of,
    run_course,
)

DATA = load_data()
IDS = [f"student{k:03d}" for k in range(200)]
#: fields made from varied angles and rates (Euler parameters and their rates): checked by their own rules
DERIVED = {"euler.theta_given", "euler.theta_dot", "euler.node_theta", "euler.node_theta_dot"}
#: fields the variants keep as they are
FIXED = {"constants.g", "constants.rho", "module.t_end", "simulation.t_end", "euler.step", "euler.t_end",
         "euler.tumble_time"}
#: the quiz's numbers: drawn afresh by the question bank's own draw, over its ranges and with either sign
DRAWN = "quiz."


@pytest.fixture(scope="module")
def variants():
    return {sid: variant(DATA, sid) for sid in IDS}


def leaves(data, prefix=""):
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaves(value, path + ".")
        else:
            yield path, value


def significant_digits(x: float) -> int:
    digits = f"{abs(x):.12e}".split("e")[0].replace(".", "").rstrip("0")
    return max(len(digits), 1)


# --------------------------------------------------------------------------- the data


def test_reserved_ids_get_the_course_data_and_variants_are_stable():
    for sid in RESERVED_IDS:
        assert variant(DATA, sid) == DATA
    assert variant(DATA, "alice") == variant(DATA, "alice")
    assert variant(DATA, "alice") != variant(DATA, "bob")
    assert variant(DATA, "alice", salt="2026") != variant(DATA, "alice")
    with pytest.raises(ValueError, match="student id"):
        variant(DATA, 17)


def test_the_command_line_prints_the_same_data_and_key_in_a_fresh_process(tmp_path):
    run = [sys.executable, "-m", "rbtutor"]
    out = subprocess.run([*run, "data", "--student", "student042"], capture_output=True, text=True, check=True)
    assert out.stdout == to_yaml(variant(DATA, "student042"))
    assert read_yaml(out.stdout) == variant(DATA, "student042")
    key = json.loads(subprocess.run([*run, "key", "--student", "student042", "--format", "json", "--problem", "3"],
                                    capture_output=True, text=True, check=True).stdout)
    own = student_key(DATA, "student042", [3])
    assert set(key) == set(own)
    for name, answer in own.items():
        assert key[name]["value"] == pytest.approx(float(answer.value), rel=1e-15), name
    cls = tmp_path / "class.txt"
    cls.write_text("# my class\nalice\n\nbob\n")
    done = subprocess.run([*run, "data", "--class", str(cls), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, check=True)
    assert "2 students" in done.stdout
    assert read_yaml((tmp_path / "out" / "bob.yaml").read_text()) == variant(DATA, "bob")
    rows = (tmp_path / "out" / "key.csv").read_text().splitlines()
    assert rows[0] == "student,id,unit,value"
    assert len(rows) == 1 + 2 * len(answer_key(DATA))
    bad = subprocess.run([*run, "data", "--students", "a,../b", "--out", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert "plain student ids" in bad.stderr


def test_course_data_file_switches_variants_and_sets_the_salt(tmp_path):
    from rbtutor.problems.variants import per_student

    path = tmp_path / "problem_data.yaml"
    path.write_text("variants: {per_student: true, salt: fall-term-course-salt}\nload: {gm: 1.30}\n")
    data = load_course_data(path)
    assert per_student(data)
    assert not per_student(DATA)
    assert data["load"]["gm"] == 1.30
    merged = {**DATA, "load": {**DATA["load"], "gm": 1.30}}
    assert variant(data, "alice") == variant(merged, "alice", salt="fall-term-course-salt")
    assert "variants" not in variant(data, "alice")
    assert "variants" not in variant(data, "")
    path.write_text("variants: {per_student: yes please}\n")
    with pytest.raises(ValueError, match="per_student"):
        load_course_data(path)


def _field_problems(where: str, path: str, value, ref) -> list[str]:
    """What is wrong with one data field of a variant against the course's value ``ref``."""
    if path in FIXED:
        return [f"{where}: changed"] if value != ref else []
    if path in DERIVED:
        return []
    if path.startswith(DRAWN):  # not varied around the course's: only rounded as printed (tests/test_quiz.py)
        return [f"{where}: {x} is not rounded as printed" for x in np.atleast_1d(np.asarray(value, float))
                if significant_digits(x) > 3]
    problems = []
    values, refs = np.atleast_1d(np.asarray(value, float)), np.atleast_1d(np.asarray(ref, float))
    for x, r in zip(values, refs, strict=True):
        if r == 0.0:
            if x != 0.0:
                problems.append(f"{where}: a zero became {x}")
            continue
        # within the range, allowing the rounding (under 5 % of the number)
        if not (np.sign(x) == np.sign(r) and abs(x / r - 1.0) <= (1 + MAX_CHANGE) * 1.05 - 1):
            problems.append(f"{where}: {x} for {r}")
        if significant_digits(x) > 3:
            problems.append(f"{where}: {x} is not rounded as printed")
    return problems


def test_every_variant_is_sensible(variants):
    """Inertia valid about G and O (loaded too), GM > 0, ranges, signs, rounding, the same ids in the key."""
    from rbtutor.problems import loaded_vessel, vessel
    from rbtutor.torque_free import integrate_spin

    reference = dict(leaves(DATA))
    ids = set(answer_key(DATA))
    problems = []
    seen = set()
    for sid, v in variants.items():
        flat = dict(leaves(v))
        assert set(flat) == set(reference), sid
        seen.add(json.dumps(v["vessel"], sort_keys=True))
        for path, value in flat.items():
            problems += _field_problems(f"{sid} {path}", path, value, reference[path])
        # the ship: valid inertia about G and O, with and without the lifted module
        body, loaded = vessel(v), loaded_vessel(v)
        for name, tensor in (("I_G", body.inertia_g), ("I_O", body.inertia_o),
                             ("loaded I_G", loaded.inertia_g), ("loaded I_O", loaded.inertia_o),
                             ("module", box_inertia(v["module"]["mass"], v["module"]["dimensions"]))):
            try:
                check_inertia(name, tensor)
            except ValueError as exc:
                problems.append(f"{sid} {name}: {exc}")
        # stable where the problems assume it; G raised in 3(d); the loaded ship less stiff
        if not (v["turn"]["gm"] > 0 and 0 < v["load"]["gm"] < v["turn"]["gm"]):
            problems.append(f"{sid}: GM {v['turn']['gm']}, loaded {v['load']['gm']}")
        if not v["turn"]["z_g_raised"] > v["vessel"]["r_g"][2]:
            problems.append(f"{sid}: z_G not raised in 3(d)")
        # Euler parameters: unit (to the printed 6 decimals), rates tangent to the unit sphere
        e = v["euler"]
        for name in ("theta_given", "node_theta"):
            if abs(np.linalg.norm(e[name]) - 1.0) > 2e-6:
                problems.append(f"{sid} {name}: norm {np.linalg.norm(e[name])}")
        from rbtutor.euler_parameters import from_euler_angles

        for q, rates in ((from_euler_angles(*e["attitude"]), e["theta_dot"]), (e["node_theta"], e["node_theta_dot"])):
            if abs(np.dot(q, rates)) > 2e-6:
                problems.append(f"{sid}: parameter rates not tangent ({np.dot(q, rates)})")
        # the module flips twice within t_end (the notebook asks for two flip times)
        inertia = box_inertia(v["module"]["mass"], v["module"]["dimensions"]).diagonal()
        flips = integrate_spin(inertia, v["module"]["omega0"], v["module"]["t_end"], component=1).t_events[0]
        if len(flips) != 2:
            problems.append(f"{sid}: {len(flips)} flips")
        key = student_key(DATA, sid)
        if set(key) != ids:
            problems.append(f"{sid}: the key's ids differ from the course's")
            continue
        # what the written parts' model answers say holds for every student's numbers
        nu_dot6 = key["p6.b.nu_dot"].value
        if not (nu_dot6[2] < 0 < nu_dot6[4] and key["p3.c.phi_deg"].value < 0 < key["p3.d.phi_deg"].value
                and 0 < key["p9.d.heel_ratio"].value < 1
                and np.array_equal(np.sign(key["p9.a.shift"].value), [-1, 1, 1])):
            problems.append(f"{sid}: a sign or comparison of the written parts' model answers changed")
    assert not problems, "\n".join(problems[:40])
    assert len(seen) == len(variants), "two students got the same ship"


# --------------------------------------------------------------------------- the keys, independently


@pytest.fixture(scope="module")
def symbolic():
    """The chapter's symbolic matrices as numpy functions (rbtutor.symbolic, lambdified)."""
    body = sym.rigid_body_symbols()
    i_g = list(sym.inertia_symbols("G").values())
    i_o = list(sym.inertia_symbols("O").values())
    r_g, nu, nu_dot = list(body.r_g), list(body.nu), list(body.nu_dot)
    r_p = sp.symbols("x_P y_P z_P")
    lam = sp.lambdify
    return {
        "parallel": lam([i_g, body.mass, r_g], sym.parallel_axis(body.inertia_g, body.mass, body.r_g)),
        "mass": lam([body.mass, r_g, i_o], sym.mass_matrix(body)),
        "coriolis": lam([body.mass, r_g, i_o, nu], sym.coriolis_matrix(body)),
        "forces": lam([body.mass, r_g, i_o, nu, nu_dot], sym.printed_expanded_equations(body)),
        "point": lam([r_p, nu, nu_dot], sym.point_acceleration(r_p, body)),
    }


def values_of(tensor):
    return [tensor[0, 0], tensor[1, 1], tensor[2, 2], -tensor[0, 1], -tensor[0, 2], -tensor[1, 2]]


def check_key(sid, v, key, f):
    """Problems 1-9, 11(a-d) and 12 of one student from the symbolic derivations and closed forms."""
    from scipy.spatial.transform import Rotation

    def close(name, value, rtol=1e-9, atol=1e-9):
        np.testing.assert_allclose(np.asarray(key[name].value, float), np.asarray(value, float).squeeze(),
                                   rtol=rtol, atol=atol, err_msg=f"{sid} {name}")

    g = v["constants"]["g"]
    ves = v["vessel"]
    m, r_g = ves["mass"], np.asarray(ves["r_g"])
    p = ves["products_of_inertia_g"]
    k = np.asarray(ves["radii_of_gyration"])
    i_g = [m * k[0] ** 2, m * k[1] ** 2, m * k[2] ** 2, p["xy"], p["xz"], p["yz"]]
    i_o_tensor = np.asarray(f["parallel"](i_g, m, r_g), float)
    i_o = values_of(i_o_tensor)
    m_rb = np.asarray(f["mass"](m, r_g, i_o), float)
    # Problem 1
    close("p1.a.I_O", i_o_tensor, atol=1e-3)
    close("p1.a.I_xz_O", i_o[4], atol=1e-3)
    close("p1.b.M_RB", m_rb, atol=1e-3)
    close("p1.c.eig_min", np.linalg.eigvalsh(m_rb)[0])
    # Problem 2: the point acceleration of the chapter's derivation
    s = v["sensor"]
    a_p = np.asarray(f["point"](s["r_p"], s["nu"], s["nu_dot"]), float).ravel()
    close("p2.b.a_P", a_p, atol=1e-12)
    close("p2.c.error", a_p[2] - s["nu_dot"][2], atol=1e-12)
    turn_state = [s["turn_u"], 0, 0, 0, 0, s["turn_r"]]
    close("p2.d.lateral_g", float(np.asarray(f["point"](s["r_p"], turn_state, np.zeros(6))).ravel()[1]) / g)
    # Problem 3: the roll row of the printed equations with no acceleration, and the heel
    t = v["turn"]
    roll = float(np.asarray(f["forces"](m, r_g, i_o, t["nu"], np.zeros(6)), float).ravel()[3])
    close("p3.b.K", roll, atol=1e-6)
    close("p3.b.K", -m * r_g[2] * t["nu"][0] * t["nu"][5], rtol=1e-12)  # the closed form -m z_G u r
    close("p3.c.phi_deg", math.degrees(-roll / (m * g * t["gm"])))
    raised = [r_g[0], r_g[1], t["z_g_raised"]]
    i_o_raised = values_of(np.asarray(f["parallel"](i_g, m, raised), float))
    roll_raised = float(np.asarray(f["forces"](m, raised, i_o_raised, t["nu"], np.zeros(6))).ravel()[3])
    close("p3.d.K", roll_raised, atol=1e-6)
    close("p3.d.phi_deg", math.degrees(-roll_raised / (m * g * t["gm"])))
    # Problem 4: power two ways, C skew-symmetric
    nu4, tau4 = np.asarray(s["nu"]), np.asarray(v["power"]["tau"])
    c4 = np.asarray(f["coriolis"](m, r_g, i_o, nu4), float)
    close("p4.d.power", nu4 @ tau4)
    nu_dot4 = np.linalg.solve(m_rb, tau4 - c4 @ nu4)
    close("p4.d.power_from_M", nu4 @ m_rb @ nu_dot4, rtol=1e-8)
    # Problem 5: the six forces of the steady turn
    forces = np.asarray(f["forces"](m, r_g, i_o, t["nu"], np.zeros(6)), float).ravel()
    for n, name in enumerate("XYZKMN"):
        close(f"p5.c.{name}", forces[n], atol=1e-6)
    # Problem 6 and 7: accelerations from M_RB (symbolic) at rest
    close("p6.b.nu_dot", np.linalg.solve(m_rb, v["tow"]["tau"]), atol=1e-12)
    close("p6.c.m_z_G", m * r_g[2])
    force, point = np.asarray(v["crane"]["force"]), np.asarray(v["crane"]["point"])
    tau7 = np.concatenate([force, np.cross(point, force)])
    close("p7.a.M_O", tau7[3:])
    close("p7.a.M_G", np.cross(point - r_g, force))
    close("p7.b.nu_dot", np.linalg.solve(m_rb, tau7), atol=1e-12)
    # Problem 8: the box and the linearised spin about y (closed form)
    mod = v["module"]
    a, b, c = mod["dimensions"]
    inertia = mod["mass"] / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    close("p8.a.I_y", inertia[1])
    i1, i2, i3 = inertia
    close("p8.c.growth_rate", mod["spin_rate"] * math.sqrt((i2 - i1) * (i3 - i2) / (i1 * i3)))
    # Problem 9: the module added as a point mass, the new G and the tensor about the new G
    ld = v["load"]
    total = m + ld["mass"]
    new_g = (m * r_g + ld["mass"] * np.asarray(ld["position"])) / total
    close("p9.a.r_G", new_g)
    tensor_g = np.asarray(f["parallel"](i_g, m, r_g - new_g), float) + np.asarray(
        f["parallel"]([0.0] * 6, ld["mass"], np.asarray(ld["position"]) - new_g), float)
    close("p9.b.I_G", tensor_g, atol=1e-2)
    loaded_o = values_of(np.asarray(f["parallel"](values_of(tensor_g), total, new_g), float))
    roll9 = float(np.asarray(f["forces"](total, new_g, loaded_o, t["nu"], np.zeros(6)), float).ravel()[3])
    close("p9.d.K", roll9, atol=1e-6)
    close("p9.d.phi_deg", math.degrees(-roll9 / (total * g * ld["gm"])))
    # Problem 11 (a), (b), (d): scipy's Rotation (scalar last) and quaternion products
    e = v["euler"]
    phi, theta, psi = e["attitude"]
    q = np.roll(Rotation.from_euler("ZYX", [psi, theta, phi]).as_quat(), 1)
    q = q if q[0] >= 0 else -q
    close("p11.a.q", q, atol=1e-12)

    def product(x, y):
        return np.concatenate([[x[0] * y[0] - x[1:] @ y[1:]], x[0] * y[1:] + y[0] * x[1:] + np.cross(x[1:], y[1:])])

    conj = q * np.array([1.0, -1.0, -1.0, -1.0])
    close("p11.b.omega_body", 2.0 * product(conj, np.asarray(e["theta_dot"]))[1:], atol=1e-12)
    node = Rotation.from_quat(np.roll(np.asarray(e["node_theta"]), -1))
    close("p11.d.R", node.as_matrix(), atol=1e-12)
    close("p11.d.position_P", np.asarray(e["node_position"]) + node.apply(v["crane"]["point"]), atol=1e-9)
    check_quiz_key(sid, v["quiz"], key)


def check_quiz_key(sid, quiz, key):
    """Problem 12 (the quiz) from closed forms and scipy's Rotation, none of them rbtutor's own code."""
    from scipy.spatial.transform import Rotation

    def close(name, value, rtol=1e-9, atol=1e-12):
        np.testing.assert_allclose(np.asarray(key[name].value, float), np.asarray(value, float),
                                   rtol=rtol, atol=atol, err_msg=f"{sid} {name}")

    roll, pitch, yaw = quiz["q3"]["attitude_deg"]
    close("p12.a.q3_bow", Rotation.from_euler("ZYX", [yaw, pitch, roll], degrees=True).apply([1.0, 0.0, 0.0]))
    r, nu, nu_dot = (np.asarray(quiz["q7"][k]) for k in ("r_p", "nu", "nu_dot"))
    w = nu[3:]
    close("p12.a.q7_a_P", nu_dot[:3] + np.cross(w, nu[:3]) + np.cross(nu_dot[3:], r) + np.cross(w, np.cross(w, r)))
    h = quiz["q14"]
    x_g, y_g, z_g = h["r_g"]
    close("p12.b.q14_I_x_O", h["mass"] * (h["radii"][0] ** 2 + y_g**2 + z_g**2))
    close("p12.b.q14_I_xz_O", h["i_xz"] + h["mass"] * x_g * z_g)
    hull, nu22 = quiz["q21"], np.asarray(quiz["q22"]["nu"])
    v_g = nu22[:3] + np.cross(nu22[3:], hull["r_g"])  # Koenig: the motion of G and the rotation about G
    spin = nu22[3:] @ np.diag(hull["mass"] * np.asarray(hull["radii"]) ** 2) @ nu22[3:]
    close("p12.c.q22_T", 0.5 * hull["mass"] * v_g @ v_g + 0.5 * spin)
    lin = quiz["q28"]
    close("p12.c.q28_C_sway_yaw", lin["mass"] * lin["u"])
    close("p12.c.q28_C_heave_pitch", -lin["mass"] * lin["u"])
    close("p12.c.q28_C_yaw_yaw", lin["mass"] * lin["u"] * lin["r_g"][0])
    roll, pitch, yaw = quiz["q35"]["attitude_deg"]
    attitude = Rotation.from_euler("ZYX", [yaw, pitch, roll], degrees=True)
    q = np.roll(attitude.as_quat(), 1)
    close("p12.d.q35_theta", q if q @ key["p12.d.q35_theta"].value > 0 else -q)
    close("p12.d.q35_turn_deg", np.degrees(attitude.magnitude()))
    a, b, c = quiz["q41"]["sides"]
    omega = np.asarray(quiz["q41"]["omega"])
    close("p12.e.q41_lambda", omega @ (quiz["q41"]["mass"] / 12.0 * np.diag([b * b + c * c, a * a + c * c,
                                                                            a * a + b * b])) @ omega)


def test_every_key_is_reproduced_by_the_symbolic_derivations(variants, symbolic):
    for sid, v in variants.items():
        key = student_key(DATA, sid)
        check_key(sid, v, key, symbolic)


def test_problem10_key_reproduced_by_the_euler_parameter_simulation(variants):
    """The 13-state model (Euler parameters) reproduces each student's 12-state (Euler angle) run."""
    from rbtutor.euler_parameters import to_euler_angles
    from rbtutor.problems import vessel
    from rbtutor.simulation import simulate

    for sid in IDS[::4]:  # 50 students: one Euler-parameter run each is about a quarter of a second
        v = variants[sid]
        key = student_key(DATA, sid, [10])
        run = simulate(vessel(v), v["simulation"]["tau"], v["simulation"]["t_end"], attitude="euler_parameters",
                       rtol=1e-11, atol=1e-13)
        x = np.asarray(run.final_state, float)
        np.testing.assert_allclose(key["p10.b.nu1"].value, x[0:3], rtol=1e-6, atol=1e-8, err_msg=sid)
        np.testing.assert_allclose(key["p10.b.nu2"].value, x[3:6], rtol=1e-6, atol=1e-10, err_msg=sid)
        np.testing.assert_allclose(key["p10.b.eta1"].value, x[6:9], rtol=1e-6, atol=1e-6, err_msg=sid)
        angles = x[9:12] if x.size == 12 else to_euler_angles(x[9:13] / np.linalg.norm(x[9:13]))
        diff = (np.radians(key["p10.b.eta2_deg"].value) - angles + np.pi) % (2 * np.pi) - np.pi
        np.testing.assert_allclose(diff, 0.0, atol=1e-7, err_msg=sid)
        assert key["p10.c.delta_T"].value == pytest.approx(run.work[-1], rel=1e-7), sid


def test_copied_numbers_fail_another_students_key(variants):
    """For every pair of neighbours in the list, most data-dependent answers of one fail the other's key."""
    from rbtutor.grading.judge import judge

    reference_key = answer_key(DATA, [1, 2, 3, 5, 6, 7, 9])
    measured = [k for k, a in reference_key.items() if a.kind == "algebraic" and np.any(np.asarray(a.value != 0))
                and not isinstance(a.value, str) and not k.endswith("max_C_plus_CT")]
    fits = 0
    total = 0
    for own, other in itertools.pairwise(IDS[:41]):
        mine = student_key(DATA, own, [1, 2, 3, 5, 6, 7, 9])
        theirs = student_key(DATA, other, [1, 2, 3, 5, 6, 7, 9])
        for name in measured:
            if np.allclose(np.asarray(mine[name].value, float), np.asarray(reference_key[name].value, float)):
                continue  # does not depend on the varied data (e.g. a zero by symmetry)
            total += 1
            fits += judge(name, theirs[name].value, key=mine).passed
    assert total > 1000, f"{fits} of {total} copied answers passed"
    assert fits / total < 0.02, f"{fits} of {total} copied answers passed"


@pytest.mark.parametrize("salt", ["", "2026-autumn", "x" * 15])
def test_a_course_with_per_student_numbers_refuses_an_empty_or_short_salt(tmp_path, salt):
    """Each place that derives a student's numbers from course data refuses a guessable salt."""
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.render import render_course
    from rbtutor.grading.judge import course_reference
    from rbtutor.problems.variants import MIN_SALT_LENGTH, data_digest, per_student, settings

    assert len(salt) < MIN_SALT_LENGTH
    section = f"variants: {{per_student: true, salt: '{salt}'}}\n"
    path = tmp_path / "problem_data.yaml"
    path.write_text(section)
    data = {**DATA, "variants": {"per_student": True, "salt": salt}}
    message = f"salt of at least {MIN_SALT_LENGTH} characters"
    for call in (lambda: settings(data), lambda: per_student(data), lambda: data_digest(data),
                 lambda: variant(data, "alice"), lambda: student_key(data, "alice", [3]),
                 lambda: load_course_data(path), lambda: course_reference(path)):
        with pytest.raises(ValueError, match=message):
            call()
    shutil.copytree(ROOT / "exercises" / "problem03", tmp_path / "exercises" / "problem03")
    layout = CourseLayout(tmp_path)
    with pytest.raises(ValueError, match=message):
        render_course(layout, str(path))
    assert not layout.data_file.exists()  # nothing rendered, nothing saved for the grader
    for command in ("data", "key"):
        out = subprocess.run([sys.executable, "-m", "rbtutor", command, "--data", str(path), "--student", "alice"],
                             capture_output=True, text=True)
        assert out.returncode == 2, out.stdout
        assert message in out.stderr
        assert not out.stdout


def test_a_long_salt_or_variants_off_is_accepted():
    from rbtutor.problems.variants import MIN_SALT_LENGTH, settings

    salt = "f" * MIN_SALT_LENGTH
    assert settings({"variants": {"per_student": True, "salt": salt}}) == {"per_student": True, "salt": salt}
    assert settings({"variants": {"per_student": False}}) == {"per_student": False, "salt": ""}
    assert variant({**DATA, "variants": {"per_student": True, "salt": salt}}, "alice") == variant(DATA, "alice", salt)


# --------------------------------------------------------------------------- fetch hook and grading


def make_course(tmp: Path, salt: str = "variants-test-course") -> Path:
    course = tmp / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / "problem03", course / "exercises" / "problem03",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (course / "exercises" / "problem_data.yaml").write_text(
        f"# the course data: the reference ship, variants on\nvariants: {{per_student: true, salt: {salt}}}\n")
    return course


def fetch(course: Path, student: str, assignment: str = "problem03") -> Path:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    from rbtutor.course.personal import PersonalFetchAssignment

    home = course.parent / "students" / student
    home.mkdir(parents=True, exist_ok=True)
    config = exchange_config(course, home)
    config.PersonalFetchAssignment.data_file = str(course / "exercises" / "problem_data.yaml")
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    PersonalFetchAssignment(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()
    return home / assignment / f"{assignment}.ipynb"


def submit(course: Path, student: str, nb, assignment: str = "problem03") -> None:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeSubmit

    home = course.parent / "students" / student
    nbformat.write(nb, home / assignment / f"{assignment}.ipynb")
    config = exchange_config(course, home)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    ExchangeSubmit(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()


def data_cell(nb):
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "problem_data")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Problem 3 released, fetched through the hook by four students, submitted, collected and graded."""
    from rbtutor.course import api
    from rbtutor.course.render import data_source

    course = make_course(tmp_path_factory.mktemp("variants"))
    course_data = load_course_data(course / "exercises" / "problem_data.yaml")  # salt "variants-test-course"
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert api(course).release_assignment("problem03")["success"]
    source = course / "exercises" / "problem03" / "problem03.ipynb"
    fetched = {s: fetch(course, s) for s in ("alice", "bob", "copier", "booker")}
    cells = {s: data_cell(nbformat.read(p, as_version=4)).source for s, p in fetched.items()}
    for student in ("alice", "bob"):
        submit(course, student, answered(nbformat.read(fetched[student], as_version=4), source))
    # computing with someone else's numbers: a plain cell after the (own) data cell redefines them
    for student, whose in (("copier", "bob"), ("booker", "")):
        nb = answered(nbformat.read(fetched[student], as_version=4), source)
        at = nb.cells.index(data_cell(nb)) + 1
        nb.cells.insert(at, new_code_cell("\n".join(data_source(3, variant(course_data, whose)).splitlines()[2:])))
        submit(course, student, nb)
    collected = run_course(course, "collect", "problem03")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return course, fetched, cells, result.stdout


def test_fetched_notebooks_carry_each_students_own_numbers(graded_class):
    from nbgrader.validator import Validator

    from rbtutor.course.render import data_source

    course, fetched, cells, _ = graded_class
    data = load_course_data(course / "exercises" / "problem_data.yaml")
    assert len(set(cells.values())) == 4, "every student sees different numbers"
    released = data_cell(nbformat.read(course / "release" / "problem03" / "problem03.ipynb", as_version=4)).source
    assert released == data_source(3, DATA)
    assert released not in cells.values()
    for student, text in cells.items():
        assert text == data_source(3, variant(data, student))
        assert f"{variant(data, student)['vessel']['mass']!r}" in text
    # the instructions quote each student's own numbers too
    intros = {s: nbformat.read(p, as_version=4).cells[0].source for s, p in fetched.items()}
    assert len(set(intros.values())) == 4
    for student, intro in intros.items():
        own = variant(data, student)["turn"]
        assert f"$GM = {own['gm']:.2f}$ m" in intro, intro
        assert f"$u = {own['nu'][0]:.1f}$ m/s" in intro, intro
    # the checksum follows the new source: Validate sees no changed locked cell
    home = course.parent / "students" / "dora"
    path = fetch(course, "dora")
    nb = nbformat.read(path, as_version=4)
    assert Validator()._get_changed_cells(nb) == []
    data_cell(nb).source += "\nm = 1.0"
    assert len(Validator()._get_changed_cells(nb)) == 1
    # a re-fetch (after deleting the folder) gives the same numbers
    shutil.rmtree(home / "problem03")
    assert data_cell(nbformat.read(fetch(course, "dora"), as_version=4)).source == \
        data_source(3, variant(data, "dora"))


def test_own_right_answers_score_full_and_copied_numbers_score_nothing(graded_class):
    course = graded_class[0]
    autograded = [c for c in nbformat.read(course / "exercises" / "problem03" / "problem03.ipynb",
                                           as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
                  and re.search(r"hand_in\(", c.source)]
    assert len(autograded) >= 4
    for cell in autograded:
        gid = cell.metadata["nbgrader"]["grade_id"]
        for student in ("alice", "bob"):
            score, full = grade_of(course, "problem03", student, gid)
            assert score == full > 0, f"{student} {gid}: {score}/{full}"
        for student in ("copier", "booker"):
            score, full = grade_of(course, "problem03", student, gid)
            assert score == 0, f"{student} {gid}: {score}/{full}"


def test_the_integrity_report_names_whose_numbers_were_used(graded_class):
    course = graded_class[0]
    report = json.loads((course / "integrity_report.json").read_text())
    by_student = {e["student"]: e for e in report if e["assignment"] == "problem03"}

    def kinds(student):
        return {(ev["kind"], ev.get("whose")) for ev in by_student[student]["events"] if ev["stage"] == "judge"}

    assert ("fits_other_student", "bob") in kinds("copier")
    assert ("fits_reference", "the course data") in kinds("booker")
    assert not {k for k, _ in kinds("alice") | kinds("bob")}
    # the data cells of the honest students were restored to their own numbers without any event
    for student in ("alice", "bob"):
        restore = [ev for ev in by_student[student]["events"] if ev["stage"] == "restore"]
        assert restore == [], restore


def test_render_keeps_the_variants_section_and_shows_the_course_numbers(tmp_path):
    """`python -m rbtutor.course render --data FILE` with a variants section: saved, and the source shows
    the course's own numbers (the instructor's variant)."""
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.render import data_source, render_course
    from rbtutor.problems.variants import per_student

    shutil.copytree(ROOT / "exercises" / "problem03", tmp_path / "exercises" / "problem03")
    (tmp_path / "ship.yaml").write_text("variants: {per_student: true, salt: render-test-salt-x}\nturn: {gm: 1.7}\n")
    layout = CourseLayout(tmp_path)
    render_course(layout, str(tmp_path / "ship.yaml"))
    saved = load_course_data(layout.data_file)
    assert per_student(saved)
    assert saved["variants"]["salt"] == "render-test-salt-x"
    assert saved["turn"]["gm"] == 1.7
    nb = nbformat.read(tmp_path / "exercises" / "problem03" / "problem03.ipynb", as_version=4)
    assert data_cell(nb).source == data_source(3, {**DATA, "turn": {**DATA["turn"], "gm": 1.7}})
