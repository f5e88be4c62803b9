"""How fast rbtutor simulates Problem 10, and how light ``import rbtutor`` is.

(a) ``rbtutor.simulate`` for Problem 10 (90 s) against a textbook baseline written
    here: a right-hand side that builds M_RB and the 6x6 C_RB(nu) as block matrices
    at every call and solves ``M_RB nu_dot = tau - C_RB nu`` with numpy.linalg.solve,
    with ``R(Theta) nu1`` and ``J2(Theta) nu2`` for the kinematics and the work of
    the load as a 13th state. Both use the integrator and tolerances that
    ``simulate`` has by default (read from its signature). Target: baseline / rbtutor >= 1.
(b) The start-up cost of ``import rbtutor`` over ``import numpy, scipy.integrate``,
    each in fresh interpreters. Target: < 50 ms. ``import rbtutor`` must not load
    sympy or matplotlib.

Targets print PASS or FAIL and do not change the exit status; a wrong result
(energy identity, baseline disagreement, a heavy import) raises.

Run with ``make bench`` or ``.venv/bin/python benchmarks/bench_simulate.py``.
"""

from __future__ import annotations

import inspect
import math
import statistics
import subprocess
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp

import rbtutor

REPEATS = 7  # simulation timings are medians over this many runs
IMPORT_REPEATS = 15  # a fresh interpreter varies by tens of ms from run to run
SPEEDUP_TARGET = 1.0  # baseline time / rbtutor time
IMPORT_TARGET_MS = 50.0  # import rbtutor minus import numpy, scipy.integrate
ENERGY_RTOL = 1e-10  # |T(90) - T(0) - work| / work
AGREEMENT = 1e-8  # baseline against rbtutor, final 12-state, absolute SI

# Problem 10
MASS = 6.0e6  # kg
R_G = np.array([-2.5, 0.0, -1.2])  # m
INERTIA_G = rbtutor.inertia_from_gyration(MASS, [7.2, 21.0, 21.5], i_xz=2.5e7)  # kg m^2
TAU = np.array([2.0e5, 0.0, 0.0, 0.0, 0.0, 1.5e6])  # N, N m at O in body axes
T_END = 90.0  # s


# --- (a) the textbook baseline -----------------------------------------------------

def s_matrix(a) -> np.ndarray:
    """Cross-product matrix, S(a) b = a x b."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def textbook_rhs(mass, r_g, inertia_g, tau):
    """``x_dot`` of ``x = [nu, eta, work]`` with every matrix rebuilt at every call."""

    def rhs(t, x):
        nu1, nu2 = x[0:3], x[3:6]
        phi, theta, psi = x[9:12]
        s_rg = s_matrix(r_g)
        inertia_o = inertia_g - mass * s_rg @ s_rg
        m_rb = np.block([[mass * np.eye(3), -mass * s_rg],
                         [mass * s_rg, inertia_o]])
        s_w = s_matrix(nu2)
        c_rb = np.block([[mass * s_w, -mass * s_w @ s_rg],
                         [mass * s_rg @ s_w, -s_matrix(inertia_o @ nu2)]])
        nu_dot = np.linalg.solve(m_rb, tau - c_rb @ x[0:6])

        cf, sf = math.cos(phi), math.sin(phi)
        ct, st = math.cos(theta), math.sin(theta)
        cp, sp = math.cos(psi), math.sin(psi)
        rx = np.array([[1.0, 0.0, 0.0], [0.0, cf, -sf], [0.0, sf, cf]])
        ry = np.array([[ct, 0.0, st], [0.0, 1.0, 0.0], [-st, 0.0, ct]])
        rz = np.array([[cp, -sp, 0.0], [sp, cp, 0.0], [0.0, 0.0, 1.0]])
        j2 = np.array([[1.0, sf * st / ct, cf * st / ct],
                       [0.0, cf, -sf],
                       [0.0, sf / ct, cf / ct]])
        return np.concatenate([nu_dot, rz @ ry @ rx @ nu1, j2 @ nu2, [x[0:6] @ tau]])

    return rhs


def simulate_defaults() -> dict:
    """The integrator and tolerances ``rbtutor.simulate`` uses when not told otherwise."""
    parameters = inspect.signature(rbtutor.simulate).parameters
    return {name: parameters[name].default for name in ("method", "rtol", "atol")}


def baseline(defaults: dict) -> np.ndarray:
    """Final ``[nu, eta, work]`` of Problem 10 from the textbook right-hand side."""
    rhs = textbook_rhs(MASS, R_G, INERTIA_G, TAU)
    sol = solve_ivp(rhs, (0.0, T_END), np.zeros(13), **defaults)
    if not sol.success:
        raise RuntimeError(f"baseline integration failed: {sol.message}")
    return sol.y[:, -1]


def require(condition: bool, message: str) -> None:
    """Fail loudly on a wrong result (unlike a missed timing target); survives ``python -O``."""
    if not condition:
        raise RuntimeError(message)


def timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    return time.perf_counter() - start, value


def bench_simulate() -> tuple[str, list[tuple[str, str, str, str]]]:
    defaults = simulate_defaults()
    body = rbtutor.RigidBody(MASS, R_G, INERTIA_G)
    rbtutor.simulate(body, TAU, T_END)  # warm-up of both, outside the timing
    baseline(defaults)
    ours, theirs = [], []
    for _ in range(REPEATS):  # interleaved, so that drifts of the machine hit both alike
        seconds, result = timed(rbtutor.simulate, body, TAU, T_END)
        ours.append(seconds)
        seconds, final = timed(baseline, defaults)
        theirs.append(seconds)

    work = result.work[-1]
    energy = abs(result.kinetic_energy[-1] - result.kinetic_energy[0] - work) / abs(work)
    require(energy < ENERGY_RTOL, f"energy identity broken: {energy:.3g} >= {ENERGY_RTOL:g}")
    gap = float(np.max(np.abs(final[:12] - result.final_state)))
    require(gap < AGREEMENT, f"baseline and rbtutor differ by {gap:.3g} >= {AGREEMENT:g}")
    work_gap = abs(final[12] - work) / abs(work)
    require(work_gap < AGREEMENT, f"baseline and rbtutor work differ by {work_gap:.3g}")

    t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
    ratio = t_theirs / t_ours
    verdict = "PASS" if ratio >= SPEEDUP_TARGET else "FAIL"
    setup = ", ".join(f"{k}={v}" for k, v in defaults.items())
    return f"(a) Problem 10 over 90 s, solve_ivp({setup}), median of {REPEATS}", [
        ("rbtutor.simulate", f"{1e3 * t_ours:9.1f} ms", "", ""),
        ("textbook baseline", f"{1e3 * t_theirs:9.1f} ms", "", ""),
        ("ratio baseline / rbtutor", f"{ratio:9.2f} x", f">= {SPEEDUP_TARGET:g}", verdict),
        ("energy |dT - W| / W", f"{energy:12.1e}", f"< {ENERGY_RTOL:g}", "ok"),
        ("baseline vs rbtutor, state", f"{gap:12.1e}", f"< {AGREEMENT:g}", "ok"),
    ]


# --- (b) import time -----------------------------------------------------------------

IMPORTS = {
    "numpy, scipy.integrate": "import numpy, scipy.integrate",
    "rbtutor": "import rbtutor",
}
HEAVY = ("sympy", "matplotlib")


def run_python(code: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return time.perf_counter() - start, proc.stdout


def bench_import() -> tuple[str, list[tuple[str, str, str, str]]]:
    for code in IMPORTS.values():  # warm the file-system cache
        run_python(code)
    samples = {name: [] for name in IMPORTS}
    for _ in range(IMPORT_REPEATS):
        for name, code in IMPORTS.items():
            samples[name].append(run_python(code)[0])
    medians = {name: 1e3 * statistics.median(values) for name, values in samples.items()}
    difference = medians["rbtutor"] - medians["numpy, scipy.integrate"]

    increments = []
    for _ in range(IMPORT_REPEATS):  # the same difference measured inside one interpreter
        _, out = run_python("import time, numpy, scipy.integrate\n"
                            "start = time.perf_counter()\nimport rbtutor\n"
                            "print(time.perf_counter() - start)")
        increments.append(1e3 * float(out))

    _, out = run_python("import sys, rbtutor\n"
                        f"print(' '.join(str(m in sys.modules) for m in {HEAVY!r}))")
    loaded = dict(zip(HEAVY, (flag == "True" for flag in out.split()), strict=True))
    require(not any(loaded.values()),
            f"import rbtutor loads {[m for m, v in loaded.items() if v]}")

    # Judged on the paired measurement: both medians of fresh interpreters swing by tens of
    # milliseconds on a loaded machine, while the increment inside one interpreter is steady.
    added = statistics.median(increments)
    verdict = "PASS" if added < IMPORT_TARGET_MS else "FAIL"
    rows = [(f"python -c 'import {name}'", f"{ms:9.1f} ms", "", "") for name, ms in medians.items()]
    rows += [
        ("difference of the two (noisy)", f"{difference:9.1f} ms", "", ""),
        ("import rbtutor after numpy+scipy.integrate", f"{added:9.1f} ms", f"< {IMPORT_TARGET_MS:g} ms", verdict),
    ]
    rows += [(f"{m} in sys.modules", f"{v!s:>9s}", "False", "ok") for m, v in loaded.items()]
    return f"(b) import time, fresh interpreters, median of {IMPORT_REPEATS}", rows


def print_table(sections) -> None:
    """One table, a title line per section: quantity, value, target, PASS/FAIL."""
    header = ("quantity", "value", "target", "")
    rows = [header] + [row for _, section in sections for row in section]
    widths = [max(len(row[k]) for row in rows) for k in range(4)]

    def show(row):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())

    show(header)
    for title, section in sections:
        print("-" * (sum(widths) + 6))
        print(title)
        for row in section:
            show(row)


def main() -> None:
    started = time.perf_counter()
    sections = [bench_simulate(), bench_import()]
    print(f"Python {sys.version.split()[0]}, numpy {np.__version__}")
    print_table(sections)
    print(f"(benchmark took {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
