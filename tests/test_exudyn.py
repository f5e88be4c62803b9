"""Problem 10 and the Euler-parameter node's mini example, rebuilt in Exudyn (reference 003).

Exudyn is an independent multibody code, so agreement with it checks rbtutor's
mass matrix, Coriolis forces, body-fixed loads, kinematics and attitude in one go.
The Exudyn model uses a ``NodeRigidBodyEP`` at O (displacement of O in the GCS and
four Euler parameters) with an ``ObjectRigidBody`` whose centre of mass is at r_G
and whose inertia is given about O, loaded through a rigid marker at O by a force
and a torque with ``bodyFixed=True``; no gravity.

It is integrated two ways:

* ``GeneralizedAlpha`` (implicit, second order) with the node's own algebraic
  constraint ``theta.theta = 1``, as in the reference's mini example, and a small
  step;
* ``RK67`` (explicit, 7th order). Exudyn's explicit solvers refuse algebraic
  variables, and without its constraint the Euler-parameter node has a singular
  mass matrix (``G^T J G`` annihilates ``theta``). So the node is created with
  ``addConstraintEquation=False`` and an ``ObjectGenericODE2`` on the same node adds
  the constraint on the acceleration level, ``c theta (theta.theta_ddot +
  theta_dot.theta_dot) = 0``: it vanishes on the exact motion (the second time
  derivative of ``theta.theta = 1``) and makes the mass matrix regular, because
  ``theta`` spans the null space of ``G``. No algebraic equation remains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import exudyn as exu
import numpy as np
import pytest
from exudyn.itemInterface import (
    LoadForceVector,
    LoadTorqueVector,
    MarkerBodyRigid,
    NodeRigidBodyEP,
    ObjectGenericODE2,
    ObjectRigidBody,
)
from exudyn.rigidBodyUtilities import (
    AngularVelocity2EulerParameters_t,
    InertiaCuboid,
    eulerParameters0,
)

import rbtutor
from rbtutor import euler_parameters as ep
from rbtutor.problems.printed import agrees_with_printed

OUT = exu.OutputVariableType

# --- Problem 10 ------------------------------------------------------------------
MASS = 6.0e6  # kg
R_G = np.array([-2.5, 0.0, -1.2])  # m, G from O in the BCS
RADII_OF_GYRATION = (7.2, 21.0, 21.5)  # m, about G
I_XZ = 2.5e7  # kg m^2, product of inertia about G (enters the tensor as -I_xz)
TAU = np.array([2.0e5, 0.0, 0.0, 0.0, 0.0, 1.5e6])  # N and N m at O, body components
T_END = 90.0  # s

#: the reference result of Problem 10 with more digits than the answer key prints
PRINTED_NU = ("0.14176", "-2.21900", "0.44519", "-0.00191404", "0.00945572", "0.0484230")
PRINTED_POSITION = ("111.7657", "43.8143", "-6.92594")
PRINTED_ANGLES_DEG = ("16.693", "6.4136", "127.581")

#: Exudyn against rbtutor at t = 90 s, absolute: m, rad (and rotation-matrix
#: entries), m/s and rad/s
EXUDYN_AGREEMENT = 1e-6
#: the step sizes that reach it (measured: GA 3e-8 m, RK67 1e-9 m in position)
STEP_GENERALIZED_ALPHA = 0.002  # s, 45 000 steps, second order
STEP_RK67 = 0.05  # s, 1 800 steps
#: the same quantities derived from one Exudyn state (pure algebra)
OUTPUT_RTOL = 1e-12

# --- the reference's mini example --------------------------------------------------
CUBOID_DENSITY = 1000.0  # kg/m^3
CUBOID_SIDES = (0.4, 0.2, 0.1)  # m
MINI_REFERENCE_POSITION = (0.5, 0.2, 0.1)  # m
MINI_SPIN = 0.5 * math.pi  # rad/s about z
MINI_STEPS = 1000  # over 1 s with generalized-alpha


@pytest.fixture(autouse=True)
def quiet_exudyn():
    """Exudyn prints through its own channel; switch it off and restore it afterwards."""
    before = exu.config.printToConsole
    exu.config.printToConsole = False
    yield
    exu.config.printToConsole = before


def solver_settings(folder: Path, end_time: float, step: float) -> exu.SimulationSettings:
    """Fixed-step settings that print nothing and keep every file name inside ``folder``."""
    settings = exu.SimulationSettings()
    integration = settings.timeIntegration
    integration.endTime = end_time
    integration.numberOfSteps = round(end_time / step)
    integration.automaticStepSize = False
    integration.verboseMode = 0
    integration.verboseModeFile = 0
    settings.solution.file.write = False
    settings.solution.file.name = str(folder / "coordinatesSolution.txt")
    settings.solution.restart.name = str(folder / "restartFile.txt")
    settings.solution.solverInformationFileName = str(folder / "solverInformation.txt")
    return settings


@dataclass(frozen=True)
class NodeState:
    """What an Euler-parameter node reports at the end of a run (Exudyn's own outputs)."""

    reference_position: np.ndarray
    coordinates: np.ndarray  # 7 displacement and Euler-parameter coordinates
    coordinates_t: np.ndarray
    coordinates_tt: np.ndarray
    outputs: dict[str, np.ndarray]

    @property
    def euler_parameters(self) -> np.ndarray:
        return np.asarray(eulerParameters0) + self.coordinates[3:]

    @property
    def rotation_matrix(self) -> np.ndarray:
        return self.outputs["RotationMatrix"].reshape(3, 3)

    @property
    def nu(self) -> np.ndarray:
        """Body-frame ``[u, v, w, p, q, r]`` of the node's point."""
        return np.concatenate([self.rotation_matrix.T @ self.outputs["Velocity"],
                               self.outputs["AngularVelocityLocal"]])


NODE_OUTPUTS = ("Position", "Displacement", "Velocity", "Acceleration", "RotationMatrix",
                "Rotation", "AngularVelocity", "AngularVelocityLocal", "AngularAcceleration")


def name_to_field(name: str) -> str:
    """Exudyn output name as NodeOutputs field: ``AngularVelocity`` is ``angular_velocity``."""
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def read_node(mbs, node, reference_position) -> NodeState:
    outputs = {name: np.asarray(mbs.GetNodeOutput(node, getattr(OUT, name)), dtype=float)
               for name in NODE_OUTPUTS}
    coords = [np.asarray(mbs.GetNodeOutput(node, getattr(OUT, name)), dtype=float)
              for name in ("Coordinates", "Coordinates_t", "Coordinates_tt")]
    return NodeState(np.asarray(reference_position, dtype=float), *coords, outputs)


# --- Problem 10 in Exudyn ------------------------------------------------------------

def inertia_about_o() -> np.ndarray:
    """The tensor about O, built here by hand: I_G from the data, then Steiner."""
    moments = MASS * np.square(RADII_OF_GYRATION)
    inertia_g = np.diag(moments)
    inertia_g[0, 2] = inertia_g[2, 0] = -I_XZ
    return inertia_g + MASS * (float(R_G @ R_G) * np.eye(3) - np.outer(R_G, R_G))


def acceleration_level_constraint(node, scale: float):
    """``ObjectGenericODE2`` adding ``scale * theta (theta.theta_ddot + theta_dot.theta_dot)``."""
    reference = np.asarray(eulerParameters0)

    def mass_matrix(mbs, t, item, q, q_t):
        theta = reference + np.asarray(q)[3:]
        matrix = np.zeros((7, 7))
        matrix[3:, 3:] = scale * np.outer(theta, theta)
        return matrix

    def force(mbs, t, item, q, q_t):
        theta, theta_t = reference + np.asarray(q)[3:], np.asarray(q_t)[3:]
        return np.concatenate([np.zeros(3), -scale * float(theta_t @ theta_t) * theta])

    return ObjectGenericODE2(nodeNumbers=[node], massMatrix=np.zeros((7, 7)),
                             massMatrixUserFunction=mass_matrix, forceUserFunction=force)


def exudyn_problem10(solver: str, folder: Path) -> NodeState:
    """Problem 10 integrated by Exudyn with ``solver`` ("GeneralizedAlpha" or "RK67")."""
    explicit = solver != "GeneralizedAlpha"
    inertia_o = inertia_about_o()
    system = exu.SystemContainer()
    mbs = system.AddSystem()
    node = mbs.AddNode(NodeRigidBodyEP(referenceCoordinates=[0.0, 0.0, 0.0, *eulerParameters0],
                                       addConstraintEquation=not explicit))
    body = mbs.AddObject(ObjectRigidBody(
        nodeNumber=node, mass=MASS, centerOfMass=R_G.tolist(),
        # [Jxx, Jyy, Jzz, Jyz, Jxz, Jxy]: tensor entries about the node's point O
        inertia=[inertia_o[0, 0], inertia_o[1, 1], inertia_o[2, 2],
                 inertia_o[1, 2], inertia_o[0, 2], inertia_o[0, 1]],
    ))
    if explicit:
        # any positive scale gives the same motion; the size of 4 J keeps M well conditioned
        mbs.AddObject(acceleration_level_constraint(node, 4.0 * np.trace(inertia_o) / 3.0))
    at_o = mbs.AddMarker(MarkerBodyRigid(bodyNumber=body, localPosition=[0.0, 0.0, 0.0]))
    mbs.AddLoad(LoadForceVector(markerNumber=at_o, loadVector=TAU[:3].tolist(), bodyFixed=True))
    mbs.AddLoad(LoadTorqueVector(markerNumber=at_o, loadVector=TAU[3:].tolist(), bodyFixed=True))
    mbs.Assemble()

    step = STEP_RK67 if explicit else STEP_GENERALIZED_ALPHA
    settings = solver_settings(folder, T_END, step)
    if explicit:
        settings.timeIntegration.explicit.useLieGroupIntegration = False  # not a Lie-group node
        settings.timeIntegration.explicit.computeEndOfStepAccelerations = True
        settings.timeIntegration.reuseConstantMassMatrix = False
    assert mbs.SolveDynamic(settings, solverType=getattr(exu.DynamicSolverType, solver))
    assert mbs.systemData.GetTime() == pytest.approx(T_END, abs=1e-9)
    return read_node(mbs, node, [0.0, 0.0, 0.0])


@pytest.fixture(scope="module", params=["GeneralizedAlpha", "RK67"])
def exudyn_run(request, tmp_path_factory) -> NodeState:
    return exudyn_problem10(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def body() -> rbtutor.RigidBody:
    inertia_g = rbtutor.inertia_from_gyration(MASS, list(RADII_OF_GYRATION), i_xz=I_XZ)
    return rbtutor.RigidBody(MASS, R_G, inertia_g)


@pytest.fixture(scope="module", params=["euler_angles", "euler_parameters"])
def rbtutor_run(request, body) -> rbtutor.SimulationResult:
    return rbtutor.simulate(body, TAU, T_END, attitude=request.param)


def angle_difference(a, b) -> np.ndarray:
    """``a - b`` wrapped into [-pi, pi)."""
    return np.mod(np.asarray(a) - np.asarray(b) + math.pi, 2.0 * math.pi) - math.pi


def test_problem10_inertia_is_the_same_body(body):
    """The tensor given to Exudyn (about O, by hand) is rbtutor's inertia_o."""
    expected = np.diag(MASS * np.square(RADII_OF_GYRATION))
    expected[0, 2] = expected[2, 0] = -I_XZ
    np.testing.assert_array_equal(body.inertia_g, expected)
    np.testing.assert_allclose(inertia_about_o(), body.inertia_o, rtol=1e-14, atol=0.0)


def test_problem10_exudyn_agrees_with_rbtutor(exudyn_run, rbtutor_run):
    """Position, attitude and velocities at t = 90 s agree to 1e-6 (absolute, SI)."""
    tol = EXUDYN_AGREEMENT
    np.testing.assert_allclose(exudyn_run.outputs["Position"], rbtutor_run.position[-1],
                               rtol=0.0, atol=tol, err_msg="position of O (m)")
    rotation = rbtutor.rotation_matrix(*rbtutor_run.eta[-1, 3:])
    np.testing.assert_allclose(exudyn_run.rotation_matrix, rotation, rtol=0.0, atol=tol,
                               err_msg="rotation matrix body to GCS")
    angles = rbtutor.euler_angles_from_matrix(exudyn_run.rotation_matrix)
    np.testing.assert_allclose(angle_difference(angles, rbtutor_run.eta[-1, 3:]), 0.0,
                               rtol=0.0, atol=tol, err_msg="z-y-x Euler angles mod 2 pi (rad)")
    np.testing.assert_allclose(exudyn_run.nu, rbtutor_run.nu[-1], rtol=0.0, atol=tol,
                               err_msg="nu = [u, v, w, p, q, r]")
    velocity = rotation @ rbtutor_run.nu[-1, :3]
    np.testing.assert_allclose(exudyn_run.outputs["Velocity"], velocity, rtol=0.0, atol=tol,
                               err_msg="GCS velocity of O (m/s)")


def test_problem10_exudyn_reproduces_printed_reference(exudyn_run):
    """Exudyn alone lands on the reference result, within its printed digits."""
    angles_deg = np.degrees(rbtutor.euler_angles_from_matrix(exudyn_run.rotation_matrix))
    for name, value, printed in [("nu", exudyn_run.nu, PRINTED_NU),
                                 ("position", exudyn_run.outputs["Position"], PRINTED_POSITION),
                                 ("angles (deg)", angles_deg, PRINTED_ANGLES_DEG)]:
        assert agrees_with_printed(value, list(printed)), f"{name}: {value} against {printed}"


def test_problem10_euler_parameters_agree(exudyn_run, body):
    """rbtutor's integrated Euler parameters are Exudyn's node coordinates (up to sign)."""
    result = rbtutor.simulate(body, TAU, T_END, attitude="euler_parameters")
    theta = result.euler_parameters[-1]
    exudyn_theta = exudyn_run.euler_parameters
    sign = 1.0 if float(theta @ exudyn_theta) >= 0.0 else -1.0
    np.testing.assert_allclose(sign * exudyn_theta, theta, rtol=0.0, atol=EXUDYN_AGREEMENT)
    assert abs(float(exudyn_theta @ exudyn_theta) - 1.0) < 1e-9


def assert_node_outputs_match(state: NodeState, ours: ep.NodeOutputs) -> None:
    for name in NODE_OUTPUTS:
        expected = state.outputs[name]
        np.testing.assert_allclose(getattr(ours, name_to_field(name)), expected,
                                   rtol=OUTPUT_RTOL,
                                   atol=OUTPUT_RTOL * max(1.0, float(np.abs(expected).max())),
                                   err_msg=f"node output {name}")


def test_problem10_node_outputs_follow_exudyn(exudyn_run):
    """rbtutor.euler_parameters.node_outputs, fed Exudyn's coordinates, gives Exudyn's outputs."""
    q, q_t, q_tt = exudyn_run.coordinates, exudyn_run.coordinates_t, exudyn_run.coordinates_tt
    ours = ep.node_outputs(q[:3] + exudyn_run.reference_position, exudyn_run.euler_parameters,
                           velocity=q_t[:3], theta_dot=q_t[3:], acceleration=q_tt[:3],
                           theta_ddot=q_tt[3:], reference_position=exudyn_run.reference_position)
    assert_node_outputs_match(exudyn_run, ours)


# --- the reference's mini example ----------------------------------------------------

def exudyn_spinning_cuboid(folder: Path) -> NodeState:
    system = exu.SystemContainer()
    mbs = system.AddSystem()
    omega = [0.0, 0.0, MINI_SPIN]
    theta_t = AngularVelocity2EulerParameters_t(omega, eulerParameters0)
    node = mbs.AddNode(NodeRigidBodyEP(
        referenceCoordinates=[*MINI_REFERENCE_POSITION, *eulerParameters0],
        initialVelocities=[0.0, 0.0, 0.0, *theta_t],
    ))
    cuboid = InertiaCuboid(density=CUBOID_DENSITY, sideLengths=list(CUBOID_SIDES))
    mbs.AddObject(ObjectRigidBody(nodeNumber=node, mass=cuboid.Mass(),
                                  inertia=cuboid.GetInertia6D()))
    mbs.Assemble()
    assert mbs.SolveDynamic(solver_settings(folder, 1.0, 1.0 / MINI_STEPS))
    return read_node(mbs, node, MINI_REFERENCE_POSITION)


def rbtutor_spinning_cuboid() -> tuple[rbtutor.SimulationResult, ep.NodeOutputs]:
    mass = CUBOID_DENSITY * math.prod(CUBOID_SIDES)
    box = rbtutor.RigidBody(mass, [0.0, 0.0, 0.0], rbtutor.box_inertia(mass, CUBOID_SIDES))
    x0 = [0.0, 0.0, 0.0, 0.0, 0.0, MINI_SPIN, *MINI_REFERENCE_POSITION, 0.0, 0.0, 0.0]
    result = rbtutor.simulate(box, np.zeros(6), 1.0, x0=x0, attitude="euler_parameters")
    theta, nu = result.euler_parameters[-1], result.nu[-1]
    theta = theta / np.linalg.norm(theta)
    rotation = ep.rotation_matrix_ep(theta)
    outputs = ep.node_outputs(result.position[-1], theta, velocity=rotation @ nu[:3],
                              theta_dot=ep.rates_from_angular_velocity(theta, nu[3:]),
                              reference_position=MINI_REFERENCE_POSITION)
    return result, outputs


def test_mini_example_cuboid_is_the_same_body():
    """Exudyn's InertiaCuboid and rbtutor.box_inertia describe the same cuboid."""
    cuboid = InertiaCuboid(density=CUBOID_DENSITY, sideLengths=list(CUBOID_SIDES))
    mass = CUBOID_DENSITY * math.prod(CUBOID_SIDES)
    assert cuboid.Mass() == pytest.approx(mass, rel=1e-14)
    np.testing.assert_allclose(cuboid.Inertia(), rbtutor.box_inertia(mass, CUBOID_SIDES),
                               rtol=1e-14, atol=0.0)
    np.testing.assert_allclose(cuboid.COM(), 0.0, atol=0.0)


def test_mini_example_quarter_turn_in_exudyn_and_rbtutor(tmp_path):
    """Spun at pi/2 rad/s about z, the node's Rotation z-angle is pi/2 after 1 s in both codes."""
    exudyn_state = exudyn_spinning_cuboid(tmp_path)
    _, ours = rbtutor_spinning_cuboid()
    quarter = math.pi / 2.0
    assert ours.rotation[2] == pytest.approx(quarter, abs=1e-9)
    assert exudyn_state.outputs["Rotation"][2] == pytest.approx(quarter, abs=EXUDYN_AGREEMENT)
    assert ours.rotation[2] == pytest.approx(exudyn_state.outputs["Rotation"][2],
                                             abs=EXUDYN_AGREEMENT)
    np.testing.assert_allclose(ours.rotation[:2], 0.0, atol=1e-12)
    for name in ("Position", "Displacement", "Velocity", "RotationMatrix", "Rotation",
                 "AngularVelocity", "AngularVelocityLocal"):
        np.testing.assert_allclose(getattr(ours, name_to_field(name)),
                                   exudyn_state.outputs[name], rtol=0.0,
                                   atol=EXUDYN_AGREEMENT, err_msg=f"node output {name}")
    np.testing.assert_allclose(ours.angular_velocity, [0.0, 0.0, MINI_SPIN], atol=1e-9)
    np.testing.assert_allclose(ours.displacement, 0.0, atol=1e-12)
    assert not list(tmp_path.iterdir()), "Exudyn wrote files although writing was off"
