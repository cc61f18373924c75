// Module tsbs builds the Time Series Benchmark Suite's InfluxDB tools
// (data and query generators, loader, query runner) for make compat and
// make bench-lp, pinned to one published TSBS commit. It is its own module
// so that the main module does not inherit TSBS's dependencies.
module github.com/tributarydb/tributary/bench/tsbs

go 1.26.0

tool (
	github.com/timescale/tsbs/cmd/tsbs_generate_data
	github.com/timescale/tsbs/cmd/tsbs_generate_queries
	github.com/timescale/tsbs/cmd/tsbs_load_influx
	github.com/timescale/tsbs/cmd/tsbs_run_queries_influx
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.0.0 // indirect
	github.com/andybalholm/brotli v1.0.0 // indirect
	github.com/aws/aws-sdk-go v1.35.13 // indirect
	github.com/blagojts/viper v1.6.3-0.20200313094124-068f44cf5e69 // indirect
	github.com/cloudflare/golz4 v0.0.0-20150217214814-ef862a3cdc58 // indirect
	github.com/fsnotify/fsnotify v1.4.9 // indirect
	github.com/globalsign/mgo v0.0.0-20181015135952-eeefdecb41b8 // indirect
	github.com/gocql/gocql v0.0.0-20190810123941-df4b9cc33030 // indirect
	github.com/gogo/protobuf v1.3.1 // indirect
	github.com/golang/protobuf v1.4.2 // indirect
	github.com/golang/snappy v0.0.1 // indirect
	github.com/google/flatbuffers v1.11.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway v1.14.8 // indirect
	github.com/hailocab/go-hostpool v0.0.0-20160125115350-e80d13ce29ed // indirect
	github.com/hashicorp/hcl v1.0.0 // indirect
	github.com/jackc/chunkreader/v2 v2.0.1 // indirect
	github.com/jackc/pgconn v1.6.3 // indirect
	github.com/jackc/pgio v1.0.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgproto3/v2 v2.0.2 // indirect
	github.com/jackc/pgservicefile v0.0.0-20200714003250-2b9c44734f2b // indirect
	github.com/jackc/pgtype v1.4.2 // indirect
	github.com/jackc/pgx/v4 v4.8.0 // indirect
	github.com/jmespath/go-jmespath v0.4.0 // indirect
	github.com/jmoiron/sqlx v1.2.1-0.20190826204134-d7d95172beb5 // indirect
	github.com/klauspost/compress v1.10.10 // indirect
	github.com/kshvakov/clickhouse v1.3.11 // indirect
	github.com/lib/pq v1.3.0 // indirect
	github.com/magiconair/properties v1.8.1 // indirect
	github.com/mitchellh/mapstructure v1.2.2 // indirect
	github.com/pelletier/go-toml v1.4.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/prometheus/common v0.13.0 // indirect
	github.com/spf13/afero v1.2.2 // indirect
	github.com/spf13/cast v1.3.0 // indirect
	github.com/spf13/jwalterweatherman v1.0.0 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	github.com/subosito/gotenv v1.2.0 // indirect
	github.com/timescale/promscale v0.0.0-20201006153045-6a66a36f5c84 // indirect
	github.com/timescale/tsbs v0.0.0-20230921131859-37fced794d56 // indirect
	github.com/transceptor-technology/go-qpack v0.0.0-20190116123619-49a14b216a45 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasthttp v1.15.1 // indirect
	go.uber.org/atomic v1.6.0 // indirect
	golang.org/x/crypto v0.0.0-20200820211705-5c72a883971a // indirect
	golang.org/x/net v0.0.0-20200904194848-62affa334b73 // indirect
	golang.org/x/sys v0.0.0-20210316164454-77fc1eacc6aa // indirect
	golang.org/x/text v0.3.3 // indirect
	golang.org/x/time v0.0.0-20200630173020-3af7569d3a1e // indirect
	golang.org/x/xerrors v0.0.0-20200804184101-5ec99f83aff1 // indirect
	google.golang.org/genproto v0.0.0-20200904004341-0bd0a958aa1d // indirect
	google.golang.org/grpc v1.32.0 // indirect
	google.golang.org/protobuf v1.25.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/ini.v1 v1.51.0 // indirect
	gopkg.in/yaml.v2 v2.3.0 // indirect
)
