"""Input conversion, request batching and rejection mapping, without a
server."""

import datetime as dt
import unittest

import fixture  # noqa: F401
from tributary import InvalidArgument, Point, RejectedPoints, RetryPolicy, SeriesBatch, WriteResult, from_ms, to_ms
from tributary._gen import tributary_pb2 as pb
from tributary.batching import requests_from, result_from

UTC = dt.timezone.utc


class TimeTest(unittest.TestCase):
    def test_to_ms(self):
        self.assertEqual(to_ms(1_700_000_000_123), 1_700_000_000_123)
        self.assertEqual(to_ms(dt.datetime(2024, 1, 2, 3, 4, 5, 678_999, tzinfo=UTC)), 1704164645678)
        cet = dt.timezone(dt.timedelta(hours=1))
        self.assertEqual(to_ms(dt.datetime(2024, 1, 2, 4, 4, 5, 678_000, tzinfo=cet)), 1704164645678)
        self.assertEqual(to_ms(dt.datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC)), -1)
        self.assertEqual(from_ms(1704164645678), dt.datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC))

    def test_to_ms_refuses_ambiguous_times(self):
        cases = {
            "float seconds": (1.7e9, "int(t * 1000)"),
            "naive datetime": (dt.datetime(2024, 1, 1), "naive datetime"),
            "bool": (True, "bool"),
            "string": ("2024-01-01", "got str"),
            "out of int64": (1 << 63, "int64"),
        }
        for name, (v, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    to_ms(v, "start")
                self.assertIn("start", str(cm.exception))
                self.assertIn(msg, str(cm.exception))


def flatten(reqs):
    """(labels, ts, vs, idx) per series per request."""
    return [[(dict(s.labels), s.ts, s.vs, s.idx) for s in r.series] for r in reqs]


class BatchingTest(unittest.TestCase):
    def test_points_are_grouped_by_series_in_order_of_appearance(self):
        pts = [
            Point("cpu", {"host": "a"}, 1, 1.0),
            Point("cpu", {"host": "b"}, 1, 2.0),
            Point("cpu", {"host": "a"}, 2, 3),
        ]
        reqs = list(requests_from(pts, 100, 1 << 20))
        self.assertEqual(
            flatten(reqs),
            [[({"__name__": "cpu", "host": "a"}, [1, 2], [1.0, 3.0], [0, 2]), ({"__name__": "cpu", "host": "b"}, [1], [2.0], [1])]],
        )
        proto = reqs[0].to_proto()
        self.assertEqual(len(proto.batches), 2)
        self.assertEqual([(l.name, l.value) for l in proto.batches[0].series.labels], [("__name__", "cpu"), ("host", "a")])
        self.assertEqual(list(proto.batches[0].timestamps_ms), [1, 2])

    def test_requests_are_bounded_by_points(self):
        pts = (Point("m", {"i": str(i % 3)}, i, float(i)) for i in range(10))
        reqs = list(requests_from(pts, 4, 1 << 20))
        self.assertEqual([r.points for r in reqs], [4, 4, 2])
        seen = sorted(i for r in reqs for s in r.series for i in s.idx)
        self.assertEqual(seen, list(range(10)))

    def test_columnar_series_is_split_across_requests(self):
        data = {'m{a="1"}': (list(range(25)), [float(i) for i in range(25)])}
        reqs = list(requests_from(data, 10, 1 << 20))
        self.assertEqual([r.points for r in reqs], [10, 10, 5])
        self.assertEqual(reqs[2].series[0].idx, [20, 21, 22, 23, 24])
        self.assertEqual(reqs[2].series[0].labels, {"__name__": "m", "a": "1"})

    def test_requests_are_bounded_by_bytes(self):
        big = "x" * 900
        pts = [Point("m", {"v": big + str(i)}, 1, 1.0) for i in range(40)]
        reqs = list(requests_from(pts, 10_000, 8192))
        self.assertGreater(len(reqs), 4)
        for r in reqs:
            self.assertLessEqual(len(r.to_proto().SerializeToString()), 8192)
        self.assertEqual(sum(r.points for r in reqs), 40)

    def test_series_larger_than_a_request_is_refused(self):
        with self.assertRaises(InvalidArgument) as cm:
            list(requests_from([Point("m", {"v": "x" * 5000}, 1, 1.0)], 10, 2048))
        self.assertIn("max_request_bytes", str(cm.exception))

    def test_series_batch_and_single_point(self):
        reqs = list(requests_from(SeriesBatch("m", {}, [dt.datetime(2024, 1, 1, tzinfo=UTC)], [5]), 10, 1 << 20))
        self.assertEqual(reqs[0].series[0].ts, [1704067200000])
        reqs = list(requests_from(Point("m", None, 7, 1.5), 10, 1 << 20))  # type: ignore[arg-type]
        self.assertEqual(reqs[0].series[0].vs, [1.5])

    def test_bad_input_names_the_item(self):
        cases = {
            "float timestamp": ([Point("m", {}, 1, 1.0), Point("m", {}, 1.5e12, 1.0)], "point 1: timestamp"),
            "string value": ([Point("m", {}, 1, "3")], "point 0: value: want a real number"),
            "non-str label": ([Point("m", {"a": 1}, 1, 1.0)], "point 0: label 'a'=1"),
            "empty metric": ([Point("", {}, 1, 1.0)], "point 0: metric must be a non-empty str"),
            "conflicting __name__": ([Point("m", {"__name__": "x"}, 1, 1.0)], "labels give __name__='x' but metric is 'm'"),
            "wrong item": ([("m", 1, 2)], "item 0: want a Point or a SeriesBatch"),
            "length mismatch": ([SeriesBatch("m", {}, [1, 2], [1.0])], "item 0 (SeriesBatch): 2 timestamps but 1 values"),
            "columnar regex key": ({'m{a=~"x"}': ([1], [1.0])}, "a series takes only = labels"),
            "columnar no metric": ({'{a="x"}': ([1], [1.0])}, "no metric name"),
            "columnar bad key": ({"m{": ([1], [1.0])}, "series 0 ('m{')"),
            "columnar not a pair": ({"m": [1, 2, 3]}, "want a (timestamps, values) pair"),
            "columnar bad value": ({"m": ([1, 2], [1.0, None])}, "values[1]"),
            "a string": ("m 1 2", "want Points"),
            "lone surrogate in a label": ([Point("m", {"a": "x\ud800"}, 1, 1.0)], "point 0: label 'a': 'x\\ud800' is not valid UTF-8"),
            "value beyond float64": ([Point("m", {}, 1, 10 ** 400)], "point 0: value: int is too large"),
            "columnar bool timestamp": ({"m": ([1, True], [1.0, 2.0])}, "timestamps[1]: bool"),
            "columnar int64 overflow": ({"m": ([1, 1 << 63], [1.0, 2.0])}, "timestamps[1]: 9223372036854775808 ms is outside the int64 range"),
        }
        for name, (data, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    list(requests_from(data, 100, 1 << 20))
                self.assertIn(msg, str(cm.exception))

    def test_columnar_values_become_floats(self):
        (req,) = requests_from({"m": ([1, 2, 3], [1, 2.5, 3])}, 10, 1 << 20)
        self.assertEqual(req.series[0].vs, [1.0, 2.5, 3.0])
        self.assertTrue(all(type(v) is float for v in req.series[0].vs))
        (req,) = requests_from({"m": ((1, 2), (1.5, 2.5))}, 10, 1 << 20)
        self.assertEqual((req.series[0].ts, req.series[0].vs), ([1, 2], [1.5, 2.5]))

    def test_rejections_map_back_to_the_input(self):
        pts = [Point("m", {"h": "a"}, 10, 1.0), Point("m", {"h": "b"}, 20, 2.0), Point("m", {"h": "a"}, 30, 3.0)]
        (req,) = requests_from(pts, 100, 1 << 20)
        resp = pb.WriteResponse(
            accepted=1,
            rejected=2,
            rejections=[
                pb.Rejection(batch_index=0, point_index=1, reason=pb.REJECT_REASON_TOO_FAR_IN_FUTURE, message="batch 0 point 1: future", points=1),
                pb.Rejection(batch_index=1, point_index=-1, reason=pb.REJECT_REASON_INVALID_SERIES, message="batch 1: bad", points=1),
            ],
        )
        res = result_from(req, resp, 10)
        self.assertEqual((res.accepted, res.rejected, res.requests), (1, 2, 1))
        r0, r1 = res.rejections
        self.assertEqual((r0.reason, r0.index, r0.timestamp_ms, r0.value, r0.labels), ("TOO_FAR_IN_FUTURE", 2, 30, 3.0, {"__name__": "m", "h": "a"}))
        self.assertEqual((r1.reason, r1.index, r1.timestamp_ms, r1.points, r1.message), ("INVALID_SERIES", None, None, 1, "bad"))
        self.assertIn('m{h="a"} point 2: TOO_FAR_IN_FUTURE: future', str(r0))
        self.assertEqual(len(result_from(req, resp, 1).rejections), 1)

    def test_result_check(self):
        WriteResult(accepted=3).check()
        with self.assertRaises(RejectedPoints) as cm:
            WriteResult(accepted=1, rejected=2).check()
        self.assertIn("2 of 3 points rejected", str(cm.exception))


class RetryPolicyTest(unittest.TestCase):
    def test_backoff_grows_caps_and_jitters(self):
        p = RetryPolicy(max_retries=10, initial_backoff=0.1, max_backoff=1.0, multiplier=2.0, jitter=0.5)
        self.assertEqual([p.backoff(n, lambda: 0.0) for n in (1, 2, 3, 4, 5, 6)], [0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
        self.assertEqual([p.backoff(n, lambda: 1.0) for n in (1, 2, 5)], [0.05, 0.1, 0.5])
        self.assertEqual(p.backoff(10_000, lambda: 0.0), 1.0)  # no overflow
        self.assertEqual(RetryPolicy(jitter=0).backoff(1, lambda: 0.9), 0.2)

    def test_bad_policies(self):
        for kw in ({"max_retries": -1}, {"initial_backoff": 2, "max_backoff": 1}, {"multiplier": 0.5}, {"jitter": 2}, {"max_retries": 1.5}):
            with self.subTest(**kw):
                with self.assertRaises(InvalidArgument):
                    RetryPolicy(**kw)
        self.assertEqual(RetryPolicy.of(None).max_retries, 0)
        self.assertEqual(RetryPolicy.of(3).max_retries, 3)
        with self.assertRaises(InvalidArgument):
            RetryPolicy.of("3")  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
