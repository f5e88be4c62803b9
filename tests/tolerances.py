"""Tolerances of the library tests, in one place.

Reference values from the printed answer key are judged by the printed precision
itself (rbtutor.grading); these are for the identities and two-way computations.
"""

#: identities of exact algebra in floating point, relative to the size of the terms
IDENTITY_RTOL = 1e-10
#: energy identity of Problem 10: |T(90) - T(0) - work| / work
ENERGY_RTOL = 1e-10
#: Euler-angle and Euler-parameter simulations of Problem 10, absolute, SI units
ATTITUDE_AGREEMENT = 1e-8
