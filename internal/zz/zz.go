package zz

import (
	_ "github.com/golang/snappy"
	_ "github.com/influxdata/influxdb-client-go/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/prometheus/prometheus/prompb"
	_ "github.com/prometheus/prometheus/promql"
	_ "github.com/prometheus/prometheus/promql/parser"
	_ "github.com/prometheus/prometheus/storage"
	_ "go.etcd.io/raft/v3"
	_ "go.etcd.io/raft/v3/raftpb"
)
