"""Writes and queries against a real node (TRIBUTARY_TEST_ADDR)."""

import datetime as dt
import math
import struct
import unittest

from fixture import ADDR, minute_aligned, needs_node, now_ms, unique
from tributary import Client, InvalidArgument, Point, RejectedPoints, SeriesBatch, from_ms


def bits(v: float) -> bytes:
    return struct.pack("<d", v)


@needs_node
class NodeTest(unittest.TestCase):
    client: Client

    @classmethod
    def setUpClass(cls):
        cls.client = Client(ADDR, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_write_and_query_back_exact_values(self):
        m = unique("exact")
        base = minute_aligned(30)
        vals = [0.1 + 0.2, -0.0, 1e-300, 1.7976931348623157e308, -123456.789, 5e-324,
                math.inf, -math.inf, math.nan, 42, 2 ** 53 + 1]
        pts = [Point(m, {"host": "a"}, base + i * 1000, v) for i, v in enumerate(vals)]
        res = self.client.write(pts)
        self.assertEqual((res.accepted, res.rejected, res.requests), (len(vals), 0, 1), res)
        self.assertTrue(res.ok)

        stream = self.client.query(m, start=base, end=base + 60_000)
        self.assertEqual(stream.source, "raw")
        (s,) = list(stream)
        self.assertEqual(s.labels, {"__name__": m, "host": "a"})
        self.assertEqual(s.metric, m)
        self.assertEqual(s.timestamps, [base + i * 1000 for i in range(len(vals))])
        for i, (want, got) in enumerate(zip(vals, s.values)):
            if math.isnan(want):
                self.assertTrue(math.isnan(got), "value %d" % i)
            else:
                self.assertEqual(bits(float(want)), bits(got), "value %d: want %r got %r" % (i, want, got))

        # The same answer with datetimes and a relative start.
        (s2,) = self.client.query('%s{host="a"}' % m, start=from_ms(base), end=from_ms(base + 60_000))
        self.assertEqual(s2.timestamps, s.timestamps)
        self.assertEqual(s2.datetimes()[0], from_ms(base))
        (s3,) = self.client.query({"__name__": m}, start=dt.timedelta(hours=1))
        self.assertEqual(s3.timestamps, s.timestamps)

    def test_columnar_forms(self):
        m = unique("columnar")
        base = minute_aligned(20)
        data = {
            '%s{host="a"}' % m: ([base, base + 1000, base + 2000], [1.0, 2.0, 3.0]),
            '%s{host="b"}' % m: ((base + 5,), (7,)),
        }
        res = self.client.write(data)
        self.assertEqual((res.accepted, res.rejected), (4, 0))
        res = self.client.write([SeriesBatch(m, {"host": "c"}, [base, base + 1], [8.5, 9.5])])
        self.assertEqual(res.accepted, 2)
        got = {s.labels["host"]: (s.timestamps, s.values) for s in self.client.query('%s{host=~"a|b|c"}' % m, start=base, end=base + 10_000)}
        self.assertEqual(got, {
            "a": ([base, base + 1000, base + 2000], [1.0, 2.0, 3.0]),
            "b": ([base + 5], [7.0]),
            "c": ([base, base + 1], [8.5, 9.5]),
        })

    def test_large_write_is_split_and_streamed_back(self):
        m = unique("large")
        base = minute_aligned(40)
        n = 20_000  # more than one request, and more than one response message
        with Client(ADDR, max_points_per_request=5000) as c:
            res = c.write(Point(m, {}, base + i * 10, float(i)) for i in range(n))
        self.assertEqual((res.accepted, res.requests), (n, 4))
        (s,) = self.client.query(m, start=base, end=base + n * 10)
        self.assertEqual(len(s), n)
        self.assertEqual(s.values, [float(i) for i in range(n)])
        self.assertEqual(s.timestamps[-1], base + (n - 1) * 10)

    def test_rejected_points_are_reported(self):
        m = unique("rejects")
        now = now_ms()
        pts = [
            Point(m, {}, now - 1000, 1.0),
            Point(m, {}, now + 24 * 3600 * 1000, 2.0),  # a day ahead
            Point(m, {}, now - 500, 3.0),
            Point(m, {"1bad": "x"}, now, 4.0),  # invalid label name
            Point(m, {}, now - 30 * 24 * 3600 * 1000, 5.0),  # older than retention
        ]
        res = self.client.write(pts)
        self.assertEqual((res.accepted, res.rejected), (2, 3), res)
        by_reason = {r.reason: r for r in res.rejections}
        self.assertEqual(set(by_reason), {"TOO_FAR_IN_FUTURE", "INVALID_SERIES", "TOO_OLD"})
        fut = by_reason["TOO_FAR_IN_FUTURE"]
        self.assertEqual((fut.index, fut.timestamp_ms, fut.value, fut.labels), (1, pts[1].timestamp, 2.0, {"__name__": m}))
        self.assertRegex(fut.message, r"^timestamp \S+ is more than \S+ ahead")
        bad = by_reason["INVALID_SERIES"]
        self.assertEqual((bad.index, bad.points, bad.labels), (None, 1, {"__name__": m, "1bad": "x"}))
        self.assertIn("1bad", bad.message)
        self.assertEqual(by_reason["TOO_OLD"].index, 4)
        with self.assertRaises(RejectedPoints) as cm:
            res.check()
        self.assertIn("3 of 5 points rejected", str(cm.exception))

    def write_ramp(self, m, base, labels=None, count=60):
        """Points every 10 s with values 0..count-1."""
        res = self.client.write(Point(m, labels or {}, base + i * 10_000, float(i)) for i in range(count))
        self.assertEqual(res.accepted, count)

    def test_downsample(self):
        m = unique("down")
        base = minute_aligned(30)
        self.write_ramp(m, base)
        end = base + 10 * 60_000 - 1
        # Buckets of one minute hold values 6k .. 6k+5.
        cases = {
            "avg": [6 * k + 2.5 for k in range(10)],
            "max": [6 * k + 5.0 for k in range(10)],
            "min": [6 * k + 0.0 for k in range(10)],
            "count": [6.0] * 10,
            "sum": [36 * k + 15.0 for k in range(10)],
            "first": [6 * k + 0.0 for k in range(10)],
            "last": [6 * k + 5.0 for k in range(10)],
        }
        for fn, want in cases.items():
            with self.subTest(fn=fn):
                (s,) = self.client.query(m, start=base, end=end, step=60_000, fn=fn)
                self.assertEqual(s.timestamps, [base + k * 60_000 for k in range(10)])
                self.assertEqual(s.values, want)
        # Five-minute buckets are aligned to the epoch, not to base: check
        # against a naive oracle.
        step = 300_000
        buckets = {}
        for i in range(60):
            t = base + i * 10_000
            buckets.setdefault(t - t % step, []).append(float(i))
        (s,) = self.client.query(m, start=base, end=end, step=dt.timedelta(minutes=5))
        self.assertEqual(s.timestamps, sorted(buckets))
        self.assertEqual(s.values, [sum(buckets[t]) / len(buckets[t]) for t in sorted(buckets)])

    def test_last(self):
        m = unique("last")
        base = minute_aligned(30)
        self.write_ramp(m, base, {"host": "a"})
        self.write_ramp(m, base, {"host": "b"}, count=30)
        got = {s.labels["host"]: list(s) for s in self.client.query(m, last=True)}
        self.assertEqual(got, {"a": [(base + 590_000, 59.0)], "b": [(base + 290_000, 29.0)]})
        got = {s.labels["host"]: list(s) for s in self.client.query(m, last=True, end=base + 100_000)}
        self.assertEqual(got, {"a": [(base + 100_000, 10.0)], "b": [(base + 100_000, 10.0)]})

    def test_group_by_and_aggregate(self):
        m = unique("group")
        base = minute_aligned(30)
        for host, region, v in (("a", "eu", 1.0), ("b", "eu", 2.0), ("c", "us", 10.0)):
            self.client.write(Point(m, {"host": host, "region": region}, base + i * 60_000, v * (i + 1)) for i in range(5))
        end = base + 5 * 60_000
        got = {s.labels.get("region"): (s.timestamps, s.values) for s in self.client.query(m, start=base, end=end, agg="sum", group_by="region")}
        ts = [base + i * 60_000 for i in range(5)]
        self.assertEqual(got, {"eu": (ts, [3.0 * (i + 1) for i in range(5)]), "us": (ts, [10.0 * (i + 1) for i in range(5)])})
        groups = list(self.client.query(m, start=base, end=end, step=120_000, fn="max", agg="max"))
        self.assertEqual(len(groups), 1)
        self.assertEqual(groups[0].labels, {})
        self.assertEqual(groups[0].metric, "")
        self.assertEqual(max(groups[0].values), 50.0)
        got = {tuple(sorted(s.labels.items())): s.values for s in self.client.query(m, start=base, end=end, agg="count", group_by=["region", "host"])}
        self.assertEqual(len(got), 3)

    def test_series_labels_and_status(self):
        m = unique("meta")
        base = minute_aligned(10)
        self.client.write([Point(m, {"host": "b", "rack": "r1"}, base, 1), Point(m, {"host": "a"}, base, 2)])
        self.assertEqual(
            sorted(self.client.series(m), key=lambda d: d["host"]),
            [{"__name__": m, "host": "a"}, {"__name__": m, "host": "b", "rack": "r1"}],
        )
        self.assertEqual(len(self.client.series(m, limit=1)), 1)
        self.assertEqual(self.client.series('%s{host="zzz"}' % m), [])
        self.assertEqual(self.client.label_names(m), ["__name__", "host", "rack"])
        self.assertEqual(self.client.label_values("host", m), ["a", "b"])
        self.assertEqual(self.client.label_values("rack", [("__name__", "=", m)]), ["r1"])
        self.assertIn(m, self.client.label_values("__name__"))
        self.assertIn("host", self.client.label_names())

        st = self.client.status()
        self.assertEqual((st.version, st.role), ("test", "edge"))
        self.assertGreaterEqual(st.series, 2)
        self.assertGreaterEqual(st.points_accepted_total, 2)
        self.assertGreaterEqual(st.uptime_ms, 0)
        self.assertTrue(st.node_id)

    def test_empty_answer(self):
        base = minute_aligned(10)
        stream = self.client.query(unique("absent"), start=base, end=base + 1000)
        self.assertEqual(list(stream), [])
        self.assertEqual(stream.source, "raw")
        self.assertEqual(list(self.client.query(unique("absent"), last=True)), [])

    def test_max_staleness_is_sent_and_a_node_ignores_it(self):
        m = unique("stale")
        base = minute_aligned(10)
        self.client.write([Point(m, {}, base, 1.5)])
        for ms in (0, 30_000, dt.timedelta(seconds=30), dt.timedelta(microseconds=1500)):
            with self.subTest(ms=ms):
                stream = self.client.query(m, start=base, end=base, max_staleness=ms)
                got = list(stream)
                self.assertEqual([s.values for s in got], [[1.5]])
                self.assertEqual(stream.fresh_through_ms, 0)

    def test_query_stream_can_be_closed_early(self):
        m = unique("close")
        base = minute_aligned(10)
        self.client.write([Point(m, {"h": str(i)}, base, i) for i in range(5)])
        with self.client.query(m, start=base, end=base) as stream:
            first = next(stream)
            self.assertEqual(first.labels["h"], "0")
        self.assertEqual(list(stream), [])

    def test_server_side_errors_are_clear(self):
        base = minute_aligned(10)
        cases = {
            "bad regex": (dict(selector='{a=~"("}', start=base, end=base), "matcher 0"),
            "only empty matchers": (dict(selector='{a=""}', start=base, end=base), "at least one matcher must not match the empty string"),
            "end before start": (dict(selector="cpu", start=base, end=base - 1), "before start"),
        }
        for name, (kw, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    self.client.query(**kw)
                e = cm.exception
                self.assertEqual(e.code.name, "INVALID_ARGUMENT")
                self.assertEqual(e.method, "QueryService/Query")
                self.assertIn(msg, str(e))
                self.assertIn(ADDR, str(e))
        with self.assertRaises(InvalidArgument) as cm:
            self.client.series('{a=~"["}')
        self.assertEqual(cm.exception.method, "QueryService/Series")

    def test_client_side_errors_send_nothing(self):
        base = minute_aligned(10)
        cases = {
            "no start": (dict(selector="cpu"), "start is required"),
            "fn without step": (dict(selector="cpu", start=base, fn="max"), "needs a step"),
            "group_by without agg": (dict(selector="cpu", start=base, group_by="host"), "group_by needs agg"),
            "last with step": (dict(selector="cpu", last=True, step=1000), "last=True takes no step"),
            "bad fn": (dict(selector="cpu", start=base, step=1000, fn="median"), "fn: want one of avg"),
            "bad step": (dict(selector="cpu", start=base, step=0), "step: must be positive"),
            "float start": (dict(selector="cpu", start=1.7e9), "start: 1700000000.0 is a float"),
            "bad selector": (dict(selector="cpu{", start=base), "bad selector"),
            "negative max_staleness": (dict(selector="cpu", start=base, max_staleness=-1), "max_staleness must not be negative"),
            "float max_staleness": (dict(selector="cpu", start=base, max_staleness=1.5), "max_staleness: want int milliseconds"),
        }
        for name, (kw, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    self.client.query(**kw)
                self.assertIsNone(cm.exception.code)
                self.assertIn(msg, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
