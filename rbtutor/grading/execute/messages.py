"""Step: execute, its kernel messages. Each message a kernel sends is checked where it arrives,
before nbclient reads it: its depth, its size and the types of its fields."""

from __future__ import annotations

import re

import numpy as np
from jupyter_client.channels import AsyncZMQSocketChannel

from ..config import GRADING
from ..outputs import cut

#: What jupyter_client's decoding of one kernel message raises for bytes the kernel made up (bad
#: signature, bad JSON, nesting deeper than the parser's recursion, missing frames, bad UTF-8). Caught
#: around that decoding only: anywhere else such an exception is a bug of the grader's.
DECODING_ERRORS = (ValueError, TypeError, KeyError, IndexError, UnicodeError, RecursionError)


#: Deepest nesting of a message's content and metadata the grader takes.
MAX_MESSAGE_DEPTH = GRADING.execute_max_message_depth


class MalformedMessage(Exception):
    """The kernel sent a message the grader cannot decode, or whose fields have the wrong types.

    The kernel's fault (``message_malformed``): the notebook ends there, as with a dead kernel, and
    the parts judged before it keep their points. Any other exception while grading is the grader's
    own and leaves the submission NOT GRADED.
    """


def _depth(value, limit: int) -> int:
    """Nesting depth of ``value`` (lists and dicts), counted without recursion up to ``limit`` + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def _nested_deeper(frame: bytes, limit: int) -> bool:
    """Whether the JSON text ``frame`` nests lists and objects deeper than ``limit``, found without parsing
    it (the parser's own recursion error is not relied on): strings are blanked out, then the running
    count of opening minus closing brackets is taken, a few MiB at a time."""
    if frame.count(b"[") + frame.count(b"{") <= limit:
        return False

    steps = _BRACKET_STEP[np.frombuffer(_JSON_STRING.sub(b"", frame), np.uint8)]
    depth = 0
    for start in range(0, len(steps), 1 << 22):
        running = np.cumsum(steps[start:start + (1 << 22)], dtype=np.int64) + depth
        if running.max() > limit:
            return True
        depth = int(running[-1])
    return False


def _bracket_steps():
    steps = np.zeros(256, np.int8)
    steps[list(b"[{")] = 1
    steps[list(b"]}")] = -1
    return steps


_BRACKET_STEP = _bracket_steps()


def _text(value) -> bool:
    return isinstance(value, str)


def _texts(value) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _bundle(value) -> bool:
    """A MIME bundle: text (or lines of text) per type; JSON types may hold any JSON."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and (_texts(v) or k.endswith("json")) for k, v in value.items())


def _mapping(value) -> bool:
    return isinstance(value, dict)


def _count(value) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


#: The content fields nbclient and nbformat read, per message type: (field, check, required).
CONTENT_FIELDS = {
    "stream": [("name", _text, True), ("text", _text, True)],
    "error": [("ename", _text, True), ("evalue", _text, True), ("traceback", _texts, True)],
    "display_data": [("data", _bundle, True), ("metadata", _mapping, False)],
    "update_display_data": [("data", _bundle, True), ("metadata", _mapping, False)],
    "execute_result": [("data", _bundle, True), ("metadata", _mapping, False)],
    "status": [("execution_state", _text, True)],
    "clear_output": [("wait", lambda v: isinstance(v, bool), False)],
    "execute_reply": [("status", _text, True), ("ename", _text, False), ("evalue", _text, False),
                      ("traceback", _texts, False)],
    "kernel_info_reply": [("language_info", _mapping, False)],
    "comm_open": [("comm_id", _text, True), ("data", _mapping, False)],
    "comm_msg": [("comm_id", _text, True), ("data", _mapping, False)],
    "comm_close": [("comm_id", _text, True)],
}


def check_message(msg) -> dict:
    """``msg`` if its frame and the fields the grader reads have the expected types; else
    :class:`MalformedMessage` saying which field is wrong."""
    def wrong(what: str, value) -> MalformedMessage:
        shown = cut(repr(value), 80)
        return MalformedMessage(f"expected {what}, got {shown}")

    if not isinstance(msg, dict):
        raise wrong("a message (a mapping)", msg)
    for part in ("header", "parent_header", "metadata", "content"):
        if not isinstance(msg.get(part), dict):
            raise wrong(f"a mapping as the message's {part}", msg.get(part))
    kind = msg["header"].get("msg_type")
    if not isinstance(kind, str) or not isinstance(msg["header"].get("msg_id"), str) or msg.get("msg_type") != kind:
        raise wrong("a header with a msg_type and a msg_id (text)", msg["header"])
    if not isinstance(msg["parent_header"].get("msg_id", ""), str):
        raise wrong("a text msg_id in the parent header", msg["parent_header"].get("msg_id"))
    for part in ("content", "metadata"):
        if _depth(msg[part], MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
            raise MalformedMessage(f"expected a {part} nested at most {MAX_MESSAGE_DEPTH} deep, got deeper")
    content = msg["content"]
    for field, valid, required in CONTENT_FIELDS.get(kind, []):
        if (field in content and not valid(content[field])) or (required and field not in content):
            raise wrong(f"a valid {field!r} in a {kind} message", content.get(field, "(missing)"))
    transient = content.get("transient")
    if transient is not None and not (isinstance(transient, dict) and _text(transient.get("display_id", ""))):
        raise wrong("a transient mapping with a text display_id", transient)
    if "execution_count" in content and not _count(content["execution_count"]):
        raise wrong("an integer execution_count", content["execution_count"])
    return msg


class CheckedChannel(AsyncZMQSocketChannel):
    """jupyter_client's asynchronous channel, whose messages are decoded and checked at the boundary:
    anything the kernel made up that does not decode, or decodes into the wrong types, is
    :class:`MalformedMessage`, before nbclient or the grader reads a field of it."""

    async def _recv(self, **kwargs) -> dict:
        frames = await self.socket.recv_multipart(**kwargs)
        try:
            _, message = self.session.feed_identities(frames)
            if any(_nested_deeper(frame, MAX_MESSAGE_DEPTH) for frame in message[1:5]):
                raise MalformedMessage(f"it is nested more than {MAX_MESSAGE_DEPTH} deep")
            decoded = self.session.deserialize(message)
        except DECODING_ERRORS as exc:
            raise MalformedMessage(f"it does not decode ({type(exc).__name__}: {cut(str(exc), 200)})") from None
        return check_message(decoded)
