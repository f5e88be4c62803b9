"""The problems' data: the reference data and a variant merged over it, and the vessel, its loaded
state and the quantities several problems derive from them (steady heel, metacentric height)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from .._checks import as_scalar
from ..inertia import inertia_from_gyration
from ..rigid_body import RigidBody

REFERENCE_DATA = Path(__file__).with_name("reference_data.yaml")
#: the printed answer key of the reference chapter, as published (with errata notes); package data
PUBLISHED_KEY = Path(__file__).with_name("answer_key.yaml")


def merge_data(base: dict, override: dict, where: str = "") -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise ValueError(f"unknown problem data key {where}{key!r}; expected one of {sorted(base)}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"expected a mapping for {where}{key}, got {value!r}")
            merged[key] = merge_data(base[key], value, f"{where}{key}.")
        else:
            merged[key] = value
    return merged


def read_yaml(text: str):
    """Parse YAML, reading ``6.0e6`` and ``1e-3`` as floats (PyYAML alone keeps them as strings)."""


    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
        list("-+0123456789."),
    )
    return yaml.load(text, Loader=Loader)


def load_data(path=None) -> dict:
    """The problem data: the reference data, with a variant YAML file merged over it."""
    data = read_yaml(REFERENCE_DATA.read_text())
    if path is not None:
        variant = read_yaml(Path(path).read_text()) or {}
        if not isinstance(variant, dict):
            raise ValueError(f"expected a mapping at the top of {path}, got {type(variant).__name__}")
        data = merge_data(data, variant)
    return data


def vessel(data: dict) -> RigidBody:
    """The supply vessel of Problem 1 about O."""
    v = data["vessel"]
    p = v["products_of_inertia_g"]
    inertia_g = inertia_from_gyration(v["mass"], v["radii_of_gyration"], p["xy"], p["xz"], p["yz"])
    return RigidBody(v["mass"], v["r_g"], inertia_g)


def loaded_vessel(data: dict) -> RigidBody:
    """The vessel with the module of Problem 9 held as a point mass."""
    return vessel(data).with_point_masses([data["load"]["mass"]], [data["load"]["position"]])


def steady_heel(body: RigidBody, nu, gm: float, g: float) -> tuple[float, float]:
    """Roll moment needed for the steady motion ``nu`` and the heel that supplies it (Problem 3).

    The moment comes from the roll row of ``C_RB(nu) nu`` (nothing accelerates), and
    the heel from ``-m g GM phi = K``. Returns ``(K, phi)`` in N m and rad.

    ``gm`` is used as given: when G has been moved, pass the metacentric height of
    the new loading condition (:func:`metacentric_height`). Problem 3(d) keeps GM
    fixed while G rises, because its statement says so.

    Raises
    ------
    ValueError
        If ``gm`` is not positive: without a positive GM the upright hull is not
        stable and the small-angle balance describes no steady heel.
    """
    gm = as_scalar("gm", gm)
    if gm <= 0.0:
        raise ValueError(f"expected a positive metacentric height gm, got {gm} m: with GM <= 0 the "
                         "upright hull is unstable and has no steady small heel")
    roll_moment = float(body.coriolis_forces(nu)[3])
    return roll_moment, -roll_moment / (body.mass * g * gm)


def metacentric_height(gm_0: float, z_g_0: float, z_g: float) -> float:
    """GM after G moves vertically with the displacement unchanged (eq-gm-shift, heel page).

    The metacentre M depends on the underwater hull only, so with the same
    displacement KM stays put and ``GM = KM - KG`` falls by exactly the rise of G:
    ``GM(z_G) = GM_0 - (z_G - z_G0)``.

    Parameters
    ----------
    gm_0 : float, m
        Metacentric height when G is at ``z_g_0``.
    z_g_0, z_g : float, m
        Heights of G above the waterline (BCS z, up) before and after.

    Returns
    -------
    float, m
        May be zero or negative: the hull is then unstable upright.

    Examples
    --------
    >>> round(metacentric_height(1.8, -1.2, 0.0), 6)
    0.6
    >>> round(metacentric_height(1.8, -1.2, 0.8), 6)  # Problem 3(d) with GM made consistent
    -0.2
    """
    gm_0, z_g_0, z_g = as_scalar("gm_0", gm_0), as_scalar("z_g_0", z_g_0), as_scalar("z_g", z_g)
    return gm_0 - (z_g - z_g_0)
