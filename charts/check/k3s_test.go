package check

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	edgeChart    = "../../k3s/tributary-edge"
	k3sManifests = "../../k3s/manifests"
)

// renderEdge renders the edge chart and returns its DaemonSets by
// architecture and its Service, if any.
func renderEdge(t *testing.T, values map[string]any) (map[string]*appsv1.DaemonSet, *corev1.Service) {
	t.Helper()
	objs, err := Render(edgeChart, values, RenderOptions{ReleaseName: "tributary-edge", Namespace: "tributary"})
	if err != nil {
		t.Fatal(err)
	}
	ds := map[string]*appsv1.DaemonSet{}
	var svc *corev1.Service
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.DaemonSet:
			ds[v.Spec.Template.Spec.NodeSelector["kubernetes.io/arch"]] = v
		case *corev1.Service:
			svc = v
		default:
			t.Fatalf("%s: unexpected %T", o.Source, o.Obj)
		}
	}
	return ds, svc
}

// checkEdge checks what must hold for every edge DaemonSet.
func checkEdge(t *testing.T, ds *appsv1.DaemonSet, coordinators []string) {
	t.Helper()
	if !labels.SelectorFromSet(ds.Spec.Selector.MatchLabels).Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("DaemonSet %s selector does not match its pods", ds.Name)
	}
	if a := ds.Spec.Template.Spec.NodeSelector["kubernetes.io/arch"]; a == "" || !strings.HasSuffix(ds.Name, "-"+a) {
		t.Errorf("DaemonSet %s: node selector arch %q", ds.Name, a)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "node" {
		t.Fatalf("args %q: want `node ...`", c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if portOf(t, oneFlag(t, c.Args, "listen")) != ports["grpc"] || portOf(t, oneFlag(t, c.Args, "http-listen")) != ports["http"] {
		t.Errorf("listeners %q do not match container ports %v", c.Args, ports)
	}
	if got := strings.Split(oneFlag(t, c.Args, "replicate-to"), ","); !slices.Equal(got, coordinators) {
		t.Errorf("--replicate-to %q, want %q", got, coordinators)
	}
	// The node id is the k3s node name, which each Pi's certificate names.
	if oneFlag(t, c.Args, "node-id") != "$(NODE_NAME)" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("node id is not the node name: %q", c.Args)
	}
	for flag, file := range map[string]string{"replicate-cert": "/tls/tls.crt", "replicate-key": "/tls/tls.key", "replicate-ca": "/tls/ca.crt"} {
		if got := oneFlag(t, c.Args, flag); got != file {
			t.Errorf("--%s=%s, want %s", flag, got, file)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
			t.Errorf("volume %s: want a hostPath Directory, got %+v", v.Name, v.VolumeSource)
		}
	}
	if mounts["/data"] != "data" || mounts["/tls"] != "tls" || oneFlag(t, c.Args, "data-dir") != "/data" {
		t.Errorf("mounts %v", mounts)
	}
	if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil || ports[lp.HTTPGet.Port.String()] != ports["http"] {
		t.Errorf("liveness probe %+v not on the http port", lp)
	}
	checkReadinessProbe(t, c.ReadinessProbe, flagValues(c.Args, "tls-cert") != nil, ports["grpc"])
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("no memory request/limit: %+v", c.Resources)
	}
}

func TestEdgeChart_Defaults(t *testing.T) {
	ds, svc := renderEdge(t, nil)
	if len(ds) != 2 || ds["arm64"] == nil || ds["arm"] == nil {
		t.Fatalf("DaemonSets %v, want arm64 and arm", ds)
	}
	for _, d := range ds {
		checkEdge(t, d, []string{"tributary-intake.example.com:7443"})
		if d.Spec.Template.Spec.HostNetwork {
			t.Errorf("%s on the host network by default", d.Name)
		}
	}
	if ds["arm64"].Spec.Template.Spec.Containers[0].Image != "tributary:0.1.0-arm64" || ds["arm"].Spec.Template.Spec.Containers[0].Image != "tributary:0.1.0-armv7" {
		t.Error("images do not match the architectures")
	}
	// Two DaemonSets must not claim each other's pods.
	a, b := ds["arm64"], ds["arm"]
	if labels.SelectorFromSet(a.Spec.Selector.MatchLabels).Matches(labels.Set(b.Spec.Template.Labels)) {
		t.Error("the arm64 DaemonSet selects the arm pods")
	}
	if svc == nil || svc.Spec.InternalTrafficPolicy == nil || *svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal {
		t.Fatalf("Service %+v: want internalTrafficPolicy Local", svc)
	}
	for _, d := range ds {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service does not select %s", d.Name)
		}
	}
}

func TestEdgeChart_HostNetwork(t *testing.T) {
	ds, svc := renderEdge(t, map[string]any{"hostNetwork": true, "images": map[string]any{"arm": nil},
		"coordinators": []any{"a:7443", "b:7443"}, "listenTLS": false,
		"replication": map[string]any{"advertiseQueryAddr": "$(NODE_IP):7070"}})
	if len(ds) != 1 || svc != nil {
		t.Fatalf("%d DaemonSets and Service %v: want arm64 alone, no Service", len(ds), svc)
	}
	d := ds["arm64"]
	checkEdge(t, d, []string{"a:7443", "b:7443"})
	spec := d.Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %s", spec.HostNetwork, spec.DNSPolicy)
	}
	args := spec.Containers[0].Args
	if flagValues(args, "insecure-listen") == nil || flagValues(args, "tls-cert") != nil || oneFlag(t, args, "advertise-query-addr") != "$(NODE_IP):7070" {
		t.Errorf("args %q", args)
	}
}

func TestEdgeChart_RefusedValues(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   string
	}{
		"no coordinators": {map[string]any{"coordinators": []any{}}, "/coordinators"},
		"unknown arch":    {map[string]any{"images": map[string]any{"armv6": "x"}}, "'armv6' not allowed"},
		"misspelt value":  {map[string]any{"hostNetwrok": true}, "'hostNetwrok' not allowed"},
		"bad overflow":    {map[string]any{"replication": map[string]any{"overflow": "drop-newest"}}, "/replication/overflow"},
		"address no port": {map[string]any{"coordinators": []any{"coord.example.com"}}, "/coordinators/0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Render(edgeChart, tc.values, RenderOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestEdgeChart_LintStrict(t *testing.T) {
	if err := Lint(edgeChart, nil); err != nil {
		t.Fatal(err)
	}
}

// TestK3sManifests decodes every file in k3s/manifests strictly and renders
// the edge chart with each HelmChart's valuesContent, so that the values
// the auto-deploy folder carries are valid for the chart it installs.
func TestK3sManifests(t *testing.T) {
	objs, err := ReadManifests(k3sManifests)
	if err != nil {
		t.Fatal(err)
	}
	charts := 0
	for _, o := range objs {
		hc, ok := o.Obj.(*HelmChart)
		if !ok {
			continue
		}
		charts++
		if hc.Namespace != "kube-system" {
			t.Errorf("HelmChart %s in namespace %q: k3s's helm-controller watches kube-system", hc.Name, hc.Namespace)
		}
		want := fmt.Sprintf("https://%%{KUBERNETES_API}%%/static/charts/tributary-edge-%s.tgz", chartVersion(t, edgeChart))
		if hc.Spec.Chart != want {
			t.Errorf("HelmChart %s chart %q, want the packaged edge chart %q", hc.Name, hc.Spec.Chart, want)
		}
		var values map[string]any
		if err := yaml.UnmarshalStrict([]byte(hc.Spec.ValuesContent), &values); err != nil {
			t.Fatalf("HelmChart %s valuesContent: %v", hc.Name, err)
		}
		if bad := unknownValues("valuesContent", values, readValues(t, edgeChart+"/values.yaml")); len(bad) > 0 {
			t.Errorf("HelmChart %s sets values the chart does not have: %q", hc.Name, bad)
		}
		ds, _ := renderEdge(t, values)
		for _, d := range ds {
			checkEdge(t, d, []string{"tributary-intake.example.com:7443"})
		}
		if err := Lint(edgeChart, values); err != nil {
			t.Fatal(err)
		}
	}
	if charts == 0 {
		t.Fatal("no HelmChart in k3s/manifests")
	}
}

// unknownValues returns the keys of values that the chart's values.yaml
// does not have (Helm would silently ignore a misspelt one), as dotted
// paths under where.
func unknownValues(where string, values, defaults map[string]any) []string {
	var out []string
	for k, v := range values {
		d, ok := defaults[k]
		if !ok {
			out = append(out, where+"."+k)
			continue
		}
		vm, ok1 := v.(map[string]any)
		dm, ok2 := d.(map[string]any)
		// Maps with empty defaults (nodeSelector) and images take any key.
		if ok1 && ok2 && len(dm) > 0 && k != "images" {
			out = append(out, unknownValues(where+"."+k, vm, dm)...)
		}
	}
	sort.Strings(out)
	return out
}

func TestUnknownValues_CatchesTypos(t *testing.T) {
	defaults := readValues(t, edgeChart+"/values.yaml")
	got := unknownValues("v", map[string]any{"hostNetwrok": true, "replication": map[string]any{"budgetbytes": 1, "overflow": "x"},
		"images": map[string]any{"arm": "x"}, "nodeSelector": map[string]any{"a": "b"}}, defaults)
	if want := []string{"v.hostNetwrok", "v.replication.budgetbytes"}; !slices.Equal(got, want) {
		t.Fatalf("unknown values %q, want %q", got, want)
	}
}

// chartVersion reads the version of the chart in dir.
func chartVersion(t *testing.T, dir string) string {
	t.Helper()
	var c struct {
		Version string `json:"version"`
	}
	data, err := os.ReadFile(dir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &c); err != nil || c.Version == "" {
		t.Fatalf("Chart.yaml of %s: version %q, %v", dir, c.Version, err)
	}
	return c.Version
}
