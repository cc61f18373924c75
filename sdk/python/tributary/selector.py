r"""Series selectors: label matchers and a parser for PromQL-style selector
strings such as ``cpu{host="pi-7",region=~"eu.*"}``.

Grammar (whitespace -- space, tab, CR, LF -- may appear between tokens)::

    selector = [ name ] [ "{" [ matcher { "," matcher } [ "," ] ] "}" ]
    matcher  = name op string
    name     = [a-zA-Z_] [a-zA-Z0-9_.:-]*
    op       = "=" | "!=" | "=~" | "!~"
    string   = '"' { char | escape } '"'
             | "'" { char | escape } "'"
             | "`" { any character but "`" } "`"

A leading ``name`` is the metric name, short for ``__name__="name"``. A
selector must hold at least one matcher. Names follow the node's rule for
label names (which, unlike Prometheus, also allows ``.``, ``-`` and ``:``
after the first character, as sensor metric names from InfluxDB and
OpenTSDB use them).

Strings in double or single quotes take the escapes of Go and PromQL::

    \a \b \f \n \r \t \v \\ \' \"   the usual control characters and quotes
    \xHH                        one byte, two hex digits
    \ooo                        one byte, three octal digits (at most \377)
    \uHHHH  \UHHHHHHHH          a Unicode code point (no surrogates)

Either quote may be escaped in either kind of string; a raw newline inside
quotes is an error (write \n). Bytes from ``\x`` and octal escapes are joined
with the text around them and the result must be valid UTF-8. Backquoted
strings are raw: no escapes, any character but a backquote.

Regular expressions (``=~``, ``!~``) are RE2, fully anchored, and checked by
the server, not here (Python's ``re`` is a different dialect).

Errors raise :class:`~tributary.SelectorError`, which gives the character
offset and what was expected there.

Everything in this module is pure and safe for concurrent use.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from typing import Iterable, List, Mapping, Sequence, Tuple, Union

from ._gen import tributary_pb2 as pb
from .errors import InvalidArgument, SelectorError, brief

__all__ = ["Matcher", "parse_selector", "format_selector", "format_series", "MatcherSpec", "to_matchers", "METRIC_NAME"]

#: The label that carries the metric name.
METRIC_NAME = "__name__"

_OPS = {"=": pb.Matcher.EQUAL, "!=": pb.Matcher.NOT_EQUAL, "=~": pb.Matcher.REGEX, "!~": pb.Matcher.NOT_REGEX}
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_REST = _NAME_START | frozenset("0123456789.:-")
_SPACE = frozenset(" \t\r\n")
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"',
}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")


def check_utf8(s: str, what: str) -> None:
    """Raise InvalidArgument if s cannot be sent (protobuf strings must be
    valid UTF-8; a Python str can hold lone surrogates, which are not)."""
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument("%s: %s is not valid UTF-8 (lone surrogate at character %d)" % (what, brief(s), e.start)) from None


def valid_name(name: str) -> bool:
    """Report whether name is a valid label (or metric) name."""
    return bool(name) and name[0] in _NAME_START and all(c in _NAME_REST for c in name)


@dataclass(frozen=True)
class Matcher:
    """Selects series by one label: ``name op value``.

    ``op`` is ``"="``, ``"!="``, ``"=~"`` or ``"!~"``; a series without the
    label matches as if its value were "". Regular expressions are RE2 and
    fully anchored.
    """

    name: str
    op: str
    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgument("matcher: label name must be a non-empty str, got %s" % brief(self.name))
        if self.op not in _OPS:
            raise InvalidArgument(
                "matcher on %s: operator must be one of =, !=, =~, !~, got %s" % (brief(self.name), brief(self.op))
            )
        if not isinstance(self.value, str):
            raise InvalidArgument("matcher on %s: value must be a str, got %s" % (brief(self.name), type(self.value).__name__))
        check_utf8(self.name, "matcher name")
        check_utf8(self.value, "matcher on %s: value" % brief(self.name))

    def __str__(self) -> str:
        return "%s%s%s" % (self.name, self.op, _quote(self.value))

    def to_proto(self) -> pb.Matcher:
        """Return the protobuf form."""
        return pb.Matcher(type=_OPS[self.op], name=self.name, value=self.value)


#: What the client accepts wherever a selection of series is expected: a
#: selector string, a mapping of label name to value (equality matchers), or
#: a sequence of :class:`Matcher` or ``(name, op, value)`` tuples.
MatcherSpec = Union[str, Mapping[str, str], Sequence[Union[Matcher, Tuple[str, str, str]]]]


def to_matchers(spec: MatcherSpec, what: str = "selector") -> List[Matcher]:
    """Convert any MatcherSpec into a non-empty list of Matchers.

    Raises InvalidArgument (SelectorError for strings) naming the element at
    fault; ``what`` names the argument in messages.
    """
    if isinstance(spec, str):
        return parse_selector(spec)
    if isinstance(spec, abc.Mapping):
        out = []
        for name, value in spec.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise InvalidArgument("%s: mapping entries must be str: str, got %s: %s" % (what, brief(name), brief(value)))
            out.append(Matcher(name, "=", value))
    elif isinstance(spec, (bytes, bytearray)) or not isinstance(spec, abc.Iterable):
        raise InvalidArgument(
            "%s must be a selector string, a dict of label values or a list of matchers, got %s"
            % (what, type(spec).__name__)
        )
    else:
        out = []
        for i, m in enumerate(spec):
            if isinstance(m, Matcher):
                out.append(m)
            elif isinstance(m, tuple) and len(m) == 3:
                try:
                    out.append(Matcher(*m))
                except InvalidArgument as e:
                    raise InvalidArgument("%s: matcher %d: %s" % (what, i, e.details)) from None
            else:
                raise InvalidArgument(
                    "%s: matcher %d must be a Matcher or a (name, op, value) tuple, got %s" % (what, i, brief(m))
                )
    if not out:
        raise InvalidArgument("%s: at least one matcher is required" % what)
    return out


def parse_selector(text: str) -> List[Matcher]:
    """Parse a selector string (see the module doc for the grammar).

    >>> for m in parse_selector('cpu{host="a",region=~"eu.*"}'):
    ...     print(repr(m))
    Matcher(name='__name__', op='=', value='cpu')
    Matcher(name='host', op='=', value='a')
    Matcher(name='region', op='=~', value='eu.*')

    Raises SelectorError with the offset of the first problem.
    """
    if not isinstance(text, str):
        raise InvalidArgument("selector must be a str, got %s" % type(text).__name__)
    return _Parser(text).parse()


def format_selector(matchers: Iterable[Matcher]) -> str:
    """Render matchers as a selector string that parse_selector reads back
    to the same matchers (in the same order)."""
    ms = list(matchers)
    head = ""
    if ms and ms[0].name == METRIC_NAME and ms[0].op == "=" and valid_name(ms[0].value):
        head, ms = ms[0].value, ms[1:]
    if head and not ms:
        return head
    return head + "{" + ",".join(str(m) for m in ms) + "}"


def format_series(labels: Mapping[str, str]) -> str:
    """Render a series' labels as ``metric{a="b",...}`` (labels sorted)."""
    metric = labels.get(METRIC_NAME, "")
    rest = ",".join("%s=%s" % (k, _quote(v)) for k, v in sorted(labels.items()) if k != METRIC_NAME)
    return "%s{%s}" % (metric, rest)


def _quote(s: str) -> str:
    out = ['"']
    for c in s:
        if c == "\\" or c == '"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("\\x%02x" % ord(c))
        elif 0xD800 <= ord(c) <= 0xDFFF:
            # Not representable in UTF-8; the parser will reject it, as the
            # server would.
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


class _Parser:
    """A single-pass parser over one selector string. Linear time, no
    recursion, so hostile input cannot blow the stack or the clock."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, reason: str, at: int = -1) -> SelectorError:
        return SelectorError(self.text, self.pos if at < 0 else at, reason)

    def found(self) -> str:
        if self.pos >= len(self.text):
            return "the end of the selector"
        return repr(self.text[self.pos])

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
            self.pos += 1

    def name(self) -> str:
        start = self.pos
        t = self.text
        if self.pos < len(t) and t[self.pos] in _NAME_START:
            self.pos += 1
            while self.pos < len(t) and t[self.pos] in _NAME_REST:
                self.pos += 1
        return t[start:self.pos]

    def parse(self) -> List[Matcher]:
        t = self.text
        ms: List[Matcher] = []
        self.skip_space()
        metric = self.name()
        if metric:
            ms.append(Matcher(METRIC_NAME, "=", metric))
        self.skip_space()
        if self.pos < len(t) and t[self.pos] == "{":
            self.pos += 1
            self.matchers(ms)
        elif not metric and self.pos < len(t):
            raise self.fail("expected a metric name or '{', found %s" % self.found())
        self.skip_space()
        if self.pos < len(t):
            raise self.fail("unexpected %s after the selector" % self.found())
        if not ms:
            raise self.fail("empty selector: give a metric name or at least one matcher")
        return ms

    def matchers(self, ms: List[Matcher]) -> None:
        t = self.text
        while True:
            self.skip_space()
            if self.pos < len(t) and t[self.pos] == "}":
                self.pos += 1
                return
            name = self.name()
            if not name:
                raise self.fail("expected a label name or '}', found %s" % self.found())
            self.skip_space()
            op = ""
            for candidate in ("=~", "!~", "!=", "="):
                if t.startswith(candidate, self.pos):
                    op = candidate
                    break
            if not op:
                raise self.fail("expected =, !=, =~ or !~ after label %s, found %s" % (brief(name), self.found()))
            self.pos += len(op)
            self.skip_space()
            value = self.string(name)
            ms.append(Matcher(name, op, value))
            self.skip_space()
            if self.pos < len(t) and t[self.pos] == ",":
                self.pos += 1
                continue
            if self.pos < len(t) and t[self.pos] == "}":
                self.pos += 1
                return
            raise self.fail("expected ',' or '}' after the matcher on %s, found %s" % (brief(name), self.found()))

    def string(self, label: str) -> str:
        t = self.text
        start = self.pos
        if start >= len(t) or t[start] not in "\"'`":
            raise self.fail("expected a quoted value for label %s, found %s" % (brief(label), self.found()))
        quote = t[start]
        if quote == "`":
            end = t.find("`", start + 1)
            if end < 0:
                raise self.fail("unterminated `-quoted string", start)
            self.pos = end + 1
            return t[start + 1:end]
        buf = bytearray()
        i = start + 1
        n = len(t)
        while True:
            if i >= n:
                raise self.fail("unterminated %s-quoted string" % quote, start)
            c = t[i]
            if c == quote:
                break
            if c == "\n":
                raise self.fail("newline in %s-quoted string (write \\n)" % quote, i)
            if c != "\\":
                # Copy the run of plain characters at once.
                j = i + 1
                while j < n and t[j] not in ("\\", quote, "\n"):
                    j += 1
                try:
                    buf += t[i:j].encode("utf-8")
                except UnicodeEncodeError as e:
                    raise self.fail("character %r cannot be encoded as UTF-8" % t[i + e.start], i + e.start) from None
                i = j
                continue
            i = self.escape(i, buf)
        self.pos = i + 1
        try:
            return buf.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("value of label %s is not valid UTF-8 after unescaping" % brief(label), start) from None

    def escape(self, i: int, buf: bytearray) -> int:
        """Decode the escape at t[i] == '\\' into buf; return the next index."""
        t = self.text
        if i + 1 >= len(t):
            raise self.fail("unterminated escape sequence", i)
        e = t[i + 1]
        if e in _SIMPLE_ESCAPES:
            buf += _SIMPLE_ESCAPES[e].encode()
            return i + 2
        if e == "x":
            digits = t[i + 2:i + 4]
            if len(digits) != 2 or not all(d in _HEX for d in digits):
                raise self.fail("\\x needs two hex digits", i)
            buf.append(int(digits, 16))
            return i + 4
        if e in _OCT:
            digits = t[i + 1:i + 4]
            if len(digits) != 3 or not all(d in _OCT for d in digits) or int(digits, 8) > 0o377:
                raise self.fail("octal escape needs three digits from \\000 to \\377", i)
            buf.append(int(digits, 8))
            return i + 4
        if e in "uU":
            width = 4 if e == "u" else 8
            digits = t[i + 2:i + 2 + width]
            if len(digits) != width or not all(d in _HEX for d in digits):
                raise self.fail("\\%s needs %d hex digits" % (e, width), i)
            cp = int(digits, 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise self.fail("\\%s%s is not a valid Unicode code point" % (e, digits), i)
            buf += chr(cp).encode("utf-8")
            return i + 2 + width
        raise self.fail("unknown escape sequence \\%s" % e, i)
