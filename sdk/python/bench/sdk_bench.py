"""Throughput of the Python SDK against a node at TRIBUTARY_BENCH_ADDR.

Run by `go test -bench PythonSDK ./sdk/python`, which starts the node; by
hand: TRIBUTARY_BENCH_ADDR=127.0.0.1:7070 python3 sdk/python/bench/sdk_bench.py.

Prints a table on stderr and, as the last line on stdout, one JSON object of
figures (points/s), which the Go benchmark reports as metrics.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tributary import Client, Point  # noqa: E402

SERIES = 100
PER_SERIES = 1000  # 100,000 points per workload


def main() -> None:
    addr = os.environ.get("TRIBUTARY_BENCH_ADDR")
    if not addr:
        sys.exit("set TRIBUTARY_BENCH_ADDR to a node's gRPC address")
    run = "%x" % time.time_ns()
    base = (int(time.time() * 1000) // 60_000 - 50) * 60_000
    n = SERIES * PER_SERIES
    figures = {}
    with Client(addr, timeout=120) as c:
        labels = [{"host": "h%03d" % s, "run": run} for s in range(SERIES)]

        t0 = time.perf_counter()
        pts = (Point("bench_points", labels[s], base + i * 1000, float(i)) for i in range(PER_SERIES) for s in range(SERIES))
        res = c.write(pts)
        figures["write_points/s"] = n / (time.perf_counter() - t0)
        assert res.accepted == n, res

        t0 = time.perf_counter()
        cols = {'bench_columns{host="h%03d",run="%s"}' % (s, run): (list(range(base, base + PER_SERIES * 1000, 1000)), [float(i) for i in range(PER_SERIES)]) for s in range(SERIES)}
        res = c.write(cols)
        figures["columnar_points/s"] = n / (time.perf_counter() - t0)
        assert res.accepted == n, res

        t0 = time.perf_counter()
        with c.batch_writer(batch_size=5000) as w:
            for i in range(PER_SERIES):
                for s in range(SERIES):
                    w.add("bench_writer", labels[s], base + i * 1000, float(i))
        figures["batchwriter_points/s"] = n / (time.perf_counter() - t0)
        assert w.result.accepted == n, w.result

        t0 = time.perf_counter()
        got = sum(len(s) for s in c.query('bench_points{run="%s"}' % run, start=base, end=base + PER_SERIES * 1000))
        figures["query_points/s"] = got / (time.perf_counter() - t0)
        assert got == n, got

    for k, v in figures.items():
        print("%-22s %12.0f" % (k, v), file=sys.stderr)
    print(json.dumps({k: round(v) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
