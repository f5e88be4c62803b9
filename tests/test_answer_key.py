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
        assert len(erratum["why"]) > 40 and isinstance(erratum["accept_printed"], bool)


def test_errata_are_marked():
    errata = {k for k, e in PUBLISHED.items() if "erratum" in e}
    plain = {k for k in errata if not PUBLISHED[k]["erratum"]["accept_printed"]}
    assert len(plain) >= 2 and len(errata) >= 4


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
