"""Retries against fake servers: UNAVAILABLE and RESOURCE_EXHAUSTED are
retried with backoff, everything else fails at once with a clear error."""

import socket
import threading
import unittest

import grpc

from fixture import FakeServer, ScriptedWrite, no_wait_client
from tributary import (
    Client,
    ClientClosed,
    InvalidArgument,
    Point,
    ResourceExhausted,
    RetryPolicy,
    Unauthenticated,
    Unavailable,
)
from tributary._gen import tributary_pb2 as pb
from tributary._gen import tributary_pb2_grpc as pb_grpc

U = grpc.StatusCode.UNAVAILABLE
R = grpc.StatusCode.RESOURCE_EXHAUSTED


def points(n):
    return [Point("m", {"i": "1"}, 1000 + i, float(i)) for i in range(n)]


class WriteRetryTest(unittest.TestCase):
    def test_retries_unavailable_and_resource_exhausted_then_succeeds(self):
        w = ScriptedWrite([U, R, U])
        with FakeServer(write=w) as srv:
            c, waits = no_wait_client(srv.address, retries=RetryPolicy(max_retries=3, initial_backoff=0.1, max_backoff=1, jitter=0))
            with c:
                res = c.write(points(3))
        self.assertEqual(res.accepted, 3)
        self.assertEqual(len(w.requests), 4)
        self.assertEqual(waits, [0.1, 0.2, 0.4])
        # Every attempt carried the same request.
        self.assertTrue(all(r == w.requests[0] for r in w.requests))

    def test_gives_up_after_max_retries(self):
        w = ScriptedWrite([U] * 10)
        with FakeServer(write=w) as srv:
            c, waits = no_wait_client(srv.address, retries=2)
            with c, self.assertRaises(Unavailable) as cm:
                c.write(points(1))
        e = cm.exception
        self.assertEqual(len(w.requests), 3)
        self.assertEqual(len(waits), 2)
        self.assertEqual(e.attempts, 3)
        self.assertTrue(e.retryable)
        msg = str(e)
        for part in ("WriteService/Write", srv.address, "UNAVAILABLE", "scripted failure", "gave up after 3 attempts"):
            self.assertIn(part, msg)
        self.assertEqual(e.result.accepted, 0)

    def test_other_codes_are_not_retried(self):
        for code, exc in ((grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument), (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated)):
            with self.subTest(code=code.name):
                w = ScriptedWrite([code])
                with FakeServer(write=w) as srv:
                    c, waits = no_wait_client(srv.address, retries=5)
                    with c, self.assertRaises(exc) as cm:
                        c.write(points(1))
                self.assertEqual(len(w.requests), 1)
                self.assertEqual(waits, [])
                self.assertEqual(cm.exception.code, code)

    def test_retries_off(self):
        w = ScriptedWrite([R])
        with FakeServer(write=w) as srv:
            c, waits = no_wait_client(srv.address, retries=None)
            with c, self.assertRaises(ResourceExhausted):
                c.write(points(1))
        self.assertEqual(len(w.requests), 1)

    def test_partial_result_on_failure_in_a_later_request(self):
        # Request 1 succeeds, request 2 fails for good: the error says what
        # request 1 stored.
        w = ScriptedWrite([None, grpc.StatusCode.INVALID_ARGUMENT])
        with FakeServer(write=w) as srv:
            with Client(srv.address, max_points_per_request=2) as c, self.assertRaises(InvalidArgument) as cm:
                c.write(points(5))
        self.assertEqual(cm.exception.result.accepted, 2)
        self.assertEqual(cm.exception.result.requests, 1)

    def test_unreachable_server(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        s.close()  # nothing listens there now
        c, waits = no_wait_client(addr, retries=2, timeout=5)
        with c, self.assertRaises(Unavailable) as cm:
            c.status()
        self.assertEqual(cm.exception.attempts, 3)
        self.assertIn(addr, str(cm.exception))

    def test_close_interrupts_backoff(self):
        w = ScriptedWrite([U] * 10)
        with FakeServer(write=w) as srv:
            c = Client(srv.address, retries=RetryPolicy(max_retries=5, initial_backoff=30, max_backoff=30))
            errors = []

            def run():
                try:
                    c.write(points(1))
                except Exception as e:  # noqa: BLE001 - recorded for the assertion
                    errors.append(e)

            t = threading.Thread(target=run)
            t.start()
            while not w.requests:
                threading.Event().wait(0.01)
            c.close()
            t.join(20)
            self.assertFalse(t.is_alive(), "write still waiting after close()")
        self.assertIsInstance(errors[0], ClientClosed)
        with self.assertRaises(ClientClosed):
            c.status()


class ScriptedQuery(pb_grpc.QueryServiceServicer):
    """Query fails with the scripted codes before sending anything, then
    streams one series in two messages; fail_midway makes it fail after the
    first message instead."""

    def __init__(self, codes=(), fail_midway=False):
        self.codes = list(codes)
        self.calls = 0
        self.fail_midway = fail_midway

    def Query(self, request, context):
        self.calls += 1
        if self.codes:
            context.abort(self.codes.pop(0), "scripted")
        s = pb.Series(labels=[pb.Label(name="__name__", value="m")])
        yield pb.QueryResponse(series=s, series_index=0, timestamps_ms=[1, 2], values=[1.0, 2.0], source="raw")
        if self.fail_midway:
            context.abort(U, "node is shutting down")
        yield pb.QueryResponse(series_index=0, timestamps_ms=[3], values=[3.0])
        yield pb.QueryResponse(series=pb.Series(labels=[pb.Label(name="__name__", value="n")]), series_index=1,
                               timestamps_ms=[5], values=[5.0], warnings=["partial"])


class QueryRetryTest(unittest.TestCase):
    def test_opening_the_stream_is_retried(self):
        q = ScriptedQuery([U, R])
        with FakeServer(query=q) as srv:
            c, waits = no_wait_client(srv.address, retries=3)
            with c:
                got = list(c.query("m", start=0, end=10))
        self.assertEqual(q.calls, 3)
        self.assertEqual(len(waits), 2)
        self.assertEqual([(s.labels, s.timestamps, s.values) for s in got],
                         [({"__name__": "m"}, [1, 2, 3], [1.0, 2.0, 3.0]), ({"__name__": "n"}, [5], [5.0])])

    def test_source_and_warnings(self):
        with FakeServer(query=ScriptedQuery()) as srv, Client(srv.address) as c:
            stream = c.query("m", start=0, end=10)
            self.assertEqual(stream.source, "raw")
            list(stream)
            self.assertEqual(stream.warnings, ["partial"])

    def test_oversized_response_is_not_retried(self):
        # gRPC reports it as RESOURCE_EXHAUSTED, but it fails the same way
        # every time.
        q = ScriptedQuery()
        with FakeServer(query=q) as srv:
            c, waits = no_wait_client(srv.address, retries=3, max_receive_bytes=16)
            with c, self.assertRaises(ResourceExhausted) as cm:
                c.query("m", start=0, end=10)
        self.assertEqual((q.calls, waits), (1, []))
        self.assertIn("larger than max", str(cm.exception))

    def test_failure_after_data_is_not_retried(self):
        q = ScriptedQuery(fail_midway=True)
        with FakeServer(query=q) as srv:
            c, waits = no_wait_client(srv.address, retries=3)
            with c:
                stream = c.query("m", start=0, end=10)
                with self.assertRaises(Unavailable) as cm:
                    list(stream)
        self.assertEqual(q.calls, 1)
        self.assertIn("node is shutting down", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
