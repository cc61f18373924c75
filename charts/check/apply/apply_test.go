package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/charts/check"
	"sigs.k8s.io/yaml"
)

const (
	coordinatorChart = "../../tributary"
	edgeChart        = "../../../k3s/tributary-edge"
	k3sManifests     = "../../../k3s/manifests"
)

// The one API server of this test binary, started by the first test that
// needs it and stopped by TestMain.
var (
	srvOnce sync.Once
	srv     *Server
	srvErr  error
	srvDir  string
	// srvErrShown is set once srvErr, with its long log tail, was reported.
	srvErrShown atomic.Bool
)

func TestMain(m *testing.M) {
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	if srvDir != "" {
		os.RemoveAll(srvDir)
	}
	os.Exit(code)
}

// server returns the running API server, starting it (with the CRD
// fixtures installed) on first use. It skips the test when
// TRIBUTARY_KUBE_APISERVER is unset: make k8s-test sets it.
func server(t *testing.T) *Server {
	t.Helper()
	bin := os.Getenv("TRIBUTARY_KUBE_APISERVER")
	if bin == "" {
		t.Skip("TRIBUTARY_KUBE_APISERVER is not set; make k8s-test builds kube-apiserver and runs these tests")
	}
	srvOnce.Do(func() {
		var err error
		if srvDir, err = os.MkdirTemp("", "tributary-k8s-test-"); err != nil {
			srvErr = err
			return
		}
		logPath := filepath.Join(srvDir, "servers.log")
		log, err := os.Create(logPath)
		if err != nil {
			srvErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		srv, srvErr = Start(ctx, Options{APIServer: bin, Etcd: os.Getenv("TRIBUTARY_ETCD"), Dir: srvDir, Log: log})
		if srvErr != nil {
			tail, _ := os.ReadFile(logPath)
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			srvErr = fmt.Errorf("%w\nlast output of etcd and kube-apiserver:\n%s", srvErr, tail)
			return
		}
		fmt.Printf("k8s-test: etcd and kube-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))
		crds, err := filepath.Glob("testdata/crds/*.yaml")
		if err == nil && len(crds) == 0 {
			err = fmt.Errorf("no CRD fixture in testdata/crds")
		}
		if err == nil {
			err = srv.InstallCRDs(ctx, crds...)
		}
		srvErr = err
	})
	if srvErr != nil {
		if srvErrShown.Swap(true) {
			t.Fatal("the API server did not start: see the first failure")
		}
		t.Fatal(srvErr)
	}
	return srv
}

// createAll creates every object in namespace ns (created first) and
// reports each rejection as a test error.
func createAll(t *testing.T, s *Server, ns string, objs []check.Object) {
	t.Helper()
	ctx := context.Background()
	if err := s.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	for _, o := range objs {
		if err := s.Create(ctx, ns, o.Raw); err != nil {
			t.Errorf("%s: %v", o.Source, err)
		}
	}
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// coordinatorCases are the value sets the coordinator chart is applied
// with: every template is rendered by at least one of them.
func coordinatorCases(t *testing.T) map[string]map[string]any {
	return map[string]map[string]any{
		"defaults":  {"tls": map[string]any{"secretName": "tributary-tls", "edgeCASecretName": "tributary-edge-ca"}},
		"plaintext": {"tls": map[string]any{"enabled": false}},
		"cert-manager": {"tls": map[string]any{"edgeCASecretName": "tributary-edge-ca", "certManager": map[string]any{
			"enabled": true, "issuerRef": map[string]any{"name": "tributary-ca"}}}, "serviceMonitor": map[string]any{"enabled": true}},
		"scaled": {"tls": map[string]any{"enabled": false}, "replicas": 5, "bootstrapReplicas": 3},
		"ha":     readValues(t, filepath.Join(coordinatorChart, "ci/ha-values.yaml")),
	}
}

func TestCoordinatorChart_AppliesToAPIServer(t *testing.T) {
	s := server(t)
	for name, values := range coordinatorCases(t) {
		t.Run(name, func(t *testing.T) {
			ns := "coordinators-" + name
			objs, err := check.Render(coordinatorChart, values, check.RenderOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			createAll(t, s, ns, objs)
		})
	}
}

func TestEdgeChart_AppliesToAPIServer(t *testing.T) {
	s := server(t)
	// The values the auto-deploy HelmChart hands to the chart.
	manifests, err := check.ReadManifests(k3sManifests)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]map[string]any{
		"defaults": nil,
		"host-network": {"hostNetwork": true, "images": map[string]any{"arm": nil},
			"coordinators": []any{"a:7443", "b:7443"}, "listenTLS": false},
	}
	for _, m := range manifests {
		if hc, ok := m.Obj.(*check.HelmChart); ok {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(hc.Spec.ValuesContent), &v); err != nil {
				t.Fatalf("%s valuesContent: %v", m.Source, err)
			}
			cases["helmchart-"+m.Name] = v
		}
	}
	if len(cases) < 3 {
		t.Fatal("no HelmChart in the k3s manifests")
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			ns := "edge-" + name
			objs, err := check.Render(edgeChart, values, check.RenderOptions{ReleaseName: "tributary-edge", Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			createAll(t, s, ns, objs)
		})
	}
}

func TestK3sManifests_ApplyToAPIServer(t *testing.T) {
	s := server(t)
	objs, err := check.ReadManifests(k3sManifests)
	if err != nil {
		t.Fatal(err)
	}
	createAll(t, s, "k3s-manifests", objs)
}

// TestAPIServer_RejectsWrongObjects proves the check can fail: rendered
// objects with one deliberate mistake each, of the kinds the strict decoder
// of charts/check would not see (values out of range, broken references)
// and of the kinds it would, must be refused by the API server with a
// message naming the mistake.
func TestAPIServer_RejectsWrongObjects(t *testing.T) {
	s := server(t)
	objs, err := check.Render(coordinatorChart, coordinatorCases(t)["cert-manager"], check.RenderOptions{Namespace: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	edge, err := check.ReadManifests(k3sManifests)
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, edge...)
	byKind := map[string]check.Object{}
	for _, o := range objs {
		if _, ok := byKind[o.GVK.Kind]; !ok {
			byKind[o.GVK.Kind] = o
		}
	}
	type path = []any
	cases := []struct {
		name, kind string
		edit       func(obj map[string]any)
		want       string
	}{
		{"unknown field", "StatefulSet", func(o map[string]any) { set(t, o, path{"spec", "replica"}, 3) }, `unknown field "spec.replica"`},
		{"field in the wrong case", "StatefulSet", func(o map[string]any) {
			c := get(t, o, path{"spec", "template", "spec", "containers", 0}).(map[string]any)
			c["Args"] = c["args"]
			delete(c, "args")
		}, `unknown field "spec.template.spec.containers[0].Args"`},
		{"port out of range", "StatefulSet", func(o map[string]any) {
			set(t, o, path{"spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"}, 70000)
		}, "containerPort: Invalid value: 70000"},
		{"selector not matching the pods", "StatefulSet", func(o map[string]any) {
			set(t, o, path{"spec", "selector", "matchLabels"}, map[string]any{"app": "other"})
		}, "`selector` does not match template `labels`"},
		{"volume mount of no volume", "StatefulSet", func(o map[string]any) {
			set(t, o, path{"spec", "template", "spec", "containers", 0, "volumeMounts", 0, "name"}, "nosuchvolume")
		}, "volumeMounts[0].name: Not found"},
		{"service port name not a DNS label", "Service", func(o map[string]any) {
			set(t, o, path{"spec", "ports", 0, "name"}, "Grpc_Port")
		}, "spec.ports[0].name: Invalid value"},
		{"pdb with two budgets", "PodDisruptionBudget", func(o map[string]any) {
			set(t, o, path{"spec", "maxUnavailable"}, 1)
			set(t, o, path{"spec", "minAvailable"}, 1)
		}, "minAvailable and maxUnavailable cannot be both set"},
		{"crd: unknown field", "ServiceMonitor", func(o map[string]any) {
			set(t, o, path{"spec", "endpoints", 0, "intervall"}, "30s")
		}, `unknown field "spec.endpoints[0].intervall"`},
		{"crd: enum", "Certificate", func(o map[string]any) {
			set(t, o, path{"spec", "privateKey", "algorithm"}, "DSA")
		}, "spec.privateKey.algorithm: Unsupported value"},
		{"crd: required field", "Certificate", func(o map[string]any) {
			delete(get(t, o, path{"spec"}).(map[string]any), "secretName")
		}, "spec.secretName: Required value"},
		{"crd: type", "HelmChart", func(o map[string]any) {
			set(t, o, path{"spec", "createNamespace"}, "yes")
		}, "spec.createNamespace: Invalid value"},
	}
	ctx := context.Background()
	for _, ns := range []string{"wrong", "kube-system"} {
		if err := s.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := byKind[tc.kind]
			if !ok {
				t.Fatalf("no %s rendered", tc.kind)
			}
			var obj map[string]any
			if err := json.Unmarshal(o.Raw, &obj); err != nil {
				t.Fatal(err)
			}
			// A name of its own, so that "already exists" cannot be the
			// reason for a refusal.
			set(t, obj, path{"metadata", "name"}, fmt.Sprintf("wrong-%d", i))
			tc.edit(obj)
			doc, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Create(ctx, "wrong", doc)
			if err == nil {
				t.Fatalf("the API server accepted a %s with %s", tc.kind, tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused for another reason:\n%v\nwant a message containing %q", err, tc.want)
			}
		})
	}
}

// get walks obj along p (map keys and slice indexes).
func get(t *testing.T, obj any, p []any) any {
	t.Helper()
	cur := obj
	for _, k := range p {
		switch k := k.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("path %v: %q of a %T", p, k, cur)
			}
			cur = m[k]
		case int:
			s, ok := cur.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("path %v: [%d] of %T", p, k, cur)
			}
			cur = s[k]
		}
	}
	return cur
}

// set sets the value at path p of obj, creating missing map levels.
func set(t *testing.T, obj map[string]any, p []any, v any) {
	t.Helper()
	parent := obj
	if len(p) > 1 {
		last := p[:len(p)-1]
		cur := any(obj)
		for i, k := range last {
			if ks, ok := k.(string); ok {
				m := cur.(map[string]any)
				if m[ks] == nil {
					m[ks] = map[string]any{}
				}
				cur = m[ks]
				continue
			}
			cur = get(t, cur, last[i:i+1])
		}
		var ok bool
		if parent, ok = cur.(map[string]any); !ok {
			t.Fatalf("path %v: parent is a %T", p, cur)
		}
	}
	parent[p[len(p)-1].(string)] = v
}
