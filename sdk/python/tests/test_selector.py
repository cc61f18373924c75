"""Selector parsing: the grammar, escapes, errors with offsets, and the
round trip format_selector -> parse_selector."""

import random
import unittest

import fixture  # noqa: F401  (puts the SDK on sys.path)
from tributary import InvalidArgument, Matcher, SelectorError, format_selector, parse_selector
from tributary.selector import to_matchers

M = Matcher
N = "__name__"


class ParseSelectorTest(unittest.TestCase):
    def test_valid_selectors(self):
        cases = {
            "metric only": ("cpu", [M(N, "=", "cpu")]),
            "all operators": (
                'cpu{host="a",region=~"eu.*",rack!="r1",zone!~"z[0-9]"}',
                [M(N, "=", "cpu"), M("host", "=", "a"), M("region", "=~", "eu.*"), M("rack", "!=", "r1"), M("zone", "!~", "z[0-9]")],
            ),
            "no metric": ('{__name__="cpu"}', [M(N, "=", "cpu")]),
            "empty braces after metric": ("cpu{}", [M(N, "=", "cpu")]),
            "trailing comma": ('cpu{a="1",}', [M(N, "=", "cpu"), M("a", "=", "1")]),
            "whitespace everywhere": (' \tcpu \n{ a = "1" ,\r\n b !~ "2" } ', [M(N, "=", "cpu"), M("a", "=", "1"), M("b", "!~", "2")]),
            "dots dashes colons in names": ("sensor.temp-c:raw{a.b-c:d=\"x\"}", [M(N, "=", "sensor.temp-c:raw"), M("a.b-c:d", "=", "x")]),
            "single quotes": ("{a='it''s'}".replace("''", "\\'"), [M("a", "=", "it's")]),
            "double quote inside single": ("{a='say \"hi\"'}", [M("a", "=", 'say "hi"')]),
            "backquotes are raw": ("{a=`C:\\dir\\n`}", [M("a", "=", "C:\\dir\\n")]),
            "simple escapes": ('{a="\\a\\b\\f\\n\\r\\t\\v\\\\\\"\\\'"}', [M("a", "=", "\a\b\f\n\r\t\v\\\"'")]),
            "regex escapes need doubling": ('{a=~"\\\\d+\\\\.\\\\d+"}', [M("a", "=~", "\\d+\\.\\d+")]),
            "hex and octal bytes form UTF-8": ('{a="\\xc3\\xa9\\303\\251"}', [M("a", "=", "éé")]),
            "unicode escapes": ('{a="\\u00e9\\U0001F600"}', [M("a", "=", "é\U0001F600")]),
            "literal unicode": ('{city="Zürich",emoji="🌡"}', [M("city", "=", "Zürich"), M("emoji", "=", "🌡")]),
            "empty value": ('{a="",b="x"}', [M("a", "=", ""), M("b", "=", "x")]),
            "operators without spaces inside value": ('{a="=~!="}', [M("a", "=", "=~!=")]),
            "metric and __name__ matcher": ('cpu{__name__=~"c.*"}', [M(N, "=", "cpu"), M(N, "=~", "c.*")]),
        }
        for name, (text, want) in cases.items():
            with self.subTest(name):
                self.assertEqual(parse_selector(text), want)

    def test_bad_selectors_say_what_and_where(self):
        cases = {
            "empty": ("", 0, "empty selector"),
            "only spaces": ("   ", 3, "empty selector"),
            "empty braces": ("{}", 2, "empty selector"),
            "digit first": ("1cpu", 0, "expected a metric name or '{'"),
            "unclosed brace": ('cpu{a="1"', 9, "expected ',' or '}'"),
            "open brace only": ("cpu{", 4, "expected a label name or '}'"),
            "missing operator": ('cpu{a "1"}', 6, "expected =, !=, =~ or !~ after label 'a'"),
            "bad operator": ('cpu{a=="1"}', 6, "expected a quoted value for label 'a'"),
            "unquoted value": ("cpu{a=1}", 6, "expected a quoted value"),
            "unterminated string": ('cpu{host="a}', 9, 'unterminated "-quoted string'),
            "unterminated raw string": ("cpu{host=`a}", 9, "unterminated `-quoted string"),
            "unknown escape": ('cpu{a="\\q"}', 7, "unknown escape sequence \\q"),
            "short hex": ('{a="\\x4"}', 4, "\\x needs two hex digits"),
            "octal too big": ('{a="\\400"}', 4, "octal escape"),
            "surrogate": ('{a="\\ud800"}', 4, "not a valid Unicode code point"),
            "too big code point": ('{a="\\U00110000"}', 4, "not a valid Unicode code point"),
            "invalid UTF-8 bytes": ('{a="\\xff"}', 3, "not valid UTF-8"),
            "newline in string": ('{a="x\ny"}', 5, "newline in"),
            "trailing garbage": ('cpu{a="1"} x', 11, "unexpected 'x' after the selector"),
            "two selectors": ("cpu mem", 4, "unexpected 'm'"),
            "label name starts with digit": ('{1a="x"}', 1, "expected a label name"),
            "comma without matcher": ('{a="1",,}', 7, "expected a label name"),
            "backslash at end": ('{a="\\', 4, "unterminated escape sequence"),
            "PromQL range is not a selector": ('cpu{a="1"}[5m]', 10, "unexpected '['"),
        }
        for name, (text, offset, reason) in cases.items():
            with self.subTest(name):
                with self.assertRaises(SelectorError) as cm:
                    parse_selector(text)
                e = cm.exception
                self.assertEqual(e.offset, offset, str(e))
                self.assertIn(reason, e.reason)
                self.assertIn("offset %d" % offset, str(e))
                self.assertIsInstance(e, InvalidArgument)
                self.assertIsInstance(e, ValueError)

    def test_error_message_points_at_the_fault(self):
        with self.assertRaises(SelectorError) as cm:
            parse_selector('cpu{host="a}')
        lines = str(cm.exception).splitlines()
        self.assertEqual(lines[1].strip(), 'cpu{host="a}')
        self.assertEqual(lines[2].index("^") - lines[1].index("c"), 9)

    def test_not_a_string(self):
        with self.assertRaises(InvalidArgument):
            parse_selector(b"cpu")  # type: ignore[arg-type]

    def test_hostile_input_is_linear(self):
        # A long run of matchers and escapes parses without recursion.
        text = "{" + ",".join('l%d="\\u00e9\\n"' % i for i in range(20000)) + "}"
        self.assertEqual(len(parse_selector(text)), 20000)
        with self.assertRaises(SelectorError):
            parse_selector("{" * 100000)


class FormatSelectorTest(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_selector([M(N, "=", "cpu")]), "cpu")
        self.assertEqual(format_selector([M(N, "=", "cpu"), M("a", "!~", 'x"\n')]), 'cpu{a!~"x\\"\\n"}')
        self.assertEqual(format_selector([M(N, "=~", "c.*")]), '{__name__=~"c.*"}')
        self.assertEqual(format_selector([M(N, "=", "1bad")]), '{__name__="1bad"}')

    def test_round_trip(self):
        rng = random.Random(7)
        alphabet = ['a', 'Z', '0', '"', "'", "\\", "`", "\n", "\t", "\x00", "\x7f", "é", "🌡", " ", "{", "}", ",", "="]
        names = ["a", "host", "_x", "a.b", "c-d", "e:f", "__name__"]
        for i in range(500):
            ms = [
                M(rng.choice(names), rng.choice(["=", "!=", "=~", "!~"]), "".join(rng.choice(alphabet) for _ in range(rng.randrange(8))))
                for _ in range(rng.randrange(1, 5))
            ]
            text = format_selector(ms)
            with self.subTest(i=i, text=text):
                self.assertEqual(parse_selector(text), ms)


class ToMatchersTest(unittest.TestCase):
    def test_forms(self):
        want = [M(N, "=", "cpu"), M("host", "=", "a")]
        self.assertEqual(to_matchers('cpu{host="a"}'), want)
        self.assertEqual(to_matchers({"__name__": "cpu", "host": "a"}), want)
        self.assertEqual(to_matchers([(N, "=", "cpu"), ("host", "=", "a")]), want)
        self.assertEqual(to_matchers(want), want)

    def test_bad_forms(self):
        cases = {
            "empty list": ([], "at least one matcher"),
            "bad op": ([("a", "==", "x")], "matcher 0: matcher on 'a': operator must be"),
            "short tuple": ([("a", "=")], "matcher 0 must be a Matcher"),
            "non-str value": ({"a": 1}, "mapping entries must be str"),
            "number": (42, "must be a selector string"),
            "bytes": (b"cpu", "must be a selector string"),
        }
        for name, (spec, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    to_matchers(spec)
                self.assertIn(msg, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
