package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// The names of the e2e installation.
const (
	namespace   = "tributary-e2e"
	release     = "trib"
	fullname    = "trib-tributary" // the chart's FULLNAME for release trib
	headless    = fullname + "-headless"
	edgeRelease = "edge"
	edgeName    = "edge-tributary-edge"
	tagA        = "k8se2e-a"
	tagB        = "k8se2e-b"
	zone        = "svc.cluster.local"
)

// env returns the environment variable or skips the test: make k8s-e2e
// sets them, make test does not.
func env(t *testing.T, k string) string {
	v := os.Getenv(k)
	if v == "" {
		t.Skipf("%s is not set (make k8s-e2e runs this test)", k)
	}
	return v
}

// TestK8sE2E installs the coordinator chart and the edge chart with the
// Helm SDK on a real single-node cluster and runs the scenarios of
// make k8s-e2e: every pod Ready through its probes, the fleet view (3
// voters and the edge), a rolling upgrade of the StatefulSet to a new
// image tag under load with the ledger checked, a scale 3 -> 5 -> 3 with
// auto-join and auto-leave, and the loss of a coordinator's pod and claim.
// It prints a table and one JSON line.
func TestK8sE2E(t *testing.T) {
	binDir := env(t, "TRIBUTARY_K8S_BIN")
	tributaryBin := env(t, "TRIBUTARY_K8S_TRIBUTARY")
	pauseBin := env(t, "TRIBUTARY_K8S_PAUSE")
	loadgenBin := env(t, "TRIBUTARY_K8S_LOADGEN")
	if os.Geteuid() != 0 {
		t.Fatal("make k8s-e2e needs root (containerd, runc, the bridge, mounts)")
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "tributary-k8se2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	log := &testLog{t: t}

	specs := []ImageSpec{
		{Tag: "tributary:" + tagA, Dockerfile: filepath.Join(repo, "deploy", "Dockerfile"),
			Files: map[string]string{"tributary-linux-amd64": tributaryBin}, Dirs: []string{"data"},
			BuildArgs: map[string]string{"VERSION": tagA}},
		{Tag: "tributary:" + tagB, Dockerfile: filepath.Join(repo, "deploy", "Dockerfile"),
			Files: map[string]string{"tributary-linux-amd64": tributaryBin}, Dirs: []string{"data"},
			BuildArgs: map[string]string{"VERSION": tagB}},
		{Tag: PauseImage, Files: map[string]string{"pause": pauseBin},
			Inline: "FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT [\"/pause\"]\n"},
		{Tag: LoadgenImage, Files: map[string]string{"loadgen": loadgenBin},
			Inline: "FROM scratch\nCOPY loadgen /loadgen\nUSER 65532:65532\nENTRYPOINT [\"/loadgen\"]\n"},
	}
	t0 := time.Now()
	archive, err := BuildImages(ctx, filepath.Join(work, "images"), log, specs)
	defer func() {
		if err := RemoveImages(specs); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	buildS := time.Since(t0).Seconds()

	t0 = time.Now()
	c, err := Start(ctx, Options{BinDir: binDir, Dir: filepath.Join(work, "cluster"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, n := range []string{"kubelet", "containerd", "kube-proxy", "kube-controller-manager"} {
				t.Logf("--- %s log tail:\n%s", n, c.LogTail(n, 40))
			}
		}
		if errs := c.Stop(); len(errs) > 0 {
			t.Errorf("teardown left something behind: %v", errs)
		}
		checkTornDown(t)
	}()
	// Interrupted (make k8s-e2e stopped with ^C or killed with SIGTERM):
	// tear down before exiting, since deferred calls would not run.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			fmt.Fprintln(os.Stderr, "k8s-e2e: interrupted: tearing down")
			c.Stop()
			RemoveImages(specs)
			os.RemoveAll(work)
			os.Exit(2)
		}
	}()
	if err := c.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
	clusterS := time.Since(t0).Seconds()
	t.Logf("cluster up in %.1fs (images built in %.1fs)", clusterS, buildS)

	s := &scenario{t: t, c: c, ctx: ctx, repo: repo}
	s.run()
}

// scenario holds the state shared by the steps.
type scenario struct {
	t    *testing.T
	c    *Cluster
	ctx  context.Context
	repo string

	ca      *CA
	tlsConf *tls.Config
	helm    *action.Configuration
	chart   *chart.Chart
	vals    map[string]any

	rows []row
	res  map[string]any
}

type row struct{ what, figure string }

func (s *scenario) add(what, format string, a ...any) {
	s.rows = append(s.rows, row{what, fmt.Sprintf(format, a...)})
	s.t.Logf("%s: %s", what, fmt.Sprintf(format, a...))
}

func (s *scenario) fatal(format string, a ...any) {
	s.t.Helper()
	s.dumpPods()
	s.t.Fatalf(format, a...)
}

func (s *scenario) run() {
	s.res = map[string]any{}
	// The table and the JSON line also come out when a step fails (a
	// failing step ends the test through runtime.Goexit, which runs this).
	defer s.report()
	s.setup()
	s.install()
	s.fleetView(3)
	s.rollingUpgrade()
	s.scale()
	s.loseDisk()
}

// setup creates the namespace, the CA, the coordinators' Secret, the
// edge's certificate directory and data directory on the node, and the
// Helm configuration.
func (s *scenario) setup() {
	t, ctx, cs := s.t, s.ctx, s.c.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("tributary k8s-e2e ca")
	if err != nil {
		t.Fatal(err)
	}
	s.ca = ca
	// One certificate naming every pod the StatefulSet can have (0..9),
	// short and by its DNS name, and the Services edges and clients dial.
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("%s-%d", fullname, i), fmt.Sprintf("%s-%d.%s.%s.%s", fullname, i, headless, namespace, zone))
	}
	for _, svc := range []string{fullname, fullname + "-intake"} {
		names = append(names, svc+"."+namespace+"."+zone, svc+"."+namespace+".svc")
	}
	crt, key, err := ca.Issue(names...)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "coordinator-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM},
	}
	if _, err := cs.CoreV1().Secrets(namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caSec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2e-ca"}, Data: map[string][]byte{"ca.crt": ca.PEM}}
	if _, err := cs.CoreV1().Secrets(namespace).Create(ctx, caSec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The edge's provisioned certificate: first DNS SAN = the node name.
	ecrt, ekey, err := ca.Issue(s.c.NodeName, edgeName+"."+namespace+"."+zone)
	if err != nil {
		t.Fatal(err)
	}
	certDir, dataDir := s.c.path("edge", "tls"), s.c.path("edge", "data")
	for _, d := range []string{certDir, dataDir} {
		must(t, os.MkdirAll(d, 0o750))
		must(t, os.Chown(d, 65532, 65532))
	}
	for name, f := range map[string]struct {
		data []byte
		mode os.FileMode
	}{"tls.crt": {ecrt, 0o444}, "tls.key": {ekey, 0o400}, "ca.crt": {ca.PEM, 0o444}} {
		p := filepath.Join(certDir, name)
		must(t, os.WriteFile(p, f.data, f.mode))
		must(t, os.Chown(p, 65532, 65532))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	s.tlsConf = &tls.Config{RootCAs: pool, ServerName: fullname + "-0"}

	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := s.c.Kubeconfig, namespace
	flags.KubeConfig, flags.Namespace = &kc, &ns
	s.helm = new(action.Configuration)
	if err := s.helm.Init(flags, namespace, "secret", func(format string, v ...any) {}); err != nil {
		t.Fatal(err)
	}
	if s.chart, err = loader.Load(filepath.Join(s.repo, "charts", "tributary")); err != nil {
		t.Fatal(err)
	}
}

// coordinatorValues are the chart values of the e2e install: what a user
// of a one-node cluster sets (no anti-affinity, small requests, the
// pre-created volumes), TLS from a Secret, and short auto-leave and
// probe periods so that the scenarios take minutes.
func coordinatorValues(tag string) map[string]any {
	return map[string]any{
		"image":             map[string]any{"repository": "tributary", "tag": tag, "pullPolicy": "Never"},
		"replicas":          3,
		"bootstrapReplicas": 3,
		"autoLeave":         map[string]any{"enabled": true, "after": "20s"},
		"tls":               map[string]any{"enabled": true, "secretName": "coordinator-tls", "allowSharedCA": true},
		"persistence":       map[string]any{"enabled": true, "storageClass": StorageClass, "size": "1Gi"},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "50m", "memory": "128Mi"},
			"limits":   map[string]any{"memory": "1Gi"},
		},
		"replicaStore":                  map[string]any{"headMaxBytes": 33554432, "blockCacheBytes": 33554432},
		"podAntiAffinity":               "none",
		"shutdownGrace":                 "10s",
		"terminationGracePeriodSeconds": 30,
		"probes": map[string]any{
			"liveness":  map[string]any{"initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
			"readiness": map[string]any{"initialDelaySeconds": 2, "periodSeconds": 2, "timeoutSeconds": 5, "failureThreshold": 3},
		},
	}
}

// install installs the coordinators (helm install --wait), then the edge
// chart and the load generator pod.
func (s *scenario) install() {
	t := s.t
	inst := action.NewInstall(s.helm)
	inst.ReleaseName, inst.Namespace = release, namespace
	inst.Wait, inst.Timeout = true, 10*time.Minute
	s.vals = coordinatorValues(tagA)
	t0 := time.Now()
	if _, err := inst.RunWithContext(s.ctx, s.chart, s.vals); err != nil {
		s.fatal("helm install %s: %v", release, err)
	}
	s.waitReady("app.kubernetes.io/instance="+release, 3, time.Minute)
	ready := time.Since(t0).Seconds()
	s.res["pods_ready_s"] = round1(ready)
	s.add("helm install, 3 coordinators Ready", "%.1f s", ready)

	edgeChart, err := loader.Load(filepath.Join(s.repo, "k3s", "tributary-edge"))
	if err != nil {
		t.Fatal(err)
	}
	einst := action.NewInstall(s.helm)
	einst.ReleaseName, einst.Namespace = edgeRelease, namespace
	einst.Wait, einst.Timeout = true, 5*time.Minute
	evals := map[string]any{
		"images":          map[string]any{"amd64": "tributary:" + tagA, "arm64": nil, "arm": nil},
		"imagePullPolicy": "Never",
		"coordinators":    []any{fullname + "-intake." + namespace + "." + zone + ":7443"},
		"certDir":         s.c.path("edge", "tls"),
		"dataDir":         s.c.path("edge", "data"),
		"hostNetwork":     false,
		"node":            map[string]any{"walSync": "always"},
	}
	t0 = time.Now()
	if _, err := einst.RunWithContext(s.ctx, edgeChart, evals); err != nil {
		s.fatal("helm install %s: %v", edgeRelease, err)
	}
	// NB: helm's --wait counts a DaemonSet as ready when no more pods than
	// its maxUnavailable (1) are unready, so with one node it returns
	// before the edge pod is Ready; until then the edge Service has no
	// endpoint and kube-proxy refuses connections to it (the load
	// generator's first writes were refused so, before the upgrade began).
	s.waitReady("app.kubernetes.io/instance="+edgeRelease, 1, 2*time.Minute)
	s.add("helm install edge chart, DaemonSet pod Ready", "%.1f s", time.Since(t0).Seconds())
}

// waitReady waits until exactly n pods match selector, none terminating,
// all Ready.
func (s *scenario) waitReady(selector string, n int, timeout time.Duration) []corev1.Pod {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		pods, err := s.c.Client.CoreV1().Pods(namespace).List(s.ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			ready := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && podReady(&p) {
					ready++
				}
			}
			if ready == n && len(pods.Items) == n {
				return pods.Items
			}
			last = fmt.Sprintf("%d pods, %d ready", len(pods.Items), ready)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			s.fatal("%s: want %d Ready pods after %s: %s", selector, n, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fleet is the part of GET /api/v1/fleet the scenarios read.
type fleet struct {
	Raft struct {
		Leader   uint64   `json:"leader"`
		Voters   []uint64 `json:"voters"`
		Learners []uint64 `json:"learners"`
	} `json:"raft"`
	Nodes []struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	} `json:"nodes"`
}

// coordinatorIP returns the address of a Ready coordinator pod.
func (s *scenario) coordinatorIP() (string, error) {
	pods, err := s.c.Client.CoreV1().Pods(namespace).List(s.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		return "", err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
	}
	return "", fmt.Errorf("no Ready coordinator pod")
}

func (s *scenario) httpClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: s.tlsConf}}
}

func (s *scenario) getJSON(path string, into any) error {
	ip, err := s.coordinatorIP()
	if err != nil {
		return err
	}
	resp, err := s.httpClient().Get("https://" + ip + ":7071" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, into)
}

// waitFleet waits until the fleet view shows voters voters, no learners
// and at least one edge, and returns the time it took.
func (s *scenario) waitFleet(voters int, timeout time.Duration) (fleet, time.Duration) {
	s.t.Helper()
	t0 := time.Now()
	var f fleet
	var last string
	for {
		f = fleet{}
		err := s.getJSON("/api/v1/fleet", &f)
		if err == nil {
			if len(f.Raft.Voters) == voters && len(f.Raft.Learners) == 0 && f.edges() >= 1 && f.Raft.Leader != 0 {
				return f, time.Since(t0)
			}
			last = fmt.Sprintf("voters %v learners %v leader %d edges %d", f.Raft.Voters, f.Raft.Learners, f.Raft.Leader, f.edges())
		} else {
			last = err.Error()
		}
		if time.Since(t0) > timeout {
			s.fatal("fleet view: want %d voters and the edge after %s: %s", voters, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

func (f fleet) edges() int {
	n := 0
	for _, x := range f.Nodes {
		if x.Role == "edge" {
			n++
		}
	}
	return n
}

func (s *scenario) fleetView(voters int) {
	f, d := s.waitFleet(voters, 3*time.Minute)
	s.add("fleet view", "%d voters %v, leader %d, %d edge(s), after %.1f s", len(f.Raft.Voters), f.Raft.Voters, f.Raft.Leader, f.edges(), d.Seconds())
}

// startLoad creates the load generator pod, writing to the edge through
// the edge chart's Service over TLS, and returns its address.
func (s *scenario) startLoad() string {
	url := fmt.Sprintf("https://%s.%s.%s:7071/api/v2/write?bucket=e2e&precision=ms", edgeName, namespace, zone)
	nonRoot, noToken, uid := true, false, int64(65532)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loadgen", Labels: map[string]string{"app": "loadgen"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &noToken,
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name:            "loadgen",
				Image:           LoadgenImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"-url", url, "-ca", "/ca/ca.crt", "-server-name", s.c.NodeName, "-series", "10", "-tick", "100ms"},
				Ports:           []corev1.ContainerPort{{Name: "ledger", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 2},
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/ca", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "e2e-ca"}}}},
		},
	}
	if _, err := s.c.Client.CoreV1().Pods(namespace).Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
		s.fatal("create load generator: %v", err)
	}
	pods := s.waitReady("app=loadgen", 1, 2*time.Minute)
	return "http://" + pods[0].Status.PodIP + ":8080"
}

// loadLedger is the load generator's GET /ledger.
type loadLedger struct {
	Acked    map[string][]int64 `json:"acked"`
	InDoubt  map[string][]int64 `json:"in_doubt"`
	Requests int                `json:"requests"`
	Failed   int                `json:"failed"`
	LastErr  string             `json:"last_error"`
	Errors   map[string]int     `json:"errors"`
}

func (l *loadLedger) points(m map[string][]int64) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// rollingUpgrade upgrades the release to a new image tag (helm upgrade
// --wait, the StatefulSet rolls pod by pod) while the load generator
// writes, then checks every acknowledged point against the coordinators.
func (s *scenario) rollingUpgrade() {
	lg := s.startLoad()
	time.Sleep(15 * time.Second) // load before the roll
	up := action.NewUpgrade(s.helm)
	up.Namespace, up.Wait, up.Timeout = namespace, true, 10*time.Minute
	s.vals = coordinatorValues(tagB)
	t0 := time.Now()
	if _, err := up.RunWithContext(s.ctx, release, s.chart, s.vals); err != nil {
		s.fatal("helm upgrade to %s: %v", tagB, err)
	}
	pods := s.waitReady("app.kubernetes.io/instance="+release, 3, 2*time.Minute)
	for _, p := range pods {
		if img := p.Spec.Containers[0].Image; img != "tributary:"+tagB {
			s.fatal("pod %s runs %s after the upgrade", p.Name, img)
		}
	}
	roll := time.Since(t0).Seconds()
	time.Sleep(15 * time.Second) // load after the roll
	resp, err := http.Post(lg+"/stop", "text/plain", nil)
	if err != nil {
		s.fatal("stop load generator: %v", err)
	}
	resp.Body.Close()
	var led loadLedger
	if err := getPlainJSON(lg+"/ledger", &led); err != nil {
		s.fatal("read ledger: %v", err)
	}
	acked, doubt := led.points(led.Acked), led.points(led.InDoubt)
	if acked == 0 {
		s.fatal("load generator got no write acknowledged (%d requests, last error %q)", led.Requests, led.LastErr)
	}
	// The edge ships its WAL to the coordinators in the background: wait
	// until they hold every acknowledged point, or report what is missing.
	t1 := time.Now()
	var lost, dup, phantom, wrong int
	for {
		lost, dup, phantom, wrong, err = s.checkLedger(&led)
		if err == nil && lost == 0 {
			break
		}
		if time.Since(t1) > 4*time.Minute {
			if err != nil {
				s.fatal("query the coordinators: %v", err)
			}
			break
		}
		time.Sleep(3 * time.Second)
	}
	s.res["rolling_upgrade_s"] = round1(roll)
	s.res["rolling_upgrade_lost"] = lost
	s.res["rolling_upgrade_duplicated"] = dup
	s.res["rolling_upgrade_acked"] = acked
	s.add("rolling upgrade "+tagA+" -> "+tagB+" under load", "%.1f s; %d points acknowledged, %d in doubt (%d of %d requests failed)", roll, acked, doubt, led.Failed, led.Requests)
	if led.Failed > 0 {
		for msg, n := range led.Errors {
			s.t.Logf("load generator: %d writes failed with: %s", n, msg)
		}
		s.t.Logf("--- load generator log (when each write failed):\n%s", s.c.PodLog(namespace, "loadgen", 40))
		s.t.Logf("--- pods and restarts after the upgrade:\n%s", s.podSummary())
	}
	s.add("ledger vs coordinators", "lost %d, duplicated %d, phantom %d, wrong value %d (caught up %.1f s after the load stopped)", lost, dup, phantom, wrong, time.Since(t1).Seconds())
	if lost != 0 || dup != 0 || phantom != 0 || wrong != 0 {
		s.t.Errorf("rolling upgrade: lost %d, duplicated %d, phantom %d, wrong %d", lost, dup, phantom, wrong)
	}
}

func getPlainJSON(u string, into any) error {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// checkLedger reads every load point back from a coordinator (a PromQL
// range selector returns the raw samples) and compares with the ledger:
// lost = acknowledged and absent; duplicated = a (series, timestamp)
// answered twice; phantom = answered but never written; wrong = a value
// that is not the timestamp it was written with.
func (s *scenario) checkLedger(led *loadLedger) (lost, dup, phantom, wrong int, err error) {
	var oldest int64 = math.MaxInt64
	for _, ts := range led.Acked {
		for _, t := range ts {
			oldest = min(oldest, t)
		}
	}
	window := time.Since(time.UnixMilli(oldest)) + 2*time.Minute
	q := url.Values{}
	q.Set("query", fmt.Sprintf(`{__name__=~"k8se2e.*"}[%ds]`, int(window.Seconds())))
	q.Set("time", strconv.FormatInt(time.Now().Unix(), 10))
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := s.getJSON("/api/v1/query?"+q.Encode(), &out); err != nil {
		return 0, 0, 0, 0, err
	}
	seen := map[string]map[int64]int{}
	for _, r := range out.Data.Result {
		series := r.Metric["series"]
		if seen[series] == nil {
			seen[series] = map[int64]int{}
		}
		for _, v := range r.Values {
			sec, _ := v[0].(float64)
			ms := int64(math.Round(sec * 1000))
			seen[series][ms]++
			str, _ := v[1].(string)
			if val, perr := strconv.ParseFloat(str, 64); perr != nil || int64(val) != ms {
				wrong++
			}
		}
	}
	written := map[string]map[int64]bool{}
	for _, m := range []map[string][]int64{led.Acked, led.InDoubt} {
		for series, ts := range m {
			if written[series] == nil {
				written[series] = map[int64]bool{}
			}
			for _, t := range ts {
				written[series][t] = true
			}
		}
	}
	for series, ts := range led.Acked {
		for _, t := range ts {
			if seen[series][t] == 0 {
				lost++
			}
		}
	}
	for series, m := range seen {
		for t, n := range m {
			if n > 1 {
				dup += n - 1
			}
			if !written[series][t] {
				phantom++
			}
		}
	}
	return lost, dup, phantom, wrong, nil
}

// scale scales the coordinators 3 -> 5 -> 3 the way `kubectl scale`
// does: through the StatefulSet's scale subresource, which leaves the pod
// template (and the Helm release) alone. The pods read the count from the
// API with their ServiceAccount (--expected-members-from-statefulset,
// allowed by the chart's Role): the new pods join raft by themselves
// (--auto-join) once the count reaches them, and after the scale-down the
// leader removes the members whose pods are gone (--auto-leave-after).
func (s *scenario) scale() {
	sts := s.c.Client.AppsV1().StatefulSets(namespace)
	kubectlScale := func(n int32) {
		sc, err := sts.GetScale(s.ctx, fullname, metav1.GetOptions{})
		if err != nil {
			s.fatal("get the scale of statefulset %s: %v", fullname, err)
		}
		sc.Spec.Replicas = n
		if _, err := sts.UpdateScale(s.ctx, fullname, sc, metav1.UpdateOptions{}); err != nil {
			s.fatal("scale statefulset %s to %d: %v", fullname, n, err)
		}
	}
	s.checkServiceAccount()
	before, err := sts.Get(s.ctx, fullname, metav1.GetOptions{})
	if err != nil {
		s.fatal("get statefulset %s: %v", fullname, err)
	}
	t0 := time.Now()
	kubectlScale(5)
	s.waitReady("app.kubernetes.io/instance="+release, 5, 5*time.Minute)
	f, _ := s.waitFleet(5, 3*time.Minute)
	up := time.Since(t0).Seconds()
	s.res["scale_up_s"] = round1(up)
	s.add("scale 3 -> 5 (kubectl scale; pods Ready, 5 voters)", "%.1f s, voters %v", up, f.Raft.Voters)

	t0 = time.Now()
	kubectlScale(3)
	s.waitReady("app.kubernetes.io/instance="+release, 3, 3*time.Minute)
	f, _ = s.waitFleet(3, 3*time.Minute)
	down := time.Since(t0).Seconds()
	s.res["scale_down_s"] = round1(down)
	s.add("scale 5 -> 3 (kubectl scale; pods gone, 3 voters)", "%.1f s, voters %v (auto-leave after 20s)", down, f.Raft.Voters)
	s.checkExpectedReads(3)
	// The scale subresource changed no pod template: pods 0..2 never
	// restarted.
	after, err := sts.Get(s.ctx, fullname, metav1.GetOptions{})
	if err != nil {
		s.fatal("get statefulset %s: %v", fullname, err)
	}
	if after.Status.UpdateRevision != before.Status.UpdateRevision {
		s.t.Errorf("kubectl scale rolled the pods: revision %s -> %s", before.Status.UpdateRevision, after.Status.UpdateRevision)
	}
}

// checkExpectedReads scrapes /metrics of every coordinator pod: the leader
// must have read the replica count n from the API, and no read may have
// failed (the ServiceAccount's token and Role work).
func (s *scenario) checkExpectedReads(n int) {
	pods, err := s.c.Client.CoreV1().Pods(namespace).List(s.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		s.fatal("list coordinator pods: %v", err)
	}
	var ok, failed, sawN int
	for _, p := range pods.Items {
		resp, err := s.httpClient().Get("https://" + p.Status.PodIP + ":7071/metrics")
		if err != nil {
			s.fatal("GET /metrics of %s: %v", p.Name, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			name, val, found := strings.Cut(line, " ")
			v, perr := strconv.ParseFloat(val, 64)
			if !found || perr != nil {
				continue
			}
			switch name {
			case `tributary_membership_expected_reads_total{result="ok"}`:
				ok += int(v)
			case `tributary_membership_expected_reads_total{result="error"}`:
				failed += int(v)
			case "tributary_membership_expected_members":
				if int(v) == n {
					sawN++
				}
			}
		}
	}
	s.add("replica count reads (/metrics of the coordinators)", "%d ok, %d failed; %d pod(s) last read %d", ok, failed, sawN, n)
	if ok == 0 || failed != 0 || sawN == 0 {
		s.t.Errorf("reads of the replica count: %d ok, %d failed, %d pods last read %d: want some, none failed, the leader at %d", ok, failed, sawN, n, n)
	}
}

// checkServiceAccount asks the API server (RBAC) what the coordinators'
// ServiceAccount may do: get its StatefulSet's scale, and not change it,
// read another StatefulSet's, or read a Secret.
func (s *scenario) checkServiceAccount() {
	user := "system:serviceaccount:" + namespace + ":" + fullname
	for _, c := range []struct {
		verb, group, resource, sub, name string
		want                             bool
	}{
		{"get", "apps", "statefulsets", "scale", fullname, true},
		{"get", "apps", "statefulsets", "", fullname, true},
		{"update", "apps", "statefulsets", "scale", fullname, false},
		{"get", "apps", "statefulsets", "scale", "another", false},
		{"get", "", "secrets", "", "coordinator-tls", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: c.verb, Group: c.group,
				Resource: c.resource, Subresource: c.sub, Name: c.name},
		}}
		got, err := s.c.Client.AuthorizationV1().SubjectAccessReviews().Create(s.ctx, sar, metav1.CreateOptions{})
		if err != nil {
			s.fatal("subject access review: %v", err)
		}
		if got.Status.Allowed != c.want {
			s.t.Errorf("%s may %s %s/%s %s: %v, want %v (%s)", user, c.verb, c.resource, c.sub, c.name, got.Status.Allowed, c.want, got.Status.Reason)
		}
	}
	s.add("coordinators' ServiceAccount under RBAC", "may get statefulsets/scale %s; may not update it, get another's, or get a Secret", fullname)
}

// loseDisk deletes coordinator pod 2 together with its claim: the
// StatefulSet recreates both, the new pod starts on an empty volume and
// rejoins under a new raft id (--rejoin).
func (s *scenario) loseDisk() {
	pods, pvcs := s.c.Client.CoreV1().Pods(namespace), s.c.Client.CoreV1().PersistentVolumeClaims(namespace)
	pod, claim := fullname+"-2", "data-"+fullname+"-2"
	old, err := pvcs.Get(s.ctx, claim, metav1.GetOptions{})
	if err != nil {
		s.fatal("get claim %s: %v", claim, err)
	}
	before := fleet{}
	_ = s.getJSON("/api/v1/fleet", &before)
	t0 := time.Now()
	if err := pvcs.Delete(s.ctx, claim, metav1.DeleteOptions{}); err != nil {
		s.fatal("delete claim: %v", err)
	}
	if err := pods.Delete(s.ctx, pod, metav1.DeleteOptions{}); err != nil {
		s.fatal("delete pod: %v", err)
	}
	// The recreated pod can race the claim's removal and find the old,
	// terminating claim; deleting the pod again is the documented remedy.
	retried := false
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pvc, err := pvcs.Get(s.ctx, claim, metav1.GetOptions{})
		if err == nil && pvc.UID != old.UID && pvc.Status.Phase == corev1.ClaimBound {
			break
		}
		p, perr := pods.Get(s.ctx, pod, metav1.GetOptions{})
		if !retried && perr == nil && p.Status.Phase == corev1.PodPending && time.Since(t0) > 45*time.Second {
			_ = pods.Delete(s.ctx, pod, metav1.DeleteOptions{})
			retried = true
		}
		if time.Now().After(deadline) {
			s.fatal("claim %s not recreated and bound in 5m", claim)
		}
		time.Sleep(time.Second)
	}
	bound := time.Since(t0).Seconds()
	s.waitReady("app.kubernetes.io/instance="+release, 3, 5*time.Minute)
	ready := time.Since(t0).Seconds()
	f, _ := s.waitFleet(3, 4*time.Minute)
	d := time.Since(t0).Seconds()
	s.res["disk_loss_recovered_s"] = round1(d)
	s.add("delete pod 2 and its claim (rejoin on a new volume)", "%.1f s (new claim bound %.1f s, pods Ready %.1f s); voters %v -> %v",
		d, bound, ready, before.Raft.Voters, f.Raft.Voters)
}

func (s *scenario) report() {
	w := 0
	for _, r := range s.rows {
		w = max(w, len(r.what))
	}
	fmt.Printf("\n%-*s  %s\n", w, "k8s-e2e scenario", "result")
	fmt.Printf("%s  %s\n", strings.Repeat("-", w), strings.Repeat("-", 40))
	for _, r := range s.rows {
		fmt.Printf("%-*s  %s\n", w, r.what, r.figure)
	}
	js, _ := json.Marshal(s.res)
	fmt.Printf("%s\n", js)
}

// dumpPods logs the pods' state and logs when a step fails.
func (s *scenario) dumpPods() {
	pods, err := s.c.Client.CoreV1().Pods(namespace).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		var st []string
		for _, cs := range p.Status.ContainerStatuses {
			st = append(st, fmt.Sprintf("%s ready=%v restarts=%d state=%+v", cs.Name, cs.Ready, cs.RestartCount, cs.State))
		}
		s.t.Logf("pod %s phase %s ip %s %v", p.Name, p.Status.Phase, p.Status.PodIP, st)
		s.t.Logf("%s", s.c.PodLog(namespace, p.Name, 15))
	}
	evs, err := s.c.Client.CoreV1().Events(namespace).List(s.ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeNormal {
				s.t.Logf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

// checkTornDown fails the test if anything the cluster created survived
// Stop: the bridge, the FORWARD rules, kube-proxy's tables, the kubepods
// cgroups.
func checkTornDown(t *testing.T) {
	if _, err := os.Stat("/sys/class/net/trib-e2e0"); err == nil {
		t.Errorf("teardown: bridge trib-e2e0 still exists")
	}
	if out, err := exec.Command("iptables", "-S", "FORWARD").Output(); err == nil && strings.Contains(string(out), "tributary k8s-e2e") {
		t.Errorf("teardown: FORWARD rules left:\n%s", out)
	}
	if exec.Command("nft", "list", "table", "ip", "kube-proxy").Run() == nil {
		t.Errorf("teardown: nftables table ip kube-proxy left")
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods"); len(left) > 0 {
		t.Errorf("teardown: cgroups left: %v", left)
	}
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testLog sends the cluster's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// podSummary lists the pods with their restarts and readiness, and the
// events that are not Normal, for a report.
func (s *scenario) podSummary() string {
	var b strings.Builder
	pods, err := s.c.Client.CoreV1().Pods(namespace).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "pod %s: ready %v, restarts %d, started %v\n", p.Name, cs.Ready, cs.RestartCount, p.Status.StartTime)
		}
	}
	evs, err := s.c.Client.CoreV1().Events(namespace).List(s.ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeNormal || strings.HasPrefix(e.InvolvedObject.Name, edgeName) {
				fmt.Fprintf(&b, "event %s %s %s: %s\n", e.LastTimestamp.Format("15:04:05"), e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}
