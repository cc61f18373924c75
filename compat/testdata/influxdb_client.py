"""Drives a node with python3-influxdb (InfluxDBClient): writes points,
queries them back and calls every management method the client offers,
printing one JSON object: {"<call>": {"ok": bool, "result": ..., "error": str}}.

Usage: influxdb_client.py HOST PORT NOW_MS
"""
import json
import sys

from influxdb import InfluxDBClient

host, port, now_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = InfluxDBClient(host=host, port=port, database="compat", timeout=20)
out = {}


def call(name, fn, *args, **kwargs):
    try:
        res = fn(*args, **kwargs)
        if hasattr(res, "raw"):
            res = res.raw
        out[name] = {"ok": True, "result": res}
    except Exception as e:  # the client's errors carry the server's answer
        out[name] = {"ok": False, "error": "%s: %s" % (type(e).__name__, e),
                     "code": getattr(e, "code", None)}


points = []
for host_tag, base in (("a", 10.0), ("b", 20.0)):
    for i in range(6):
        points.append({"measurement": "cpu", "tags": {"host": host_tag},
                       "time": now_ms - (5 - i) * 10000,
                       "fields": {"value": base + i, "up": True, "state": "running"}})

call("ping", client.ping)
call("create_database", client.create_database, "compat")
call("switch_database", client.switch_database, "compat")
call("write_points", client.write_points, points, time_precision="ms")
call("query", client.query, 'SELECT mean("value") FROM "cpu" WHERE time > now() - 1h GROUP BY "host"', epoch="ms")
call("query_raw", client.query, 'SELECT "value" FROM "cpu" WHERE "host" = \'a\' AND time > now() - 1h', epoch="ms")
call("get_list_database", client.get_list_database)
call("get_list_measurements", client.get_list_measurements)
call("get_list_series", client.get_list_series, "compat")
call("get_list_retention_policies", client.get_list_retention_policies, "compat")
call("create_retention_policy", client.create_retention_policy, "week", "7d", 1, "compat")
call("alter_retention_policy", client.alter_retention_policy, "week", "compat", duration="14d")
call("drop_retention_policy", client.drop_retention_policy, "week", "compat")
call("get_list_continuous_queries", client.get_list_continuous_queries)
call("create_continuous_query", client.create_continuous_query, "cq1",
     'SELECT mean("value") INTO "cpu_1h" FROM "cpu" GROUP BY time(1h)', "compat")
call("drop_continuous_query", client.drop_continuous_query, "cq1", "compat")
call("get_list_users", client.get_list_users)
call("create_user", client.create_user, "alice", "secret")
call("set_user_password", client.set_user_password, "alice", "secret2")
call("grant_privilege", client.grant_privilege, "read", "compat", "alice")
call("revoke_privilege", client.revoke_privilege, "read", "compat", "alice")
call("get_list_privileges", client.get_list_privileges, "alice")
call("grant_admin_privileges", client.grant_admin_privileges, "alice")
call("revoke_admin_privileges", client.revoke_admin_privileges, "alice")
call("drop_user", client.drop_user, "alice")
call("delete_series", client.delete_series, "compat", "cpu", {"host": "zzz"})
call("drop_measurement", client.drop_measurement, "nothing_here")
call("drop_database", client.drop_database, "scratch")
print(json.dumps(out, default=str))
