"""One place for input validation at the public boundary.

Every public function of rbtutor turns its inputs into floating-point arrays
with :func:`as_array`, which raises ``ValueError`` naming the argument, the
expected shape and what actually arrived, and refuses NaN and infinity.
"""

from __future__ import annotations

import numpy as np


def as_array(name: str, value, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Return ``value`` as a finite float array of the given shape.

    Raises
    ------
    ValueError
        ``expected r_g of shape (3,), got (4,)`` for a wrong shape, or a message
        naming the argument when it holds NaN, infinity or non-numbers.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected {name} to be numeric, got {type(value).__name__}") from exc
    if shape is not None and arr.shape != shape:
        raise ValueError(f"expected {name} of shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"expected finite values in {name}, got {arr.tolist()}")
    return arr


def as_scalar(name: str, value) -> float:
    """Return ``value`` as a finite Python float (see :func:`as_array`)."""
    return float(as_array(name, value, ()))


def as_positive(name: str, value) -> float:
    """Return ``value`` as a finite float that is strictly positive."""
    x = as_scalar(name, value)
    if x <= 0.0:
        raise ValueError(f"expected {name} > 0, got {x}")
    return x
