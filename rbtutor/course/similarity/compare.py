"""Step: beside grading, the similarity report. Fingerprints of normalised code, and what two students share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .normalise import NOISE, Normalised, hashed_pieces, read_given

#: Shared runs of normalised code at least this long always share a fingerprint.
GUARANTEE = 16


@dataclass
class Fingerprints:
    """The winnowed fingerprints of one student's normalised code."""

    norm: Normalised
    hashes: set
    where: dict
    coverage: float


def fingerprint(norm: Normalised, given: np.ndarray) -> Fingerprints:
    """Winnowed fingerprints of ``norm`` (copydetect's winnowing), leaving out those in ``given``."""
    # deferred: copydetect.utils takes 914 ms to import (-X importtime, 2026-12-06); only the report needs it
    from copydetect.utils import get_token_coverage, winnow

    if len(norm.text) < NOISE:
        return Fingerprints(norm, set(), {}, 0.0)
    hashes, at = winnow(hashed_pieces(norm.text), GUARANTEE - NOISE + 1, remove_duplicates=False)
    kept = ~np.isin(hashes, given)
    where: dict = {}
    for value, index in zip(hashes[kept], at[kept], strict=True):
        where.setdefault(value, []).append(index)
    return Fingerprints(norm, set(where), where, float(get_token_coverage(where, NOISE, len(norm.text))))


def given_hashes(given_code: str) -> np.ndarray:
    """Every piece's hash of the code all students were given (not winnowed: none may slip through)."""
    return read_given(given_code).hashes


@dataclass
class Match:
    """How much of two students' code is shared, and where."""

    share_a: float
    share_b: float
    regions_a: list[tuple[int, int]]
    regions_b: list[tuple[int, int]]

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


def compare(a: Fingerprints, b: Fingerprints) -> Match:
    """The shares of ``a`` and ``b`` found in the other, and the shared regions of the original code."""
    # deferred: copydetect.utils takes 914 ms to import (-X importtime, 2026-12-06); only the report needs it
    from copydetect.utils import find_fingerprint_overlap, get_copied_slices

    at_a, at_b = find_fingerprint_overlap(a.hashes, b.hashes, a.where, b.where)
    if len(at_a) == 0:
        return Match(0.0, 0.0, [], [])
    slices_a, slices_b = get_copied_slices(at_a, NOISE), get_copied_slices(at_b, NOISE)
    share_a = float(np.sum(slices_a[1] - slices_a[0])) / a.coverage
    share_b = float(np.sum(slices_b[1] - slices_b[0])) / b.coverage
    return Match(min(share_a, 1.0), min(share_b, 1.0), _regions(slices_a, a.norm), _regions(slices_b, b.norm))


def _regions(slices: np.ndarray, norm: Normalised) -> list[tuple[int, int]]:
    """Slices of normalised text as merged, sorted slices of the original code.

    The normalised text is in canonical statement order, so one slice may stand for
    statements far apart in the original: each character's own slice is taken.
    """
    covered = np.zeros(len(norm.text), dtype=bool)
    for start, end in zip(slices[0], slices[1], strict=True):
        covered[start:end] = True
    spans = sorted(set(zip(norm.starts[covered].tolist(), norm.ends[covered].tolist(), strict=True)))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
