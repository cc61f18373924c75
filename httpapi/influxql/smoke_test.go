package influxql

import "testing"

func TestSmoke(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.write("mydb", "cpu,host=a,region=west usage_user=1,usage_system=2 1780300800\ncpu,host=b,region=east usage_user=3,usage_system=4 1780300810\ncpu,host=a,region=west usage_user=5 1780300860\n")
	for _, q := range []string{
		"SHOW DATABASES", "SHOW MEASUREMENTS", "SHOW TAG KEYS", "SHOW TAG VALUES WITH KEY = host", "SHOW FIELD KEYS", "SHOW SERIES", "SHOW RETENTION POLICIES",
		"SELECT * FROM cpu", "SELECT usage_user FROM cpu WHERE host = 'a'", "SELECT mean(usage_user) FROM cpu",
		"SELECT mean(usage_user), max(usage_system) FROM cpu WHERE time >= '2026-06-01T08:00:00Z' GROUP BY time(1m), host fill(null)",
		"SELECT max(usage_user) FROM cpu", "SELECT * FROM cpu GROUP BY host ORDER BY time DESC LIMIT 1",
		"SELECT median(usage_user), percentile(usage_user, 50), stddev(usage_user), spread(usage_user), first(usage_user), last(usage_user) FROM cpu",
		"SELECT max(m) FROM (SELECT mean(usage_user) AS m FROM cpu WHERE time > now() - 1d GROUP BY time(1m), host)",
		"CREATE DATABASE x", "DROP DATABASE x",
	} {
		a := e.query("mydb", q, "")
		t.Logf("%s\n%s", q, a.raw)
	}
}
