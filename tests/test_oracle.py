"""The checks are not an oracle: a bot that bisects with nothing but the replies does not reach the key.

Issue 22 found a value within the grading tolerance in 4-5 checks, because the replies said how far
off a value was ("about 46 % too small"). This module attacks every answer id with
:class:`Bisector`, a bot that sees only what a reply carries and uses all of it:

* through the check service (:class:`rbtutor.course.checks.CheckCore`, the core of the HTTP
  service: its dict is the JSON body of the reply, its refusals the status and ``error``), with
  the service's own limit of 10 checks an hour: the clock moves 6 minutes a try, so the 240
  tries are one day of the limit;
* through the feedback after grading: the line :class:`rbtutor.grading.judge.JudgeAnswers` writes
  into the notebook (``"<id>: <message>"``, shown as passed or not).

The bot is an adversary with a model. rbtutor is public, so it calibrates the judge on a key of
its own (its own attempt taken as the reference): which reply each ratio of value to key gets. Every
real reply then keeps only the candidate keys that would have given exactly that reply (status,
passed, diagnosis, message text: everything but the countdown of checks left, which is checked
apart). It probes the median of what is left, and after a reply naming a mistake it knows how to undo
(sign, a factor of 1000, g, 2 pi, degrees) it tries the undone value at once.

Against the judge of before issue 22 (:func:`leaky_judge`, its size messages restored) the same bot
gets inside the tolerance in a handful of tries; that is the proof that it is a real adversary.
Against today's judge every wrong value gets the same reply, so all it learns is that the windows it
probed hold no key. What such a scan can reach is plain: 240 tries cover about 240 pass windows of
0.2 % each, so a student who is within roughly 20 % of the key can find it by trying values one by
one in a day; the attacks here start 46 % too small and 60 % too large, as students in the issue did.

Answers whose key is zero (round-off answers, zero vectors) and the one text answer cannot be
protected by any check (type 0; try the 15 pairs of motions): for them the test shows that every
wrong reply is the same, so nothing in a reply points toward the key.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from rbtutor.course.checks import CheckCore, CheckRefused
from rbtutor.grading.judge import MESSAGES, Verdict, judge
from rbtutor.problems import answer_key
from rbtutor.problems.variants import load_course_data, student_key

TRIES_A_DAY = 240  # the default limit, 10 checks an hour, for 24 hours
STUDENT = "student1"
COURSE_DATA = 'variants: {per_student: true, salt: "oracle-test-course-salt"}\n'
#: where the bot starts: its attempt is the key times this (46 % too small, 60 % too large)
STARTS = (0.54, 1.6)
#: the bot's prior: the key is within this factor of its attempt
SPAN = 2.5
#: spacing of the bot's candidate keys, in log units (a pass window is about 2e-3 wide)
STEP = 5e-4
#: categorical mistakes the bot knows how to undo: diagnosis -> factors to try on the value it sent
UNDO = {"sign": (-1.0,), "factor_1000": (1e-3, 1e3), "factor_g": (1 / 9.81, 9.81),
        "factor_2pi": (1 / (2 * math.pi), 2 * math.pi), "degrees": (math.pi / 180, 180 / math.pi)}

KEY = answer_key()
TEXT = [i for i, a in KEY.items() if a.kind == "text"]
ZERO_KEY = [i for i, a in KEY.items() if a.kind == "roundoff" or (a.kind != "text" and not np.any(a.value))]
ATTACKED = [i for i in KEY if i not in TEXT and i not in ZERO_KEY]
#: answers of a fixed norm (unit quaternions, rotation matrices): a scaled one is refused by the form check,
#: in the kernel and by the service, before any judging (issue 35), so the service is attacked apart
STRUCTURED = [i for i in ATTACKED if KEY[i].quaternion or i == "p11.d.R"]


# --------------------------------------------------------------------------- channels: what a reply carries


def signature_of_verdict(channel: str, answer_id: str, verdict: Verdict) -> tuple:
    """What the student sees of a verdict through ``channel`` (the bot's model predicts these)."""
    if channel == "service":
        return (200, verdict.passed, verdict.diagnosis, verdict.message)
    return (verdict.passed, f"{answer_id}: {verdict.message}")


class ServiceChannel:
    """The check service's core for one student, with its limit of 10 an hour and a clock 6 min a try."""

    def __init__(self, course: Path):
        self.now = 1.9e9
        self.core = CheckCore(course, clock=lambda: self.now)
        self.countdown: list = []

    def ask(self, answer_id: str, value) -> tuple:
        self.now += 3600 / 10
        body = json.dumps({"id": answer_id, "value": np.asarray(value, dtype=float).tolist()}).encode()
        try:
            reply = self.core.check(STUDENT, body)
        except CheckRefused as refused:
            return (refused.status, refused.message)
        self.countdown.append(reply.pop("checks_left"))
        assert set(reply) == {"passed", "message", "diagnosis"}, reply
        return (200, reply["passed"], reply["diagnosis"], reply["message"])


class FeedbackChannel:
    """The feedback line of the graded notebook for the student's answer (same judge, same key)."""

    def __init__(self, key: dict, public_judge=judge):
        self.key, self.judge = key, public_judge

    def ask(self, answer_id: str, value) -> tuple:
        return signature_of_verdict("feedback", answer_id, self.judge(answer_id, value, key=self.key))


# --------------------------------------------------------------------------- the bot


class ReplyModel:
    """The reply to ``ratio x attempt`` when the key is ``attempt``, as a step function of log(ratio).

    Built with the public judge on the bot's own key: a coarse grid, every step between two samples
    with different replies bisected down to STEP / 2.
    """

    def __init__(self, answer_id, answer, attempt, channel: str, public_judge, reach: float):
        own = replace(answer, value=np.asarray(attempt).tolist(), mistakes=(), quaternion=False)
        key = {answer_id: own}

        def reply(log_ratio: float) -> tuple:
            verdict = public_judge(answer_id, math.exp(log_ratio) * np.asarray(attempt), key=key, published={})
            return signature_of_verdict(channel, answer_id, verdict)

        samples = {float(r): reply(float(r)) for r in np.linspace(-reach, reach, 97)}
        samples[0.0] = reply(0.0)
        points = sorted(samples)
        todo = list(itertools.pairwise(points))
        while todo:
            low, high = todo.pop()
            if samples[low] == samples[high] or high - low < STEP / 2:
                continue
            middle = (low + high) / 2
            samples[middle] = reply(middle)
            todo += [(low, middle), (middle, high)]
        self.points = np.array(sorted(samples))
        self.codes: dict[tuple, int] = {}
        self.replies = np.array([self.codes.setdefault(samples[p], len(self.codes)) for p in self.points])
        self.calls = len(samples)
        passing = self.points[[_passed(samples[p]) for p in self.points]]
        self.pass_width = float(passing.max() - passing.min()) + STEP if passing.size else STEP

    def predict(self, log_ratios: np.ndarray) -> np.ndarray:
        """The code of the reply each log-ratio gets (an index into the distinct replies seen)."""
        index = np.clip(np.searchsorted(self.points, log_ratios, side="right") - 1, 0, len(self.points) - 1)
        return self.replies[index]


def _passed(reply: tuple) -> bool:
    """Whether a reply (of either channel) says the value is accepted."""
    return reply[1] is True if reply[0] == 200 and len(reply) == 4 else reply[0] is True


def _diagnosis(reply: tuple) -> str | None:
    """The mistake a reply names: the service says its code, the feedback line says its text."""
    if len(reply) == 4:
        return reply[2]
    text = reply[-1]
    return next((code for code, words in MESSAGES.items() if words in text), None)


@dataclass
class Attack:
    """What one run of the bot achieved."""

    tries: int = 0
    passed_at: int | None = None
    replies: list = field(default_factory=list)
    ruled_out: float = 0.0  # share of the candidate keys the replies ruled out
    spread: float = 0.0  # log-width of the candidates left
    pass_width: float = 0.0  # log-width of one pass window, in the bot's model


class Bisector:
    """Candidate keys ``c x attempt`` on a log grid of c; each reply keeps those that explain it."""

    def __init__(self, answer_id, answer, attempt, channel: str, public_judge=judge):
        self.answer_id, self.attempt = answer_id, np.asarray(attempt, dtype=float)
        reach = math.log(SPAN)
        self.grid = np.arange(-reach, reach + STEP, STEP)
        self.alive = np.ones(self.grid.size, dtype=bool)
        self.model = ReplyModel(answer_id, answer, self.attempt, channel, public_judge, 2 * reach)
        self.queue: list[float] = []

    def next_scale(self) -> float:
        if self.queue:
            return self.queue.pop(0)
        return math.exp(float(np.median(self.grid[self.alive])))

    def learn(self, scale: float, reply: tuple) -> None:
        if scale <= 0:
            return  # an undone sign: off the grid of positive candidates
        log_ratios = math.log(scale) - self.grid
        code = self.model.codes.get(reply, -1)
        explains = (self.model.predict(log_ratios) == code) & self.alive
        if explains.any():
            self.alive = explains
        else:  # a reply the model does not know: a named mistake, at least this window is not the key
            self.alive &= np.abs(log_ratios) > self.model.pass_width / 2
            self.queue += [scale * f for f in UNDO.get(_diagnosis(reply), ())]

    def attack(self, ask, tries: int = TRIES_A_DAY) -> Attack:
        result = Attack(pass_width=self.model.pass_width)
        for attempt_number in range(1, tries + 1):
            scale = self.next_scale()
            reply = ask(self.answer_id, scale * self.attempt)
            result.tries, result.replies = attempt_number, [*result.replies, reply]
            if _passed(reply):
                result.passed_at = attempt_number
                break
            self.learn(scale, reply)
        result.ruled_out = 1.0 - float(self.alive.mean())
        left = self.grid[self.alive]
        result.spread = float(left.max() - left.min()) if left.size else 0.0
        return result


# --------------------------------------------------------------------------- the judge of before issue 22


def _old_size_message(ratio: float) -> str:
    """The size message of rbtutor.grading.judge before issue 22 (commit 89699f8), kept to test the bot."""
    if ratio == 0.0:
        return "The answer is zero, but the key's value is not."
    size = abs(ratio)
    how = "too large" if size > 1 else "too small"
    if 0.5 < size < 2.0:
        percent = round(abs(size - 1.0) * 100)
        amount = "less than 1 %" if percent < 1 else f"about {percent} %"
        size_text = f"{amount} {how}"
    else:
        factor = max(size, 1.0 / size)
        amount = f"about {round(factor)}" if factor < 9.5 else f"about 10^{round(math.log10(factor))}"
        size_text = f"{how} by a factor of {amount}"
    if ratio < 0:
        return f"The sign is wrong and the size is {size_text}."
    return f"The sign is right but the size is {size_text}."


def leaky_judge(answer_id, value, *, key, **kwargs) -> Verdict:
    """Today's judge with the old distance messages put back for plain wrong values."""
    verdict = judge(answer_id, value, key=key, **kwargs)
    if verdict.diagnosis != "wrong_value":
        return verdict
    x, ref = np.asarray(value, dtype=float).ravel(), np.asarray(key[answer_id].value, dtype=float).ravel()
    ratio = float(x @ ref / (ref @ ref))
    if np.linalg.norm(x - ratio * ref) > 1e-3 * np.linalg.norm(x):
        return verdict
    prefix = "" if x.size == 1 else "Every entry is off by the same factor. "
    return Verdict(False, prefix + _old_size_message(ratio), "off_by")


# --------------------------------------------------------------------------- the tests


@pytest.fixture
def course(tmp_path) -> Path:
    root = tmp_path / "course"
    (root / "exercises").mkdir(parents=True)
    (root / "exercises" / "problem_data.yaml").write_text(COURSE_DATA)
    (root / "exercises" / "checks.yaml").write_text("default: {enabled: true, per_hour: 10}\n")
    return root


def _own_key(answer_id: str) -> dict:
    """The key of STUDENT for the problem of ``answer_id``, as the service computes it."""
    import yaml

    from rbtutor.problems.variants import problem_of

    data = load_course_data(None)
    data["variants"] = yaml.safe_load(COURSE_DATA)["variants"]
    return student_key(data, STUDENT, [problem_of(answer_id)])


@pytest.mark.parametrize("answer_id", ["p3.b.K", "p1.a.I_O", "p8.d.flip_interval", "p3.c.phi_deg"])
def test_the_bot_finds_the_key_when_replies_say_how_far(answer_id):
    """Against the old size messages the bot is inside the tolerance in a few tries (the issue saw 4-5)."""
    key = _own_key(answer_id)
    truth = np.asarray(key[answer_id].value, dtype=float)
    for start in STARTS:
        bot = Bisector(answer_id, key[answer_id], start * truth, "feedback", public_judge=leaky_judge)
        result = bot.attack(FeedbackChannel(key, public_judge=leaky_judge).ask)
        assert result.passed_at is not None, (start, result.tries, result.replies[-3:])
        assert result.passed_at <= 12, (start, result.tries, result.replies[-3:])


def _assert_scan_only(answer_id: str, result: Attack) -> None:
    assert result.passed_at is None, f"{answer_id}: inside the tolerance after {result.passed_at} tries"
    plain = {r for r in result.replies if _diagnosis(r) not in MESSAGES}
    assert len(plain) == 1, f"{answer_id}: the replies differ, so they tell something: {sorted(plain)[:4]}"
    # a reply that names a mistake names only a window of the same width as the pass window (of the
    # inertia about G, say, which is in the student's data): the bot undid it and still did not pass
    total = 2 * math.log(SPAN)
    if not KEY[answer_id].periodic:
        # all the bot learned is that the windows it probed hold no key: nothing was ruled out beyond
        # them. (For an angle taken modulo a turn, the bot's model of ratios is only approximate, and
        # each probe also tests the values a whole number of turns away; the bound is left out there.)
        assert result.ruled_out * total <= result.tries * (result.pass_width + 2 * STEP), (
            answer_id, result.ruled_out, result.pass_width)
    assert result.spread > 0.9 * total, f"{answer_id}: the candidates narrowed to {result.spread:.3g}"


@pytest.mark.parametrize("answer_id", [i for i in ATTACKED if i not in STRUCTURED])
def test_a_day_of_checks_does_not_find_the_key(answer_id, course):
    """Through the check service, limit and all: 240 tries from 46 % too small and from 60 % too large."""
    key = _own_key(answer_id)
    truth = np.asarray(key[answer_id].value, dtype=float)
    service = ServiceChannel(course)  # one student, one day after the other
    for start in STARTS:
        result = Bisector(answer_id, key[answer_id], start * truth, "service").attack(service.ask)
        _assert_scan_only(answer_id, result)
        assert result.tries == TRIES_A_DAY, "a try each 6 min is allowed"
        assert all(r[0] == 200 for r in result.replies), "a try each 6 min is allowed"
    assert len(set(service.countdown[10:])) == 1, "after the first hour the countdown is the same for every value"
    assert service.core.log.records()[-1]["student"] == STUDENT


@pytest.mark.parametrize("answer_id", [i for i in ATTACKED if i.endswith((".K", ".I_O", ".M_RB", ".nu1", ".q"))])
def test_feedback_after_grading_does_not_find_the_key(answer_id):
    """The feedback line of a graded notebook, from the same judge, tells no more than a check."""
    key = _own_key(answer_id)
    truth = np.asarray(key[answer_id].value, dtype=float)
    for start in STARTS:
        result = Bisector(answer_id, key[answer_id], start * truth, "feedback").attack(FeedbackChannel(key).ask)
        _assert_scan_only(answer_id, result)


@pytest.mark.parametrize("answer_id", ZERO_KEY + TEXT)
def test_answers_no_check_can_hide_get_one_reply_for_every_wrong_value(answer_id, course):
    """A zero key is found by typing 0 and a text answer by trying the 15 pairs: no reply points there."""
    key = _own_key(answer_id)
    answer = key[answer_id]
    if answer.kind == "text":
        wrong = [t for t in ("surge-sway", "heave-pitch", "yaw-roll", "sway", "x" * 40)
                 if not judge(answer_id, t, key=key).passed]
    else:
        shape = np.shape(answer.value)
        wrong = [np.full(shape, f) for f in (10.0, -10.0, 1e3, 1e6, -3e9, 7.5)]
    service = ServiceChannel(course)
    replies = set()
    for value in wrong:
        body = json.dumps({"id": answer_id, "value": value if isinstance(value, str) else value.tolist()}).encode()
        service.now += 360
        reply = service.core.check(STUDENT, body)
        reply.pop("checks_left")
        replies.add(json.dumps(reply, sort_keys=True))
    assert len(replies) == 1, replies
    assert not json.loads(replies.pop())["passed"]


def test_the_course_ships_answer_is_named(course):
    """The book's value for a student with numbers of their own: named, within the pass window only."""
    book = float(answer_key()["p3.b.K"].value)
    assert abs(book - float(_own_key("p3.b.K")["p3.b.K"].value)) > 1e-2 * abs(book), "the variant must differ"
    service = ServiceChannel(course)
    assert service.ask("p3.b.K", book)[2] == "reference_ship"
    assert service.ask("p3.b.K", book * 1.0004)[2] == "reference_ship"
    assert service.ask("p3.b.K", book * 1.006)[2] == "wrong_value"


def test_a_named_mistake_tells_only_what_it_names(course):
    """A sign slip is named, and the bot that undoes it passes at once: it learned the sign and nothing finer.

    Moved by a little more than the pass window from minus the key, the same value is just 'not accepted'.
    """
    key = _own_key("p3.b.K")
    truth = float(key["p3.b.K"].value)
    service = ServiceChannel(course)
    reply = service.ask("p3.b.K", -truth * 1.0004)
    assert reply[2] == "sign", reply
    assert service.ask("p3.b.K", truth * 1.0004)[1] is True
    for off in (1.006, 0.994, 1.05):
        assert service.ask("p3.b.K", -truth * off)[2] == "wrong_value", off


@pytest.mark.parametrize("answer_id", STRUCTURED)
def test_a_scaled_quaternion_or_rotation_is_refused_for_its_form_alone(answer_id, course):
    """The bot's probes of a unit quaternion or a rotation (the key times a scale) are refused before judging,
    with words that come from the value sent alone (the form check never sees the key), and none is counted."""
    from rbtutor.course.render import answer_forms
    from rbtutor.grading.student import form_problem

    key = _own_key(answer_id)
    truth = np.asarray(key[answer_id].value, dtype=float)
    form = answer_forms(key)[answer_id]
    assert form in ("quaternion", "rotation")
    service = ServiceChannel(course)
    # within the slack of the form check (FORM_SLACK) a value is judged like any other and gets the same reply
    scales = [c for c in np.exp(np.linspace(math.log(0.5), math.log(1.8), 40))
              if form_problem((c * truth).tolist(), form) is not None]
    assert len(scales) >= 30
    for scale in scales:
        reply = service.ask(answer_id, scale * truth)
        assert reply == (400, form_problem((scale * truth).tolist(), form)), (scale, reply)
    assert service.countdown == [], "no probe was judged"
    assert service.core.log.records() == [], "no probe was judged"
