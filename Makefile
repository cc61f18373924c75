# Tributary — build, test and run. `make help` lists the targets.
SHELL := /bin/bash
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN := bin/tributary
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
STATIC_CGO_LDFLAGS := -l:librocksdb.a -lstdc++ -lm -lz -lbz2 -lsnappy -llz4 -lzstd
PROTO_FILES := $(shell find proto -name '*.proto')
GOTEST_FLAGS ?=
# Packages without cgo, also tested as 32-bit code (catches int-size bugs
# that would only show on armv7 Raspberry Pis).
PURE_GO_PKGS := ./model ./node/chunk ./node/record ./node/rollup ./node/labels ./node/wal/... ./internal/vfs ./replicator/wire ./replicator/internal/cursor ./replicator/internal/segsum ./coordinator/catalog ./coordinator/internal/raftlog
# The vocabulary and the protocol layers, which must build without cgo
# (docs/architecture.md, Layering, rule L2).
NO_CGO_PKGS := ./model/... ./backend/... ./grpcapi/... ./httpapi/... ./rules/... ./sdk/...
# TSBS's InfluxDB tools, built from their own module (bench/tsbs) so that
# the main module does not inherit TSBS's dependencies; rebuilt only when
# that module's go.mod or go.sum changes.
TSBS_TOOLS := tsbs_generate_data tsbs_generate_queries tsbs_load_influx tsbs_run_queries_influx
TSBS_BINS := $(addprefix bin/tsbs/,$(TSBS_TOOLS))

.PHONY: help deps build static test test-race lint generate check-generate proto-check proto-selftest proto-release bench bench-ingest bench-rollup bench-restart bench-lp bench-lowrate bench-fanout bench-replication bench-telemetry bench-hostile demo fuzz e2e soak soak-sim release release-test image cluster-up cluster-down clean compat

help: ## List targets with a one-line description.
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

deps: ## Install missing system packages (apt-get) and Go modules.
	@scripts/deps.sh
	@$(GO) mod download

build: deps ## Build bin/tributary (dynamically linked against librocksdb).
	@mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/tributary

static: deps ## Build a static bin/tributary (RocksDB linked in).
	@mkdir -p bin
	CGO_LDFLAGS="$(STATIC_CGO_LDFLAGS)" $(GO) build -tags netgo,osusergo \
	  -ldflags '$(LDFLAGS) -linkmode external -extldflags -static' -o $(BIN) ./cmd/tributary

test: deps ## Run all tests (what CI runs): API checks, vet, unit, crash, oracle, conformance and short fuzz tests.
	@GO=$(GO) scripts/protocheck.sh
	@GO=$(GO) scripts/protocheck.sh selftest
	$(GO) vet ./...
	@GO=$(GO) scripts/check32.sh
	$(GO) test -count=1 -timeout 20m $(GOTEST_FLAGS) ./...
	cd charts/check && $(GO) test -count=1 ./...
	@echo "32-bit (armv7-sized ints) run of the pure-Go formats:"
	GO=$(GO) scripts/test386.sh $(PURE_GO_PKGS)

compat: deps $(TSBS_BINS) ## Compatibility tests against real clients (Debian's prometheus, collectd, mosquitto, python3-influxdb; grpcurl; Grafana 11 requests; TSBS's InfluxDB loader and query runner): a table and one JSON line.
	@GO=$(GO) TRIBUTARY_TSBS_BIN=$(CURDIR)/bin/tsbs scripts/compat.sh

test-race: deps ## Run the tests under the race detector.
	$(GO) test -race -count=1 -timeout 30m ./...

lint: deps ## gofmt, go vet, staticcheck, the import rules and the function length limit of docs/architecture.md, a cgo-free build of the protocol layers.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	GO=$(GO) $(GO) test -count=1 ./internal/layering ./internal/funclen
	CGO_ENABLED=0 $(GO) build $(NO_CGO_PKGS)
	@GO=$(GO) scripts/protocheck.sh
	cd charts/check && $(GO) vet ./... && $(GO) test -count=1 ./...

generate: deps ## Regenerate protobuf code (committed; must leave a clean tree).
	protoc -I proto \
	  --plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) \
	  --plugin=protoc-gen-go-grpc=$$($(GO) tool -n protoc-gen-go-grpc) \
	  --go_out=proto --go_opt=paths=source_relative \
	  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  $(PROTO_FILES:proto/%=%)
	sdk/python/generate.sh

check-generate: generate ## Fail if `make generate` changes the tree.
	@git diff --exit-code -- proto sdk/python/tributary/_gen || (echo "generated code is stale: run make generate and commit"; exit 1)

proto-check: ## Lint proto/ and check it for breaking changes against the newest release baseline.
	@GO=$(GO) scripts/protocheck.sh

proto-selftest: ## Prove proto-check fails on lint violations and breaking changes.
	@GO=$(GO) scripts/protocheck.sh selftest

proto-release: ## Write the API baseline proto/releases/$(TAG).binpb (make proto-release TAG=v0.2.0).
	@test -n "$(TAG)" || { echo "usage: make proto-release TAG=vX.Y.Z"; exit 1; }
	@GO=$(GO) scripts/protocheck.sh release $(TAG)

E2E_STATIC_BIN := bin/tributary-static
# Longer knobs of make e2e (override on the command line or in the environment).
E2E_RUN ?= Cluster|Replication|CoordinatorFaults|Docker|BadInput|LoadLimits|PowerCut|DiskFull|Corrupt|Restore|Hostile|Rotation|Revocation|TestHeal_|TestRules_
DURATION ?= 30m
FUZZTIME ?= 30s

e2e: build ## End-to-end fault tests, processes and containers: leader kill -9 every 30 s for 10 min, snapshot catch-up, paused/isolated leader and full restart in docker, edge kill -9, link faults, corrupt segments, bad input, slow clients, 10k idle connections, 1M new series, power cuts (FUSE), disk full (loop ext4), bit flips in cursor and raft log, a damaged store table file repaired with its loss counted, a Pi SD card replaced and restored from the cloud, rules and alerts through a 5-minute uplink cut and a kill -9, a fleet rule group reaching its labelled edge and surviving a restart offline, self-healing (a coordinator's disk lost, refused then rejoined, down 30 min, an edge 30 days offline, scale 3→5→3 and replace) checked on every replica (E2E_RUN selects).
	@mkdir -p bin
	CGO_LDFLAGS="$(STATIC_CGO_LDFLAGS)" $(GO) build -tags netgo,osusergo \
	  -ldflags '$(LDFLAGS) -linkmode external -extldflags -static' -o $(E2E_STATIC_BIN) ./cmd/tributary
	TRIBUTARY_E2E_BIN=$(CURDIR)/$(BIN) TRIBUTARY_E2E_CYCLES=$${TRIBUTARY_E2E_CYCLES:-5} \
	TRIBUTARY_E2E_EDGE_KILLS=$${TRIBUTARY_E2E_EDGE_KILLS:-100} TRIBUTARY_E2E_OUTAGE=$${TRIBUTARY_E2E_OUTAGE:-120s} \
	TRIBUTARY_E2E_CUTS=$${TRIBUTARY_E2E_CUTS:-10} TRIBUTARY_E2E_HALF_OPEN=$${TRIBUTARY_E2E_HALF_OPEN:-30s} \
	TRIBUTARY_E2E_REPL_COORDINATORS=$${TRIBUTARY_E2E_REPL_COORDINATORS:-3} \
	TRIBUTARY_E2E_LEADER_KILL_INTERVAL=$${TRIBUTARY_E2E_LEADER_KILL_INTERVAL:-30s} \
	TRIBUTARY_E2E_LEADER_KILL_DURATION=$${TRIBUTARY_E2E_LEADER_KILL_DURATION:-10m} \
	TRIBUTARY_E2E_DOCKER=1 TRIBUTARY_E2E_STATIC_BIN=$(CURDIR)/$(E2E_STATIC_BIN) \
	TRIBUTARY_E2E_DOCKER_FAULT=$${TRIBUTARY_E2E_DOCKER_FAULT:-30s} \
	TRIBUTARY_E2E_IDLE_CONNS=$${TRIBUTARY_E2E_IDLE_CONNS:-10000} TRIBUTARY_E2E_IDLE_HOLD=$${TRIBUTARY_E2E_IDLE_HOLD:-60s} \
	TRIBUTARY_E2E_NEW_SERIES=$${TRIBUTARY_E2E_NEW_SERIES:-1000000} TRIBUTARY_E2E_MAX_SERIES=$${TRIBUTARY_E2E_MAX_SERIES:-50000} \
	TRIBUTARY_E2E_EXPLOSION_WINDOW=$${TRIBUTARY_E2E_EXPLOSION_WINDOW:-1m} \
	TRIBUTARY_E2E_SECURITY=1 TRIBUTARY_E2E_DISK=1 TRIBUTARY_E2E_POWER_CUTS=$${TRIBUTARY_E2E_POWER_CUTS:-10} \
	TRIBUTARY_E2E_COORD_POWER_CUTS=$${TRIBUTARY_E2E_COORD_POWER_CUTS:-6} TRIBUTARY_E2E_DISK_FULL=$${TRIBUTARY_E2E_DISK_FULL:-20s} \
	TRIBUTARY_E2E_RESTORE_LOAD=$${TRIBUTARY_E2E_RESTORE_LOAD:-30s} \
	TRIBUTARY_E2E_RULES_OUTAGE=$${TRIBUTARY_E2E_RULES_OUTAGE:-5m} TRIBUTARY_E2E_HEAL=1 TRIBUTARY_E2E_COORD_DOWN=$${TRIBUTARY_E2E_COORD_DOWN:-30m} TRIBUTARY_E2E_HEAL_WARMUP=$${TRIBUTARY_E2E_HEAL_WARMUP:-60s} \
	TRIBUTARY_E2E_HEAL_VICTIMS=$${TRIBUTARY_E2E_HEAL_VICTIMS:-follower,leader} TRIBUTARY_E2E_HEAL_RESTART_DELAYS=$${TRIBUTARY_E2E_HEAL_RESTART_DELAYS:-10s,40s} \
	$(GO) test ./e2e/ -run '$(E2E_RUN)' -v -count=1 -timeout 240m

soak: build soak-sim ## Random faults for DURATION (default 30m; make soak DURATION=2h): edge and leader kill -9, link cuts, paused coordinators, slow links, with the ack ledger checked at the end; after the raft simulator (soak-sim).
	TRIBUTARY_E2E_BIN=$(CURDIR)/$(BIN) TRIBUTARY_E2E_SOAK=$(DURATION) \
	$(GO) test ./e2e/ -run 'TestSoak_RandomFaults' -v -count=1 -timeout 0

soak-sim: deps ## Raft cluster simulator over many seeds (TRIBUTARY_SIM_SEEDS, default 5000).
	TRIBUTARY_SIM_SEEDS=$${TRIBUTARY_SIM_SEEDS:-5000} $(GO) test -count=1 -run TestSim -timeout 60m ./coordinator/internal/raftnode

fuzz: deps ## Run each fuzz target for FUZZTIME (default 30s; FUZZ_SAVE=1 adds the new corpus entries to testdata/fuzz).
	@GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

.PHONY: bench-full bench-iotdb bench-tsbs bench-canbus
# BENCH_PROFILE is short (make bench, a few minutes) or full (make bench-full).
BENCH_PROFILE ?= short
# BENCH_RESULTS receives the result files (JSON and plots). The default is
# ignored by git; BENCH_RESULTS=bench/results updates the published,
# committed figures (docs/benchmarks.md).
BENCH_RESULTS ?= bench/results/local

bench: build ## Short profile of the published workloads (iotdb, tsbs-cpu, canbus, rollup), a 10 s ingest and a 10/100-edge fleet; tables, JSON and PNG plots in BENCH_RESULTS (default bench/results/local, untracked; BENCH_RESULTS=bench/results updates the published ones), one JSON line each.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench iotdb --binary $(BIN) --profile short --results $(BENCH_RESULTS)
	bin/tribench tsbs-cpu --binary $(BIN) --profile short --results $(BENCH_RESULTS)
	bin/tribench canbus --binary $(BIN) --profile short --results $(BENCH_RESULTS)
	bin/tribench rollup --profile short --results $(BENCH_RESULTS)
	bin/tribench ingest --binary $(BIN) --duration 10s
	bin/tribench fleet --binary $(BIN) --edges 10,100 --duration 30s --results-dir $(BENCH_RESULTS)/fleet-short

bench-full: build ## Full profile of the published workloads, then bench-ingest, -restart, -lp, -fleet (up to 1,000 edges), -fanout, -replication, -heal, -rules and -pi (an hour or more).
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench iotdb --binary $(BIN) --profile full --results $(BENCH_RESULTS)
	bin/tribench tsbs-cpu --binary $(BIN) --profile full --results $(BENCH_RESULTS)
	bin/tribench canbus --binary $(BIN) --profile full --results $(BENCH_RESULTS)
	bin/tribench rollup --profile full --results $(BENCH_RESULTS)
	$(MAKE) bench-ingest bench-restart bench-lp bench-fleet bench-fanout bench-replication bench-heal bench-rules bench-pi

bench-iotdb: build ## IoTDB-benchmark style sweep over 1..9 clients, write-only and 50/50 read-write (BENCH_PROFILE=short|full).
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench iotdb --binary $(BIN) --profile $(BENCH_PROFILE) --results $(BENCH_RESULTS) $(BENCH_ARGS)

bench-tsbs: build ## TSBS cpu-only over line protocol, then the kdb+ blog's queries, lastpoint and max of all fields (BENCH_PROFILE=short|full).
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench tsbs-cpu --binary $(BIN) --profile $(BENCH_PROFILE) --results $(BENCH_RESULTS) $(BENCH_ARGS)

bench-canbus: build ## Warp 10 CAN-bus workload: 22 channels at 10 Hz, one series per line, then multi-field rows (BENCH_PROFILE=short|full).
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench canbus --binary $(BIN) --profile $(BENCH_PROFILE) --results $(BENCH_RESULTS) $(BENCH_ARGS)

bench-ingest: build ## Ingest benchmark: node process + loopback gRPC load; prints a table and a JSON line.
	$(GO) run ./bench/cmd/tribench ingest --binary $(BIN) $(BENCH_ARGS)

bench-restart: build ## Restart benchmark: kill -9 a node with a 32 MiB WAL (94 M compressed points), time two restarts; prints a table and a JSON line.
	$(GO) run ./bench/cmd/tribench restart --binary $(BIN) $(BENCH_ARGS)

bench-rollup: deps ## Rollup query benchmark: 100 series x 1/min x 5 years, then 1 month..5 years at 30m/12h/1d, cold and warm; table, JSON, plot.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench rollup --results $(BENCH_RESULTS) $(BENCH_ARGS)

bench-lp: build $(TSBS_BINS) ## Line-protocol benchmark: TSBS cpu-only over HTTP to a node process, then PromQL 1h max by minute, the five TSBS cpu-only query types through PromQL and (TSBS's own runner) InfluxQL; prints a table and a JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench lp --binary $(BIN) --tsbs-bin bin/tsbs $(BENCH_ARGS)

bench-lowrate: build ## Small-write benchmark: 8 series x 1 Hz, one request a second, fsync before ack, 10 min; storage bytes/hour against one 4 KiB page per fsync; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench lowrate --binary $(BIN) $(BENCH_ARGS)

bench-fanout: build ## Fan-out benchmark: 3 coordinators + 10 edges as processes (more --edges simulated in-process); query p99, failover gap, registrations/s, edges asked per query, series visibility; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench fanout --binary $(BIN) $(BENCH_ARGS)

bench-replication: build ## Replication benchmark: an edge shipping to coordinators; lag p50/p99, bytes/point, drain ratio, edge CPU overhead; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench replication --binary $(BIN) $(BENCH_ARGS)

bench-telemetry: build ## Telemetry overhead: ingest with telemetry off, metrics on, metrics + traces to an OTLP sink, alternating; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench telemetry --binary $(BIN) $(BENCH_ARGS)

bench-hostile: build ## Hostile clients against a TLS coordinator and node while 4,000 points/s are written: resident growth, writer p99, refusals; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench hostile --binary $(BIN) $(BENCH_ARGS)

.PHONY: bench-uplink bench-fleet bench-catalog bench-fleet-short bench-pi bench-arm64-smoke bench-heal bench-rules

bench-rules: build ## Rules benchmark: a node on one CPU (taskset) with 1,000 recording rules over 10,000 live series every 15 s, under an ingest feed, phases with and without the rules; evaluation p99, ingest lost, peak memory; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench rules --binary $(BIN) $(BENCH_ARGS)

bench-heal: build ## Self-healing benchmark: 3 coordinators + 10 edges, one coordinator loses its disk under 4,000 points/s and rejoins; ack pause, replacement, history restored, re-replication MiB/s, every replica checked; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench heal --binary $(BIN) $(BENCH_ARGS)

bench-fleet: build ## Fleet benchmark: 10, 100 and 1,000 simulated edges shipping to 3 coordinators; lag, intake, catalog load, coordinator CPU and RSS; table, JSON, plots.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench fleet --binary $(BIN) --results-dir $(BENCH_RESULTS) $(BENCH_ARGS)

bench-uplink: build ## Uplink benchmark: per lag budget (5s, 30s, 60s, 300s and the default) a coordinator and 4 edge processes, 8 series x 1 Hz each, 11 min side by side; bytes shipped per point; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench uplink --binary $(BIN) $(BENCH_ARGS)

bench-catalog: ## Catalog at scale, in process: 1 M series (100 per edge) through the catalog's commands, then a snapshot and its restore; bytes per series, snapshot MiB, restore time; table + one JSON line.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench catalog $(BENCH_ARGS)

bench-fleet-short: build ## Fleet benchmark, short profile: 10 and 100 simulated edges, 30 s each.
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench fleet --binary $(BIN) --edges 10,100 --duration 30s --results-dir $(BENCH_RESULTS)/fleet-short $(BENCH_ARGS)

bench-pi: ## Pi profile: the FROM-scratch node image under --cpus 1 --memory 512m (ingest, query mix, peak memory, OOM), then bench-arm64-smoke; skipped without docker.
	@GO=$(GO) RELEASE_TARGETS="amd64 arm64" scripts/release.sh build
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench pi --static-binary dist/tributary-linux-amd64 --results-dir $(BENCH_RESULTS) $(BENCH_ARGS)
	bin/tribench arm64-smoke --binary dist/tributary-linux-arm64 --results-dir $(BENCH_RESULTS)

bench-arm64-smoke: ## The arm64 static binary under qemu-user-static: a node written to and read back, after kill -9 and after a clean restart (correctness only).
	@test -x dist/tributary-linux-arm64 || GO=$(GO) RELEASE_TARGETS=arm64 scripts/release.sh build
	$(GO) build -o bin/tribench ./bench/cmd/tribench
	bin/tribench arm64-smoke --binary dist/tributary-linux-arm64 --results-dir $(BENCH_RESULTS)

demo: build ## Start tributary local, write sensor workloads, show them replicated and queried; then query the coordinator alone.
	@scripts/demo.sh

release: ## Static linux/amd64, arm64, armv7, armv6 binaries in dist/ (RocksDB linked in), tested (ARM under qemu), and the images.
	@GO=$(GO) VERSION=$(VERSION) scripts/release.sh build test image

release-test: ## Build the static release binaries into dist/ and test them (ARM ones under qemu-user-static).
	@GO=$(GO) VERSION=$(VERSION) scripts/release.sh build test

image: ## Build the release binaries and the FROM-scratch images tributary:VERSION-<arch> (saved in dist/).
	@GO=$(GO) VERSION=$(VERSION) scripts/release.sh build image

cluster-up: ## Local docker-compose cluster (deploy/compose): 3 coordinators, 3 edges, a load generator; builds the images, waits, queries c1.
	@GO=$(GO) scripts/cluster.sh up

cluster-down: ## Remove the docker-compose cluster: containers, network and volumes (CLUSTER_RMI=1: the images too).
	@GO=$(GO) scripts/cluster.sh down

.PHONY: charts
charts: ## Render the Helm charts and k3s manifests, decode every object strictly, helm lint --strict (charts/check, its own Go module).
	cd charts/check && $(GO) test -count=1 ./...

K8S_APISERVER := bin/k8stest/kube-apiserver
# The version the binaries report (GET /version, Helm's kubeVersion check):
# a build from the module cache has no git tree to take it from.
K8S_VERSION := v1.37.0
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
  -X k8s.io/component-base/version.gitTreeState=clean

.PHONY: k8s-test
k8s-test: $(K8S_APISERVER) ## Create the rendered charts and k3s manifests in a real kube-apiserver on etcd (not in make test; installs etcd-server).
	@scripts/deps.sh k8s
	cd charts/check && TRIBUTARY_KUBE_APISERVER=$(CURDIR)/$(K8S_APISERVER) \
	  $(GO) test -count=1 -timeout 15m -v ./apply/

# kube-apiserver from the k8s.io/kubernetes module pinned in charts/k8stest/apiserver.
$(K8S_APISERVER): charts/k8stest/apiserver/go.mod charts/k8stest/apiserver/go.sum charts/k8stest/apiserver/main.go
	@mkdir -p $(@D)
	cd charts/k8stest/apiserver && $(GO) build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $(CURDIR)/$@ .

K8S_COMPONENTS := kubelet kube-controller-manager kube-scheduler kube-proxy
K8S_COMPONENT_BINS := $(addprefix bin/k8stest/,$(K8S_COMPONENTS))

.PHONY: k8s-e2e
k8s-e2e: $(K8S_APISERVER) $(K8S_COMPONENT_BINS) bin/k8stest/pause bin/k8stest/loadgen ## A real single-node Kubernetes (kubelet, containerd, runc, CNI bridge, kube-proxy) runs the Helm chart: pods Ready, fleet view, rolling upgrade under load (ledger), scale 3->5->3, a lost claim; table + one JSON line. Needs root; installs its Debian packages.
	@scripts/deps.sh k8s-e2e
	@mkdir -p bin
	CGO_LDFLAGS="$(STATIC_CGO_LDFLAGS)" $(GO) build -tags netgo,osusergo \
	  -ldflags '$(LDFLAGS) -linkmode external -extldflags -static' -o $(E2E_STATIC_BIN) ./cmd/tributary
	cd charts/check && TRIBUTARY_K8S_BIN=$(CURDIR)/bin/k8stest \
	  TRIBUTARY_K8S_TRIBUTARY=$(CURDIR)/$(E2E_STATIC_BIN) \
	  TRIBUTARY_K8S_PAUSE=$(CURDIR)/bin/k8stest/pause TRIBUTARY_K8S_LOADGEN=$(CURDIR)/bin/k8stest/loadgen \
	  $(GO) test -count=1 -timeout 45m -v -run TestK8sE2E ./cluster/

# kubelet, kube-controller-manager, kube-scheduler and kube-proxy from the
# same k8s.io/kubernetes release (charts/k8stest/components).
K8S_COMPONENT_SRC := charts/k8stest/components/go.mod charts/k8stest/components/go.sum
$(K8S_COMPONENT_BINS): bin/k8stest/%: $(K8S_COMPONENT_SRC) charts/k8stest/components/%/main.go
	@mkdir -p $(@D)
	cd charts/k8stest/components && $(GO) build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $(CURDIR)/$@ ./$*

$(TSBS_BINS): bin/tsbs/%: bench/tsbs/go.mod bench/tsbs/go.sum
	@mkdir -p $(@D)
	cd bench/tsbs && $(GO) build -trimpath -o $(CURDIR)/$@ github.com/timescale/tsbs/cmd/$*

.PHONY: tsbs
tsbs: $(TSBS_BINS) ## Build TSBS's InfluxDB tools (generators, loader, query runner) into bin/tsbs from bench/tsbs's pinned module.

# The sandbox image's binary and the load generator pod's: static, no cgo.
bin/k8stest/pause: charts/k8stest/pause/go.mod charts/k8stest/pause/main.go
	@mkdir -p $(@D)
	cd charts/k8stest/pause && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/$@ .

bin/k8stest/loadgen: charts/k8stest/loadgen/go.mod charts/k8stest/loadgen/main.go
	@mkdir -p $(@D)
	cd charts/k8stest/loadgen && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/$@ .

clean: ## Remove build outputs.
	rm -rf bin dist
