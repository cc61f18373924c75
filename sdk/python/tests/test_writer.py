"""BatchWriter: flush by size, by interval and on demand against a real
node; backpressure, failure hand-back and concurrency against fakes."""

import threading
import time
import unittest

import grpc

from fixture import ADDR, FakeServer, ScriptedWrite, minute_aligned, needs_node, now_ms, unique
from tributary import BatchWriterError, BufferFull, Client, ClientClosed, InvalidArgument, Point, SeriesBatch


def eventually(cond, what, timeout=20.0):
    """Wait for cond() to hold. The timeout only bounds a hung test; the
    assertion is about the condition, not about how fast it came true."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("never happened: " + what)
        time.sleep(0.005)


@needs_node
class BatchWriterNodeTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(ADDR)
        self.addCleanup(self.client.close)

    def count(self, m, base):
        return sum(len(s) for s in self.client.query(m, start=base, end=base + 3_600_000))

    def test_flushes_by_size(self):
        m = unique("bw_size")
        base = minute_aligned(30)
        w = self.client.batch_writer(batch_size=10, flush_interval=3600)
        for i in range(25):
            w.add(m, {"h": "a"}, base + i, float(i))
        # Two full batches go out on their own; five points wait.
        eventually(lambda: w.result.accepted == 20, "two batches sent")
        self.assertEqual(w.pending, 5)
        self.assertEqual(w.result.requests, 2)
        self.assertEqual(self.count(m, base), 20)
        res = w.close()
        self.assertEqual((res.accepted, res.rejected, w.pending), (25, 0, 0))
        self.assertEqual(self.count(m, base), 25)

    def test_flushes_by_interval(self):
        m = unique("bw_interval")
        base = minute_aligned(30)
        with self.client.batch_writer(batch_size=1000, flush_interval=0.05) as w:
            w.write([Point(m, {}, base + i, 1.0) for i in range(3)])
            eventually(lambda: w.result.accepted == 3, "interval flush")
            self.assertEqual(self.count(m, base), 3)

    def test_flush_on_demand_and_rejections(self):
        m = unique("bw_flush")
        base = minute_aligned(30)
        with self.client.batch_writer(batch_size=1000, flush_interval=3600) as w:
            w.write(SeriesBatch(m, {"h": "a"}, [base, base + 1, base + 2], [1, 2, 3]))
            w.add(m, {"h": "a"}, now_ms() + 86_400_000, 4.0)  # a day ahead: rejected
            res = w.flush()
            self.assertEqual((res.accepted, res.rejected), (3, 1))
            (r,) = res.rejections
            self.assertEqual((r.reason, r.index, r.value), ("TOO_FAR_IN_FUTURE", 3, 4.0))
            self.assertEqual(self.count(m, base), 3)

    def test_bad_input_raises_at_once(self):
        with self.client.batch_writer() as w:
            with self.assertRaises(InvalidArgument) as cm:
                w.write([Point("m", {}, 1, 1.0), Point("m", {}, 2.5, 1.0)])
            self.assertIn("point 1: timestamp", str(cm.exception))
            with self.assertRaises(InvalidArgument) as cm:
                w.add("m", {}, 1 << 63, 1.0)
            self.assertIn("int64", str(cm.exception))
            with self.assertRaises(InvalidArgument):
                w.write("m 1 2")  # type: ignore[arg-type]
            with self.assertRaises(InvalidArgument):
                w.add("m", {"a": None}, 1, 1.0)  # type: ignore[dict-item]
        with self.assertRaises(ClientClosed):
            w.add("m", {}, 1, 1.0)

    def test_bad_options(self):
        for kw in ({"batch_size": 0}, {"batch_size": 10, "max_buffered_points": 5}, {"flush_interval": 0}, {"block_timeout": -1}):
            with self.subTest(**kw):
                with self.assertRaises(InvalidArgument):
                    self.client.batch_writer(**kw)


class BatchWriterFakeTest(unittest.TestCase):
    def test_full_buffer_blocks_then_raises_buffer_full(self):
        gate = threading.Event()
        w_srv = ScriptedWrite(gate=gate)
        with FakeServer(write=w_srv) as srv, Client(srv.address) as c:
            w = c.batch_writer(batch_size=5, flush_interval=3600, max_buffered_points=10, block_timeout=0.05)
            w.write([Point("m", {}, i, 1.0) for i in range(10)])
            with self.assertRaises(BufferFull) as cm:
                w.add("m", {}, 10, 1.0)  # the sender is stuck on the gate
            self.assertIn("1 of this write's points were not buffered", str(cm.exception))
            self.assertEqual(w.pending, 10)
            gate.set()
            res = w.close()
        self.assertEqual(res.accepted, 10)
        sent = sorted(t for r in w_srv.requests for b in r.batches for t in b.timestamps_ms)
        self.assertEqual(sent, list(range(10)))

    def test_failed_send_hands_back_every_unsent_point(self):
        w_srv = ScriptedWrite([grpc.StatusCode.PERMISSION_DENIED])
        with FakeServer(write=w_srv) as srv, Client(srv.address) as c:
            w = c.batch_writer(batch_size=2, flush_interval=3600)
            w.write([Point("m", {"i": str(i)}, i, float(i)) for i in range(2)])
            eventually(lambda: w.error is not None, "the send failed")
            with self.assertRaises(BatchWriterError) as cm:
                w.add("m", {}, 99, 1.0)
            e = cm.exception
            self.assertEqual(e.cause.code, grpc.StatusCode.PERMISSION_DENIED)
            self.assertEqual([(p.timestamp, p.labels) for p in e.unsent], [(0, {"i": "0"}), (1, {"i": "1"})])
            self.assertIn("2 points not sent", str(e))
            with self.assertRaises(BatchWriterError):
                w.flush()
            with self.assertRaises(BatchWriterError):
                w.close()

    def test_unsent_includes_the_buffer_behind_the_failed_batch(self):
        gate = threading.Event()
        w_srv = ScriptedWrite([grpc.StatusCode.UNAUTHENTICATED], gate=gate)
        with FakeServer(write=w_srv) as srv, Client(srv.address) as c:
            w = c.batch_writer(batch_size=3, flush_interval=3600)
            w.write([Point("m", {}, i, 1.0) for i in range(7)])
            self.assertEqual(w.pending, 7)
            gate.set()  # the first batch fails; the rest stays behind it
            with self.assertRaises(BatchWriterError) as cm:
                w.close()
        self.assertEqual(sorted(p.timestamp for p in cm.exception.unsent), list(range(7)))
        self.assertEqual(cm.exception.result.accepted, 0)

    def test_concurrent_writers_lose_and_duplicate_nothing(self):
        w_srv = ScriptedWrite()
        with FakeServer(write=w_srv) as srv, Client(srv.address) as c:
            w = c.batch_writer(batch_size=64, flush_interval=0.01, max_buffered_points=128)

            def produce(k):
                for i in range(500):
                    w.add("m", {"k": str(k)}, k * 1000 + i, float(i))

            threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            res = w.close()
        self.assertEqual(res.accepted, 2000)
        sent = sorted(t for r in w_srv.requests for b in r.batches for t in b.timestamps_ms)
        self.assertEqual(sent, sorted(k * 1000 + i for k in range(4) for i in range(500)))


if __name__ == "__main__":
    unittest.main()
