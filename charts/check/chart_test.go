package check

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const coordinatorChart = "../tributary"

// readValues reads a values file of the repository.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("values %s: %v", path, err)
	}
	return v
}

// rendered is a rendered coordinator chart, by kind.
type rendered struct {
	objs     []Object
	sts      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
	cert     *Certificate
	monitor  *ServiceMonitor
	sa       *corev1.ServiceAccount
	role     *rbacv1.Role
	binding  *rbacv1.RoleBinding
}

func renderCoordinators(t *testing.T, values map[string]any) rendered {
	t.Helper()
	objs, err := Render(coordinatorChart, values, RenderOptions{ReleaseName: "prod", Namespace: "tsdb"})
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{objs: objs, services: map[string]*corev1.Service{}}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.StatefulSet:
			if r.sts != nil {
				t.Fatalf("two StatefulSets: %s and %s", r.sts.Name, v.Name)
			}
			r.sts = v
		case *corev1.Service:
			r.services[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			r.pdb = v
		case *Certificate:
			r.cert = v
		case *ServiceMonitor:
			r.monitor = v
		case *corev1.ServiceAccount:
			r.sa = v
		case *rbacv1.Role:
			r.role = v
		case *rbacv1.RoleBinding:
			r.binding = v
		default:
			t.Fatalf("%s: unexpected %T", o.Source, o.Obj)
		}
		if o.Obj != nil && o.GVK.Kind != "" {
			if ns := namespaceOf(o.Obj); ns != "tsdb" {
				t.Errorf("%s %s: namespace %q, want the release's", o.GVK.Kind, o.Name, ns)
			}
		}
	}
	if r.sts == nil {
		t.Fatal("no StatefulSet rendered")
	}
	return r
}

func namespaceOf(obj any) string {
	if m, ok := obj.(interface{ GetNamespace() string }); ok {
		return m.GetNamespace()
	}
	return ""
}

// flagValues returns the values of --name=VALUE among args.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		} else if a == "--"+name {
			out = append(out, "")
		}
	}
	return out
}

func oneFlag(t *testing.T, args []string, name string) string {
	t.Helper()
	v := flagValues(args, name)
	if len(v) != 1 {
		t.Fatalf("flag --%s given %d times in %q, want once", name, len(v), args)
	}
	return v[0]
}

// portOf returns the port number of a --*-listen value HOST:PORT.
func portOf(t *testing.T, hostPort string) int32 {
	t.Helper()
	i := strings.LastIndexByte(hostPort, ':')
	p, err := strconv.Atoi(hostPort[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("address %q has no port", hostPort)
	}
	return int32(p)
}

// checkInvariants checks what must hold for any values: the peer list, the
// ports, the probes, anti-affinity, the PDB and the Services' selectors.
func checkInvariants(t *testing.T, r rendered, replicas, bootstrap int) {
	t.Helper()
	sts := r.sts
	const ns, domain = "tsdb", "cluster.local"
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != replicas {
		t.Errorf("StatefulSet replicas %v, want %d", sts.Spec.Replicas, replicas)
	}
	podLabels := labels.Set(sts.Spec.Template.Labels)
	sel := labels.SelectorFromSet(sts.Spec.Selector.MatchLabels)
	if !sel.Matches(podLabels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v", sel, podLabels)
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "coordinator" {
		t.Fatalf("container command %q args %q: want the image's entrypoint with `coordinator ...`", c.Command, c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	// Listeners and container ports agree.
	for flag, name := range map[string]string{"listen": "grpc", "http-listen": "http", "intake-listen": "intake", "cluster-listen": "cluster"} {
		addr := oneFlag(t, c.Args, flag)
		if !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("--%s=%s: want all interfaces", flag, addr)
		}
		if p, ok := ports[name]; !ok || p != portOf(t, addr) {
			t.Errorf("--%s=%s but container port %q is %d", flag, addr, name, p)
		}
	}
	// Identity and peers: raft id i+1 is pod i at its headless DNS name.
	if flagValues(c.Args, "identity-from-hostname") == nil || flagValues(c.Args, "id") != nil || flagValues(c.Args, "raft-id") != nil {
		t.Errorf("want --identity-from-hostname and neither --id nor --raft-id: %q", c.Args)
	}
	if autoJoin := flagValues(c.Args, "auto-join"); len(autoJoin) != 1 || autoJoin[0] != "" {
		t.Errorf("want --auto-join (pods beyond the bootstrap members join by themselves): %q", c.Args)
	}
	headless := r.services[sts.Spec.ServiceName]
	if headless == nil {
		t.Fatalf("StatefulSet serviceName %q is not a rendered Service", sts.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service %s: clusterIP %q publishNotReadyAddresses %v; want None and true", headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	peers := strings.Split(oneFlag(t, c.Args, "peers"), ",")
	if len(peers) != bootstrap {
		t.Fatalf("--peers has %d members, want bootstrapReplicas %d: %q", len(peers), bootstrap, peers)
	}
	for i, p := range peers {
		pod := fmt.Sprintf("%s-%d", sts.Name, i)
		want := fmt.Sprintf("%d=%s@%s.%s.%s.svc.%s:%d", i+1, pod, pod, headless.Name, ns, domain, ports["cluster"])
		if p != want {
			t.Errorf("peer %d = %q, want %q", i, p, want)
		}
	}
	adv := oneFlag(t, c.Args, "cluster-advertise")
	if want := fmt.Sprintf("$(POD_NAME).%s.%s.svc.%s:%d", headless.Name, ns, domain, ports["cluster"]); adv != want {
		t.Errorf("--cluster-advertise=%s, want %s", adv, want)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Error("POD_NAME (used by --cluster-advertise) is not the pod's name")
	}
	// Services: selectors match the pods, target ports are container
	// ports with the same number.
	for _, svc := range r.services {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s selector %v does not select the pods", svc.Name, svc.Spec.Selector)
		}
		for _, sp := range svc.Spec.Ports {
			cp, ok := ports[sp.TargetPort.String()]
			if !ok || cp != sp.Port {
				t.Errorf("Service %s port %s: %d -> %s, container port %d", svc.Name, sp.Name, sp.Port, sp.TargetPort.String(), cp)
			}
		}
	}
	wantPorts := map[string][]string{sts.Name: {"grpc", "http"}, sts.Name + "-intake": {"intake"}}
	for name, want := range wantPorts {
		svc := r.services[name]
		if svc == nil {
			t.Errorf("no Service %s", name)
			continue
		}
		var got []string
		for _, sp := range svc.Spec.Ports {
			got = append(got, sp.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Service %s ports %q, want %q", name, got, want)
		}
	}
	// Probes point at real ports and at the binary.
	lp := c.LivenessProbe
	switch {
	case lp == nil:
		t.Error("no liveness probe")
	case flagValues(c.Args, "tls-client-ca") != nil:
		// The kubelet has no client certificate to present.
		if lp.TCPSocket == nil || ports[lp.TCPSocket.Port.String()] != ports["http"] {
			t.Errorf("liveness probe %+v: with client certificates required, want a TCP check of the http port", lp)
		}
	case lp.HTTPGet == nil || lp.HTTPGet.Path != "/ping" || ports[lp.HTTPGet.Port.String()] != ports["http"]:
		t.Errorf("liveness probe %+v: want GET /ping on the http port", lp)
	}
	checkReadinessProbe(t, c.ReadinessProbe, flagValues(c.Args, "tls-cert") != nil, ports["grpc"])
	// Anti-affinity keeps two coordinators off one node.
	aff := sts.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("want required pod anti-affinity, got %+v", aff)
	}
	term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != "kubernetes.io/hostname" || !labels.SelectorFromSet(term.LabelSelector.MatchLabels).Matches(podLabels) {
		t.Errorf("anti-affinity term %+v does not spread these pods over hosts", term)
	}
	// Resources and data.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no cpu/memory requests: %+v", c.Resources)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" && m.MountPath == "/data" }) ||
		oneFlag(t, c.Args, "data-dir") != "/data" {
		t.Errorf("want a data claim mounted at /data and --data-dir=/data")
	}
	// PDB: a quorum of the voters stays up.
	if r.pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	if r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() != replicas/2+1 || r.pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB minAvailable %v, want quorum %d", r.pdb.Spec.MinAvailable, replicas/2+1)
	}
	if !labels.SelectorFromSet(r.pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("PDB selector does not select the pods")
	}
}

// checkSecretsReadable fails unless the coordinator's user can read every
// Secret volume: the files belong to root and the pod's fsGroup.
func checkSecretsReadable(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	spec := sts.Spec.Template.Spec
	if spec.SecurityContext == nil || spec.SecurityContext.FSGroup == nil || spec.SecurityContext.RunAsGroup == nil ||
		*spec.SecurityContext.FSGroup != *spec.SecurityContext.RunAsGroup {
		t.Fatalf("pod security context %+v: want fsGroup = runAsGroup", spec.SecurityContext)
	}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		mode := int32(0o644) // Kubernetes' default
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		if mode&0o040 == 0 {
			t.Errorf("Secret volume %s mode %#o: the group (the coordinator's) cannot read it", v.Name, mode)
		}
		if mode&0o004 != 0 {
			t.Errorf("Secret volume %s mode %#o: readable by everyone", v.Name, mode)
		}
	}
}

// volumeSecret returns the Secret a pod volume mounted at path comes from.
func volumeSecret(t *testing.T, sts *appsv1.StatefulSet, path string) string {
	t.Helper()
	c := sts.Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path })
	if i < 0 {
		t.Fatalf("nothing mounted at %s", path)
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == c.VolumeMounts[i].Name && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	t.Fatalf("volume %s at %s is not a Secret", c.VolumeMounts[i].Name, path)
	return ""
}

func TestCoordinatorChart_DefaultsNeedTLS(t *testing.T) {
	// TLS is on by default and needs a Secret or cert-manager: rendering
	// without either fails with a message naming the values.
	_, err := Render(coordinatorChart, nil, RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), "tls.secretName") {
		t.Fatalf("render without a TLS source: err = %v, want a message naming tls.secretName", err)
	}
}

func TestCoordinatorChart_TLSNeedsAnEdgeCAOrSharedCAExplicitly(t *testing.T) {
	// The intake trusts the edge CA, the cluster port the coordinators':
	// without an edge CA Secret the render fails unless allowSharedCA.
	_, err := Render(coordinatorChart, map[string]any{"tls": map[string]any{"secretName": "coord-tls"}}, RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), "tls.edgeCASecretName") || !strings.Contains(err.Error(), "tls.allowSharedCA") {
		t.Fatalf("TLS without an edge CA: err = %v, want a message naming tls.edgeCASecretName and tls.allowSharedCA", err)
	}
	// An edge CA Secret of the same CA still needs allowSharedCA, which the
	// coordinator checks at start; the chart passes both through.
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"secretName": "coord-tls", "edgeCASecretName": "edge-ca", "allowSharedCA": true}})
	args := r.sts.Spec.Template.Spec.Containers[0].Args
	if oneFlag(t, args, "edge-ca") != "/edge-ca/ca.crt" || oneFlag(t, args, "allow-shared-ca") != "" {
		t.Errorf("edge CA Secret and allowSharedCA: args %q", args)
	}
}

func TestCoordinatorChart_Plaintext(t *testing.T) {
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}})
	checkInvariants(t, r, 3, 3)
	args := r.sts.Spec.Template.Spec.Containers[0].Args
	if flagValues(args, "insecure-cluster") == nil || flagValues(args, "insecure-listen") == nil || flagValues(args, "peer-cert") != nil {
		t.Errorf("plaintext args %q", args)
	}
	if r.cert != nil || r.monitor != nil {
		t.Error("Certificate or ServiceMonitor rendered though off")
	}
	if len(r.objs) != 8 {
		t.Errorf("%d objects, want StatefulSet, 3 Services, PDB, ServiceAccount, Role, RoleBinding", len(r.objs))
	}
}

func TestCoordinatorChart_HA(t *testing.T) {
	ha := readValues(t, filepath.Join(coordinatorChart, "ci/ha-values.yaml"))
	if bad := unknownValues("ha-values", ha, readValues(t, filepath.Join(coordinatorChart, "values.yaml"))); len(bad) > 0 {
		t.Errorf("ci/ha-values.yaml sets values the chart does not have: %q", bad)
	}
	r := renderCoordinators(t, ha)
	checkInvariants(t, r, 5, 5)
	c := r.sts.Spec.Template.Spec.Containers[0]
	checkSecretsReadable(t, r.sts)
	if got := volumeSecret(t, r.sts, "/tls"); got != "tributary-coordinator-tls" {
		t.Errorf("/tls from Secret %q", got)
	}
	if got := volumeSecret(t, r.sts, "/edge-ca"); got != "tributary-edge-ca" {
		t.Errorf("/edge-ca from Secret %q", got)
	}
	for flag, want := range map[string]string{"peer-cert": "/tls/tls.crt", "peer-key": "/tls/tls.key", "peer-ca": "/tls/ca.crt",
		"tls-cert": "/tls/tls.crt", "tls-key": "/tls/tls.key", "tls-client-ca": "/tls/ca.crt", "edge-ca": "/edge-ca/ca.crt",
		"edge-token-file": "/edge-token/token"} {
		if got := oneFlag(t, c.Args, flag); got != want {
			t.Errorf("--%s=%s, want %s", flag, got, want)
		}
	}
	if flagValues(c.Args, "insecure-cluster") != nil || flagValues(c.Args, "insecure-listen") != nil {
		t.Error("TLS install runs with --insecure-*")
	}
	if flagValues(c.Args, "allow-shared-ca") != nil {
		t.Error("an install with an edge CA of its own passes --allow-shared-ca")
	}
	// The probes speak TLS, and present the certificate when the
	// listeners demand one.
	if oneFlag(t, c.ReadinessProbe.Exec.Command, "tls-cert") != "/tls/tls.crt" {
		t.Errorf("readiness probe without the client certificate: %q", c.ReadinessProbe.Exec.Command)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "TRIBUTARY_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "tributary-token"
	}) {
		t.Error("TRIBUTARY_TOKEN not from the token Secret")
	}
	if svc := r.services[r.sts.Name+"-intake"]; svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.LoadBalancerSourceRanges) != 1 {
		t.Errorf("intake Service %+v: want a LoadBalancer with source ranges", svc.Spec)
	}
	if r.monitor == nil {
		t.Fatal("no ServiceMonitor")
	}
	ep := r.monitor.Spec.Endpoints
	if len(ep) != 1 || ep[0].Port != "http" || ep[0].Scheme != "https" || ep[0].TLSConfig == nil || ep[0].TLSConfig.CA == nil ||
		ep[0].TLSConfig.CA.Secret.Name != "tributary-coordinator-tls" {
		t.Errorf("ServiceMonitor endpoints %+v", ep)
	}
	if a := ep[0].Authorization; a == nil || a.Type != "Bearer" || a.Credentials == nil || a.Credentials.Name != "tributary-token" {
		t.Errorf("ServiceMonitor does not send the token /metrics needs: %+v", a)
	}
	if r.monitor.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v", r.monitor.Labels)
	}
	if !labels.SelectorFromSet(r.monitor.Spec.Selector.MatchLabels).Matches(labels.Set(r.services[r.sts.Name].Labels)) {
		t.Error("ServiceMonitor does not select the client Service")
	}
}

func TestCoordinatorChart_CertManager(t *testing.T) {
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"allowSharedCA": true, "certManager": map[string]any{
		"enabled": true, "issuerRef": map[string]any{"name": "tributary-ca"}, "extraDNSNames": []any{"intake.example.com"}}}})
	checkInvariants(t, r, 3, 3)
	// One CA for coordinators and edges, said explicitly.
	args := r.sts.Spec.Template.Spec.Containers[0].Args
	if oneFlag(t, args, "edge-ca") != "/tls/ca.crt" || oneFlag(t, args, "allow-shared-ca") != "" {
		t.Errorf("allowSharedCA without an edge CA Secret: want --edge-ca=/tls/ca.crt --allow-shared-ca, got %q", args)
	}
	if r.cert == nil {
		t.Fatal("no Certificate")
	}
	if got := volumeSecret(t, r.sts, "/tls"); got != r.cert.Spec.SecretName {
		t.Errorf("/tls from Secret %q, the Certificate writes %q", got, r.cert.Spec.SecretName)
	}
	// Every coordinator's node id (its pod name) must be a SAN: peers
	// check it on the cluster links.
	for i := range 3 {
		if pod := fmt.Sprintf("%s-%d", r.sts.Name, i); !slices.Contains(r.cert.Spec.DNSNames, pod) {
			t.Errorf("Certificate does not name %s: %q", pod, r.cert.Spec.DNSNames)
		}
	}
	if lp := r.sts.Spec.Template.Spec.Containers[0].LivenessProbe; lp.HTTPGet == nil || lp.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("liveness probe %+v: want HTTPS", lp)
	}
	if !slices.Contains(r.cert.Spec.DNSNames, "intake.example.com") || !slices.Contains(r.cert.Spec.Usages, "client auth") {
		t.Errorf("Certificate %+v", r.cert.Spec)
	}
}

func TestCoordinatorChart_ScaledBeyondBootstrap(t *testing.T) {
	// Scaling 3 -> 5 keeps the bootstrap list: pods 3 and 4 are not in
	// --peers, so --identity-from-hostname makes them join.
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "replicas": 5, "bootstrapReplicas": 3})
	checkInvariants(t, r, 5, 3)
}

func TestCoordinatorChart_AutoJoinOff(t *testing.T) {
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "autoJoin": false})
	if args := r.sts.Spec.Template.Spec.Containers[0].Args; flagValues(args, "auto-join") != nil {
		t.Errorf("autoJoin false still passes --auto-join: %q", args)
	}
}

func TestCoordinatorChart_AutoLeave(t *testing.T) {
	// Every pod reads the StatefulSet's replica count from the API, so the
	// leader removes the members beyond it after a scale-down (kubectl
	// scale or helm upgrade), with a Role allowing that read only.
	for _, replicas := range []int{3, 5} {
		r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "replicas": replicas, "bootstrapReplicas": 3})
		spec := r.sts.Spec.Template.Spec
		args := spec.Containers[0].Args
		if got := oneFlag(t, args, "expected-members-from-statefulset"); got != r.sts.Name {
			t.Errorf("replicas %d: --expected-members-from-statefulset=%s, want the StatefulSet %s", replicas, got, r.sts.Name)
		}
		if flagValues(args, "expected-members") != nil {
			t.Errorf("replicas %d: a fixed --expected-members as well: %q", replicas, args)
		}
		if got := oneFlag(t, args, "auto-leave-after"); got != "1m" {
			t.Errorf("--auto-leave-after=%s, want the default 1m", got)
		}
		if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
			t.Errorf("the pods get no service account token: they cannot read the replica count")
		}
		checkReplicaCountRBAC(t, r)
	}
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "autoLeave": map[string]any{"enabled": false}})
	spec := r.sts.Spec.Template.Spec
	if args := spec.Containers[0].Args; flagValues(args, "expected-members-from-statefulset") != nil || flagValues(args, "auto-leave-after") != nil {
		t.Errorf("autoLeave off still passes its flags: %q", args)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || r.role != nil || r.binding != nil {
		t.Errorf("autoLeave off: token mounted %v, role %v, binding %v; want no API access", spec.AutomountServiceAccountToken, r.role, r.binding)
	}
	if _, err := Render(coordinatorChart, map[string]any{"tls": map[string]any{"enabled": false}, "autoLeave": map[string]any{"after": "soon"}}, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "autoLeave") {
		t.Errorf("autoLeave.after=soon: err = %v, want the schema to refuse it", err)
	}
	// A ServiceAccount of the user's: bound, not created.
	r = renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "serviceAccount": map[string]any{"create": false, "name": "mine"}})
	if r.sa != nil || r.sts.Spec.Template.Spec.ServiceAccountName != "mine" {
		t.Errorf("serviceAccount.create=false name=mine: created %v, pods use %q", r.sa, r.sts.Spec.Template.Spec.ServiceAccountName)
	}
	checkReplicaCountRBAC(t, r)
	r = renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}, "rbac": map[string]any{"create": false}})
	if r.role != nil || r.binding != nil {
		t.Errorf("rbac.create=false: role %v binding %v", r.role, r.binding)
	}
}

// checkReplicaCountRBAC requires a Role allowing get on the release's
// StatefulSet and its scale subresource and nothing else, bound to the
// pods' ServiceAccount.
func checkReplicaCountRBAC(t *testing.T, r rendered) {
	t.Helper()
	sa := r.sts.Spec.Template.Spec.ServiceAccountName
	if r.role == nil || r.binding == nil {
		t.Fatalf("role %v binding %v: want both", r.role, r.binding)
	}
	if len(r.role.Rules) != 1 {
		t.Fatalf("role rules %+v, want one", r.role.Rules)
	}
	rule := r.role.Rules[0]
	if !slices.Equal(rule.APIGroups, []string{"apps"}) || !slices.Equal(rule.Verbs, []string{"get"}) ||
		!slices.Equal(rule.ResourceNames, []string{r.sts.Name}) ||
		!slices.Equal(rule.Resources, []string{"statefulsets", "statefulsets/scale"}) {
		t.Errorf("role rule %+v: want get on apps statefulsets and statefulsets/scale named %s only", rule, r.sts.Name)
	}
	if r.binding.RoleRef.Kind != "Role" || r.binding.RoleRef.Name != r.role.Name || len(r.binding.Subjects) != 1 ||
		r.binding.Subjects[0].Kind != "ServiceAccount" || r.binding.Subjects[0].Name != sa || r.binding.Subjects[0].Namespace != "tsdb" {
		t.Errorf("role binding %+v: want the role bound to the pods' ServiceAccount %s", r.binding, sa)
	}
	if r.sa != nil && r.sa.Name != sa {
		t.Errorf("ServiceAccount %s created, pods use %s", r.sa.Name, sa)
	}
}

func TestCoordinatorChart_RefusedValues(t *testing.T) {
	plain := func(kv ...any) map[string]any {
		v := map[string]any{"tls": map[string]any{"enabled": false}}
		for i := 0; i < len(kv); i += 2 {
			v[kv[i].(string)] = kv[i+1]
		}
		return v
	}
	// Each is refused for the reason named: values.schema.json makes a
	// misspelt or mistyped value an error instead of silently ignored.
	cases := map[string]struct {
		values map[string]any
		want   string
	}{
		"zero bootstrap":         {plain("bootstrapReplicas", 0), "/bootstrapReplicas"},
		"cert-manager no issuer": {map[string]any{"tls": map[string]any{"certManager": map[string]any{"enabled": true}}}, "issuerRef.name"},
		"bad anti-affinity":      {plain("podAntiAffinity", "sometimes"), "/podAntiAffinity"},
		"misspelt value":         {plain("replica", 5), "'replica' not allowed"},
		"misspelt nested":        {map[string]any{"tls": map[string]any{"enabled": false, "secretname": "x"}}, "'secretname' not allowed"},
		"wrong type":             {plain("replicas", "five"), "/replicas"},
		"bad port":               {plain("ports", map[string]any{"grpc": 70000}), "/ports/grpc"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Render(coordinatorChart, tc.values, RenderOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestCoordinatorChart_LintStrict(t *testing.T) {
	for name, v := range map[string]map[string]any{
		"plaintext": {"tls": map[string]any{"enabled": false}},
		"ha":        readValues(t, filepath.Join(coordinatorChart, "ci/ha-values.yaml")),
	} {
		t.Run(name, func(t *testing.T) {
			if err := Lint(coordinatorChart, v); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDecode_BrokenManifestsAreRejected proves the decoding is strict: each
// case breaks one field of a rendered, valid object.
func TestDecode_BrokenManifestsAreRejected(t *testing.T) {
	r := renderCoordinators(t, map[string]any{"tls": map[string]any{"enabled": false}})
	stsYAML, err := yaml.Marshal(r.sts)
	if err != nil {
		t.Fatal(err)
	}
	good := string(stsYAML)
	if _, err := Decode("good", []byte(good)); err != nil {
		t.Fatalf("the unbroken StatefulSet: %v", err)
	}
	helmChart := "apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata:\n  name: x\n  namespace: kube-system\nspec:\n  chart: https://%{KUBERNETES_API}%/static/charts/x.tgz\n  valuesContent: |-\n    a: 1\n"
	if _, err := Decode("good HelmChart", []byte(helmChart)); err != nil {
		t.Fatalf("the unbroken HelmChart: %v", err)
	}
	cases := map[string]struct{ doc, old, new string }{
		"misspelt field":       {good, "\n  replicas: 3", "\n  replica: 3"},
		"field in wrong case":  {good, "containerPort:", "ContainerPort:"},
		"field at wrong level": {good, "\n  serviceName:", "\n  servicename:"},
		"duplicate field":      {good, "\n  replicas: 3", "\n  replicas: 3\n  replicas: 4"},
		"wrong type":           {good, "\n  replicas: 3", "\n  replicas: three"},
		"custom kind misspelt": {helmChart, "valuesContent:", "valuesContents:"},
		"custom kind case":     {helmChart, "chart:", "Chart:"},
		"unknown kind":         {good, "kind: StatefulSet", "kind: StatefulSett"},
		"unknown apiVersion":   {good, "apiVersion: apps/v1", "apiVersion: apps/v2"},
		"no name":              {helmChart, "  name: x\n", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			broken := strings.Replace(tc.doc, tc.old, tc.new, 1)
			if broken == tc.doc {
				t.Fatalf("BUG: %q not found in the manifest", tc.old)
			}
			if _, err := Decode("broken", []byte(broken)); err == nil {
				t.Fatalf("accepted a manifest with %s", name)
			} else {
				t.Logf("%s: %v", name, err)
			}
		})
	}
	if _, err := Decode("x", []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: err = %v, want ErrUnknownKind", err)
	}
}

// copyChart copies the chart in dir to a temporary directory.
func copyChart(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLint_BrokenChartFails(t *testing.T) {
	plain := map[string]any{"tls": map[string]any{"enabled": false}}
	cases := map[string]struct{ file, content string }{
		"undefined value": {"templates/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.noSuch.key }}\n"},
		"invalid YAML":    {"templates/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   data: [\n"},
		"no version":      {"Chart.yaml", "apiVersion: v2\nname: tributary\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := copyChart(t, coordinatorChart)
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Lint(dir, plain); err == nil {
				t.Fatal("lint passed")
			}
		})
	}
}

// checkReadinessProbe: a plaintext gRPC listener is probed by the
// kubelet's gRPC probe (grpc.health.v1, overall status); one with TLS,
// which that probe cannot speak, by the binary's status call.
func checkReadinessProbe(t *testing.T, rp *corev1.Probe, tls bool, grpcPort int32) {
	t.Helper()
	switch {
	case rp == nil:
		t.Fatal("no readiness probe")
	case !tls:
		if rp.GRPC == nil || rp.GRPC.Port != grpcPort || (rp.GRPC.Service != nil && *rp.GRPC.Service != "") {
			t.Errorf("plaintext readiness probe %+v: want the gRPC health probe of port %d, overall status", rp, grpcPort)
		}
	case rp.Exec == nil || len(rp.Exec.Command) < 2 || rp.Exec.Command[0] != "/tributary" || rp.Exec.Command[1] != "status":
		t.Errorf("TLS readiness probe %+v: want /tributary status", rp)
	default:
		if p := portOf(t, oneFlag(t, rp.Exec.Command, "addr")); p != grpcPort {
			t.Errorf("readiness probe asks port %d, gRPC listens on %d", p, grpcPort)
		}
	}
}
