"""How a number is compared with a printed one: the precision rules of the printed key, in one place.

A printed number carries its precision in its digits: ``"3.197e8"`` means
3.197e8 +/- 0.0005e8, ``"0.0306"`` means +/- 0.00005, ``"16.4%"`` means
0.164 +/- 0.0005. An answer agrees with a printed number when it lies within
half a unit of the last printed digit (a value exactly on the rounding boundary
counts as agreeing). Strings agree when equal after trimming and lower-casing.
"""

from __future__ import annotations

import re

import numpy as np

_NUMBER = re.compile(r"^\s*([-+]?)(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?\s*(%?)\s*$")


def _parse(text: str) -> tuple[float, float]:
    match = _NUMBER.match(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise ValueError(f"expected a printed number such as '3.197e8' or '16.4%', got {text!r}")
    sign, whole, frac, exponent, percent = match.groups()
    frac = frac or ""
    exp = int(exponent or 0) - (2 if percent else 0)
    value = float(f"{sign}{whole or '0'}.{frac or '0'}e{exp}")
    return value, 0.5 * 10.0 ** (exp - len(frac))


def printed_value(text: str) -> float:
    """The number a printed string stands for (``"16.4%"`` is 0.164).

    Examples
    --------
    >>> printed_value("-2.500e7"), printed_value("16.4%")
    (-25000000.0, 0.164)
    """
    return _parse(text)[0]


def printed_half_unit(text: str) -> float:
    """Half a unit in the last printed digit of ``text``.

    Examples
    --------
    >>> printed_half_unit("3.197e8"), printed_half_unit("0.0306"), printed_half_unit("120")
    (50000.0, 5e-05, 0.5)
    """
    return _parse(text)[1]


def agrees_with_printed(value, printed) -> bool:
    """Whether ``value`` (number, string or nested sequence) agrees with ``printed`` entry by entry."""
    if isinstance(printed, str):
        if isinstance(value, str):
            return value.strip().lower() == printed.strip().lower()
        try:
            target, half = _parse(printed)
        except ValueError:
            return False
        x = float(np.asarray(value, dtype=float).reshape(()))
        return bool(np.isfinite(x)) and abs(x - target) <= half * (1.0 + 1e-9) + 1e-300
    arr = np.asarray(value, dtype=float)
    if arr.shape != np.shape(printed):
        return False
    flat_printed = np.ravel(np.array(printed, dtype=object))
    return all(agrees_with_printed(v, p) for v, p in zip(arr.reshape(-1), flat_printed, strict=True))
