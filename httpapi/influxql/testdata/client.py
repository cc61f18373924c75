"""Drives Tributary's InfluxDB 1.x API with Debian's python3-influxdb
(5.3.1): writes through the client, then checks query() and every
management call the client offers. Run by TestPythonClient; argv: host
port. Prints "ok N" (N checks) or fails with the first mismatch."""

import sys

from influxdb import InfluxDBClient
from influxdb.exceptions import InfluxDBClientError

host, port = sys.argv[1], int(sys.argv[2])
c = InfluxDBClient(host=host, port=port, database="pydb", timeout=30)
checks = 0


def check(what, got, want):
    global checks
    checks += 1
    if got != want:
        sys.exit("%s: got %r, want %r" % (what, got, want))


def fails(what, fn, needle):
    global checks
    checks += 1
    try:
        fn()
    except InfluxDBClientError as e:
        if needle not in str(e):
            sys.exit("%s: error %r does not say %r" % (what, str(e), needle))
        return
    sys.exit("%s: no error" % what)


c.create_database("pydb")  # a no-op that must succeed
c.create_retention_policy("week", "7d", 1, database="pydb")
points = [
    {"measurement": "cpu_load_short", "tags": {"host": "server01", "region": "us-west"},
     "time": "2026-06-01T08:00:00Z", "fields": {"value": 0.64}},
    {"measurement": "cpu_load_short", "tags": {"host": "server02", "region": "us-west"},
     "time": "2026-06-01T08:01:00Z", "fields": {"value": 0.55}},
    {"measurement": "cpu_load_short", "tags": {"host": "server01", "region": "us-west"},
     "time": "2026-06-01T08:02:00Z", "fields": {"value": 2.0}},
    {"measurement": "mem", "tags": {"host": "server01"},
     "time": "2026-06-01T08:00:00Z", "fields": {"used": 100, "free": 28}},
]
check("write_points", c.write_points(points), True)

rs = c.query("SELECT \"value\" FROM \"cpu_load_short\" WHERE \"region\"='us-west'")
check("query points", list(rs.get_points()), [
    {"time": "2026-06-01T08:00:00Z", "value": 0.64},
    {"time": "2026-06-01T08:01:00Z", "value": 0.55},
    {"time": "2026-06-01T08:02:00Z", "value": 2},
])

rs = c.query("SELECT mean(value) FROM cpu_load_short WHERE time >= '2026-06-01T08:00:00Z' "
             "AND time < '2026-06-01T08:03:00Z' GROUP BY time(1m), host fill(none)", epoch="ms")
check("group by host", list(rs.get_points(tags={"host": "server01"})), [
    {"time": 1780300800000, "mean": 0.64},
    {"time": 1780300920000, "mean": 2},
])
check("series keys", sorted(k[1]["host"] for k in rs.keys()), ["server01", "server02"])

rs = c.query("SELECT value FROM cpu_load_short", chunked=True, chunk_size=1)
check("chunked", [[p["value"] for p in r.get_points()] for r in rs], [[0.64], [0.55], [2]])

rs = c.query("SELECT value FROM cpu_load_short WHERE host = $h", bind_params={"h": "server02"})
check("bound parameters", [p["value"] for p in rs.get_points()], [0.55])

rs = c.query("SELECT used, free FROM mem; SELECT count(value) FROM cpu_load_short")
check("two statements", [list(r.get_points()) for r in rs], [
    [{"time": "2026-06-01T08:00:00Z", "used": 100, "free": 28}],
    [{"time": "1970-01-01T00:00:00Z", "count": 3}],
])

check("get_list_database", c.get_list_database(), [{"name": "pydb"}])
check("get_list_measurements", c.get_list_measurements(),
      [{"name": "cpu_load_short"}, {"name": "mem"}])
check("get_list_series", c.get_list_series(database="pydb"), [
    "cpu_load_short,host=server01,region=us-west",
    "cpu_load_short,host=server02,region=us-west",
    "mem,host=server01",
])
check("get_list_series of a measurement with tags",
      c.get_list_series(database="pydb", measurement="cpu_load_short", tags={"host": "server02"}),
      ["cpu_load_short,host=server02,region=us-west"])
check("get_list_retention_policies", c.get_list_retention_policies("pydb"), [
    {"name": "autogen", "duration": "0s", "shardGroupDuration": "168h0m0s", "replicaN": 1, "default": True},
])
check("get_list_users", c.get_list_users(), [])
check("get_list_continuous_queries", c.get_list_continuous_queries(), [])

fails("drop_database", lambda: c.drop_database("pydb"), "not supported")
fails("unsupported function", lambda: c.query("SELECT derivative(value) FROM cpu_load_short"), "not supported")
fails("parse error", lambda: c.query("SELECT * FRM cpu"), "error parsing query")
print("ok %d" % checks)
