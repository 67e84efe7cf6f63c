"""A JSON profile read as a stream: a Chrome trace (`{"traceEvents": [...], ...}`) or an event array
(`[...]`) without holding the file, or its inflated text, in memory.

The top level (an object's keys, an array's elements) is walked here; each element of an array is
decoded alone by the json module (`raw_decode`), offered to `keep` and dropped unless kept, so memory is
what the readers keep (kernels, launch calls), not the trace's many CPU-op events. Limits
(estimator/input_limits.py): kept elements count against RECORDS, one element is at most JSON_VALUE_BYTES,
a kept element's nesting at most JSON_DEPTH; the caller's `read` enforces the byte limits. NaN and
Infinity are refused (they are not JSON).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable

from estimator.input_limits import JSON_DEPTH, JSON_VALUE_BYTES, Counter, check_depth
from estimator.profile.record import ProfileError

CHUNK = 1 << 20
_WS = " \t\n\r"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


class _Stream:
    def __init__(self, read: Callable[[int], bytes], label: str) -> None:
        self.read, self.label = read, label
        self.text = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf, self.pos, self.eof, self.started = "", 0, False, False
        self.max_value = JSON_VALUE_BYTES.value()

    def fill(self, want: int = CHUNK) -> bool:
        """Appends at least one more chunk of text; False at the end of the file."""
        if self.eof:
            return False
        data = self.read(max(want, CHUNK))
        try:
            text = self.text.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise ProfileError(f"{self.label}: not UTF-8 text ({exc.reason})") from None
        if not self.started and text:
            text, self.started = text.lstrip("\ufeff"), True
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        if not data:
            self.eof = True
        return bool(data)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            buf, pos = self.buf, self.pos
            end = min(len(buf), pos + 64)
            while pos < end and buf[pos] in _WS:  # the usual case: a few characters
                pos += 1
            if pos < end:
                self.pos = pos
                return buf[pos]
            if pos < len(buf):
                # A long run of whitespace: strip the rest of the buffer at C speed. NB: lstrip() also
                # skips the few control and Unicode spaces JSON does not allow there (lstrip(_WS) is
                # 15x slower: a gzip bomb of spaces would take seconds); a lenience, not a risk.
                rest = buf[pos:].lstrip()
                if rest:
                    self.buf, self.pos = rest, 0
                    return rest[0]
            self.pos = len(buf)
            if not self.fill():
                return ""

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            got = repr(c) if c else "the end of the file"
            raise ProfileError(f"{self.label}: not valid JSON, truncated? (expected {' or '.join(chars)}, "
                               f"found {got})")
        self.pos += 1
        return c

    def value(self) -> object:
        """One JSON value, decoded alone (more text is read until it is whole)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise JSON_DEPTH.refuse(self.label) from None
            except ValueError as exc:  # JSONDecodeError, or a NaN / Infinity
                if self._more():
                    continue
                raise ProfileError(f"{self.label}: not valid JSON, truncated? ({exc})") from None
            if end == len(self.buf) and self._more():  # a number may go on in the next chunk
                continue
            self.pos = end
            return value

    def _more(self) -> bool:
        held = len(self.buf) - self.pos
        if held > self.max_value:
            raise JSON_VALUE_BYTES.refuse(self.label)
        return self.fill(held)  # doubling: a long value is re-decoded O(log n) times

    def array(self, keep: Callable[[object], bool], counter: Counter) -> list:
        self.expect("[")
        out: list = []
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            v = self.value()
            if keep(v):
                counter.add()
                check_depth(v, self.label)
                out.append(v)
            if self.expect(",]") == "]":
                return out


def _all(_value: object) -> bool:
    return True


def parse(read: Callable[[int], bytes], label: str, keep: Callable[[object], bool],
          filtered: tuple[str, ...] = ("traceEvents",)) -> object:
    """The document: a top-level array, and the arrays of a top-level object's keys in `filtered`, keep
    only the elements `keep` accepts; the arrays of its other keys are kept whole (streamed all the same),
    any other value is decoded whole."""
    s = _Stream(read, label)
    counter = Counter(label)
    first = s.peek()
    if first == "[":
        doc: object = s.array(keep, counter)
    elif first == "{":
        s.pos += 1
        obj: dict = {}
        if s.peek() == "}":
            s.pos += 1
        else:
            while True:
                key = s.value()
                if not isinstance(key, str):
                    raise ProfileError(f"{label}: not valid JSON (an object key that is not a string)")
                s.expect(":")
                if s.peek() == "[":
                    obj[key] = s.array(keep if key in filtered else _all, counter)
                else:
                    v = s.value()
                    check_depth(v, label)
                    obj[key] = v
                if s.expect(",}") == "}":
                    break
        doc = obj
    else:
        raise ProfileError(f"{label}: not valid JSON (it starts with {first!r})" if first else
                           f"{label}: empty JSON file")
    if s.peek():
        raise ProfileError(f"{label}: not valid JSON (extra data after the document)")
    return doc
