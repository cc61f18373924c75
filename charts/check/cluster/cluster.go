// Package cluster assembles a single-node Kubernetes on this machine from
// real parts, for make k8s-e2e: the API server and etcd of package apply,
// kube-controller-manager, kube-scheduler, kube-proxy (nftables mode) and a
// kubelet built from the pinned k8s.io/kubernetes release
// (charts/k8stest/components), a containerd instance of its own (own
// config, root, state and socket; the machine's containerd is not
// touched) with runc and its CRI plugin, the containernetworking bridge,
// host-local and loopback plugins on a bridge and subnet of its own, and a
// small DNS responder for the cluster domain (dns.go).
//
// Everything Start creates is recorded and Stop removes it: processes
// (including the containerd shims), mounts, the bridge, kube-proxy's
// nftables tables, the two FORWARD rules that let the bridge's traffic
// through, the network namespaces and cgroups of the pods, the kernel
// settings the kubelet changes, and the working directory. It needs root.
//
// A Cluster is not safe for concurrent use, except Client, Config and
// Kubeconfig, which are read-only once Start returns.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tributarydb/tributary/charts/check/apply"
)

// Options locate the binaries and name the network.
type Options struct {
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler,
	// kube-proxy and kubelet (required).
	BinDir string
	// Dir is the working directory; it must not exist yet (it is created,
	// and removed by Stop).
	Dir string
	// Log receives every process's output; nil discards it.
	Log io.Writer
	// NodeName is the node's name (default "k8s-e2e").
	NodeName string
	// Bridge is the name of the pods' bridge (default "trib-e2e0"); it
	// must not exist.
	Bridge string
	// PodCIDR is the pods' subnet, a /24 (default 10.244.77.0/24); its
	// first address is the bridge's, where the DNS responder listens.
	PodCIDR string
	// CNIBinDir holds the CNI plugins (default /usr/lib/cni, Debian's
	// containernetworking-plugins).
	CNIBinDir string
	// PersistentVolumes is how many hostPath volumes of class StorageClass
	// to create (default 12).
	PersistentVolumes int
}

// StorageClass is the class of the pre-created hostPath volumes.
const StorageClass = "e2e-local"

// Cluster is a running single-node cluster.
type Cluster struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file for Config.
	Kubeconfig string
	// NodeName and NodeIP are the node's name and InternalIP.
	NodeName, NodeIP string
	// Gateway is the bridge's address, the pods' gateway and DNS server.
	Gateway net.IP

	opts       Options
	api        *apply.Server
	procs      []*exec.Cmd
	dns        *dnsServer
	apiProxy   *apiProxy // the pods' way to the API server
	sock       string    // containerd's socket
	netnsKnown []string  // /var/run/netns entries before Start
	bridgeUp   bool
	proxyUp    bool
	fwdRules   int               // FORWARD rules inserted (forwardRules)
	sysctls    map[string]string // kubeletSysctls before the kubelet started
	log        io.Writer
	apiLog     *os.File
	stopping   atomic.Bool // Stop has begun: exits are expected
}

// Start brings the cluster up and waits until the node is Ready. On error
// everything started so far is torn down.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.BinDir == "" || opts.Dir == "" {
		return nil, errors.New("start cluster: Options.BinDir and Options.Dir are required")
	}
	if opts.NodeName == "" {
		opts.NodeName = "k8s-e2e"
	}
	if opts.Bridge == "" {
		opts.Bridge = "trib-e2e0"
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = "10.244.77.0/24"
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = "/usr/lib/cni"
	}
	if opts.PersistentVolumes == 0 {
		opts.PersistentVolumes = 12
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	_, subnet, perr := net.ParseCIDR(opts.PodCIDR)
	if perr != nil {
		return nil, fmt.Errorf("start cluster: pod CIDR: %w", perr)
	}
	gw := slices.Clone(subnet.IP.To4())
	gw[3]++
	if err := os.Mkdir(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	c = &Cluster{opts: opts, NodeName: opts.NodeName, Gateway: gw, log: opts.Log}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	if c.NodeIP, err = hostIP(); err != nil {
		return nil, err
	}
	c.netnsKnown, _ = filepath.Glob("/var/run/netns/*")
	if err := c.checkTools(); err != nil {
		return nil, err
	}
	step := func(what string, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fmt.Fprintf(c.log, "k8s-e2e: %s (%.1fs)\n", what, time.Since(t).Seconds())
		return nil
	}
	apiDir := filepath.Join(opts.Dir, "api")
	for _, d := range []string{apiDir, c.path("logs")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	apiLog, err := os.Create(c.path("logs", "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	c.apiLog = apiLog
	if err := step("etcd and kube-apiserver ready", func() (err error) {
		c.api, err = apply.Start(ctx, apply.Options{APIServer: filepath.Join(opts.BinDir, "kube-apiserver"), Dir: apiDir, Log: apiLog})
		return err
	}); err != nil {
		return nil, err
	}
	c.Config = c.api.Config
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	if err := step("bridge "+opts.Bridge+" "+gw.String(), c.addBridge); err != nil {
		return nil, err
	}
	if err := step("dns responder on "+gw.String()+":53", func() (err error) {
		c.dns, err = startDNS(ctx, c.Client, gw.String()+":53", c.log)
		return err
	}); err != nil {
		return nil, err
	}
	if err := step("api server for the pods on "+gw.String()+" (Service default/kubernetes)", func() error { return c.publishAPIServer(ctx) }); err != nil {
		return nil, err
	}
	if err := step("containerd", func() error { return c.startContainerd(ctx) }); err != nil {
		return nil, err
	}
	if err := step("controller-manager, scheduler, kube-proxy, kubelet", c.startKube); err != nil {
		return nil, err
	}
	if err := step("node Ready", func() error { return c.waitNodeReady(ctx, 3*time.Minute) }); err != nil {
		return nil, err
	}
	if err := step("storage class and volumes", func() error { return c.createVolumes(ctx) }); err != nil {
		return nil, err
	}
	return c, nil
}

// checkTools fails early, naming the Debian package, when a tool is missing.
func (c *Cluster) checkTools() error {
	for _, t := range []struct{ path, pkg string }{
		{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"},
		{filepath.Join(c.opts.CNIBinDir, "bridge"), "containernetworking-plugins"},
		{filepath.Join(c.opts.CNIBinDir, "host-local"), "containernetworking-plugins"},
		{filepath.Join(c.opts.CNIBinDir, "loopback"), "containernetworking-plugins"},
		{"nft", "nftables"}, {"ip", "iproute2"}, {"iptables", "iptables"}, {"etcd", "etcd-server"},
	} {
		if _, err := exec.LookPath(t.path); err != nil {
			return fmt.Errorf("%s not found (Debian package %s; scripts/deps.sh k8s-e2e installs it)", t.path, t.pkg)
		}
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		if _, err := os.Stat(filepath.Join(c.opts.BinDir, b)); err != nil {
			return fmt.Errorf("%s not built (make k8s-e2e builds it): %w", b, err)
		}
	}
	return nil
}

// hostIP is the address of the interface holding the default route: the
// kubelet refuses a loopback node IP.
func hostIP() (string, error) {
	conn, err := net.Dial("udp4", "198.51.100.1:9") // no packet is sent
	if err != nil {
		return "", fmt.Errorf("find the host's address: %w", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

func (c *Cluster) path(p ...string) string {
	return filepath.Join(append([]string{c.opts.Dir}, p...)...)
}

func (c *Cluster) writeKubeconfig() error {
	c.Kubeconfig = c.path("kubeconfig")
	ca := c.path("ca.crt")
	if err := os.WriteFile(ca, c.Config.TLSClientConfig.CAData, 0o600); err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: e2e
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
`, c.Config.Host, ca, c.Config.BearerToken)
	return os.WriteFile(c.Kubeconfig, []byte(kc), 0o600)
}

// run runs a short command, returning its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// addBridge creates the pods' bridge with the gateway address before any
// pod exists, so that the DNS responder can listen on it; the CNI bridge
// plugin adopts it.
func (c *Cluster) addBridge() error {
	ones, _ := mustMask(c.opts.PodCIDR)
	if err := run("ip", "link", "add", "name", c.opts.Bridge, "type", "bridge"); err != nil {
		return err
	}
	c.bridgeUp = true
	if err := run("ip", "addr", "add", fmt.Sprintf("%s/%d", c.Gateway, ones), "dev", c.opts.Bridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", c.opts.Bridge, "up"); err != nil {
		return err
	}
	// With br_netfilter, traffic between two pods on the bridge passes the
	// FORWARD chain, whose policy docker sets to DROP: accept the bridge's
	// traffic in front of it (Stop deletes the two rules).
	for _, r := range c.forwardRules() {
		if err := run("iptables", append([]string{"-I", "FORWARD", "1"}, r...)...); err != nil {
			return err
		}
		c.fwdRules++
	}
	return nil
}

// forwardRules are the FORWARD rules addBridge inserts.
func (c *Cluster) forwardRules() [][]string {
	tag := []string{"-m", "comment", "--comment", "tributary k8s-e2e", "-j", "ACCEPT"}
	return [][]string{
		append([]string{"-i", c.opts.Bridge}, tag...),
		append([]string{"-o", c.opts.Bridge}, tag...),
	}
}

func mustMask(cidr string) (int, int) {
	_, n, _ := net.ParseCIDR(cidr)
	return n.Mask.Size()
}

// spawn starts a long-running process; Stop sends it SIGTERM.
func (c *Cluster) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	lf, err := os.Create(c.path("logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = lf
	cmd.Stderr = lf
	// The kernel kills the child if the harness dies without Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := cmd.Wait()
		lf.Close()
		if !c.stopping.Load() {
			fmt.Fprintf(c.log, "k8s-e2e: %s exited: %v\n", name, err)
		}
	}()
	c.procs = append(c.procs, cmd)
	return cmd, nil
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/ipam"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	c.sock = c.path("containerd", "containerd.sock")
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # This machine's root lacks CAP_SYS_RESOURCE (it is not in the bounding
    # set), so runc cannot lower a container's oom_score_adj below its own
    # (the kubelet asks -998 for every sandbox): clamp it to containerd's.
    restrict_oom_score_adj = %v
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %q
      conf_dir = %q
      max_conf_num = 1
`, c.path("containerd", "root"), c.path("containerd", "state"), c.sock, c.sock+".ttrpc",
		c.path("containerd", "opt"), PauseImage, !hasCapSysResource(), c.opts.CNIBinDir, c.path("cni", "net.d"))
	if err := os.WriteFile(c.path("containerd", "config.toml"), []byte(conf), 0o644); err != nil {
		return err
	}
	// No masquerading (no rules added): the pods talk to each other, to
	// the Services and to the host only.
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "tributary-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "dataDir": %q
      }
    }
  ]
}
`, c.opts.Bridge, c.opts.PodCIDR, c.Gateway.String(), c.path("cni", "ipam"))
	if err := os.WriteFile(c.path("cni", "net.d", "10-tributary-e2e.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	if _, err := c.spawn("containerd", "containerd", "--config", c.path("containerd", "config.toml")); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := exec.CommandContext(ctx, "ctr", "-a", c.sock, "version").Run(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("containerd did not answer in 30s (see logs/containerd.log)")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE (bit
// 24 of CapEff), which lowering an oom_score_adj needs.
func hasCapSysResource() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0
		}
	}
	return false
}

// ImportImages imports image archives (docker save or OCI) into the
// containerd namespace of the kubelet.
func (c *Cluster) ImportImages(ctx context.Context, archives ...string) error {
	for _, a := range archives {
		out, err := exec.CommandContext(ctx, "ctr", "-a", c.sock, "-n", "k8s.io", "images", "import", a).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import %s: %w: %s", filepath.Base(a), err, out)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) startKube() error {
	bin := func(b string) string { return filepath.Join(c.opts.BinDir, b) }
	ports := make([]int, 6)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	if _, err := c.spawn("kube-controller-manager", bin("kube-controller-manager"),
		"--kubeconfig", c.Kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[0]),
		"--leader-elect=false",
		"--service-account-private-key-file", filepath.Join(c.opts.Dir, "api", "service-account.key"),
		"--root-ca-file", c.path("ca.crt"),
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period", "40s",
	); err != nil {
		return err
	}
	if _, err := c.spawn("kube-scheduler", bin("kube-scheduler"),
		"--kubeconfig", c.Kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[1]),
		"--leader-elect=false",
	); err != nil {
		return err
	}
	proxyConf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: nftables
clusterCIDR: %q
hostnameOverride: %q
healthzBindAddress: "127.0.0.1:%d"
metricsBindAddress: "127.0.0.1:%d"
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.Kubeconfig, c.opts.PodCIDR, c.NodeName, ports[2], ports[3])
	if err := os.WriteFile(c.path("kube-proxy.yaml"), []byte(proxyConf), 0o644); err != nil {
		return err
	}
	c.proxyUp = true
	if _, err := c.spawn("kube-proxy", bin("kube-proxy"), "--config", c.path("kube-proxy.yaml")); err != nil {
		return err
	}
	for _, d := range []string{"kubelet", "pod-logs"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	kubeletConf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroup layout is v1 (hybrid); the kubelet refuses it by
# default since 1.35.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://%s"
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [%q]
podCIDR: %q
podLogsDir: %q
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
serializeImagePulls: false
maxPods: 30
# No KUBE-FIREWALL / KUBE-IPTABLES-HINT chains in the machine's iptables:
# nothing here needs them (kube-proxy runs in nftables mode).
makeIPTablesUtilChains: false
`, c.sock, ports[4], ports[5], c.Gateway.String(), c.opts.PodCIDR, c.path("pod-logs"))
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(kubeletConf), 0o644); err != nil {
		return err
	}
	c.sysctls = map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			c.sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	_, err := c.spawn("kubelet", bin("kubelet"),
		"--config", c.path("kubelet.yaml"),
		"--kubeconfig", c.Kubeconfig,
		"--root-dir", c.path("kubelet"),
		"--hostname-override", c.NodeName,
		"--node-ip", c.NodeIP,
	)
	return err
}

func (c *Cluster) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = cond.Message
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready after %s: %s (see logs/kubelet.log)", c.NodeName, timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// createVolumes creates the default StorageClass (no provisioner) and
// hostPath PersistentVolumes of 1 GiB owned by 65532, the images' user:
// the in-tree hostPath provisioner makes root-owned directories, which
// the non-root pods could not write (fsGroup does not apply to hostPath).
func (c *Cluster) createVolumes(ctx context.Context) error {
	bind := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &bind,
		ReclaimPolicy:     &reclaim,
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return err
	}
	hpType := corev1.HostPathDirectory
	for i := range c.opts.PersistentVolumes {
		dir := c.path("pv", fmt.Sprintf("pv%02d", i))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		if err := os.Chown(dir, 65532, 65532); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-pv%02d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: reclaim,
				StorageClassName:              StorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hpType},
				},
			},
		}
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// LogTail returns the last n lines of a component's log (containerd,
// kubelet, kube-proxy, kube-scheduler, kube-controller-manager).
func (c *Cluster) LogTail(name string, n int) string {
	data, err := os.ReadFile(c.path("logs", name+".log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// PodLog returns the last n lines of the current log of a pod's
// containers, read from the kubelet's log directory.
func (c *Cluster) PodLog(ns, pod string, n int) string {
	dirs, _ := filepath.Glob(c.path("pod-logs", ns+"_"+pod+"_*", "*"))
	var b strings.Builder
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.log"))
		slices.Sort(files)
		if len(files) == 0 {
			continue
		}
		data, _ := os.ReadFile(files[len(files)-1])
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", files[len(files)-1], strings.Join(lines, "\n"))
	}
	return b.String()
}

// Stop tears everything down in reverse: the pods (through the API, so
// the kubelet stops their containers and releases their addresses), the
// processes, leftover containers and shims, mounts, network namespaces,
// kube-proxy's tables, the bridge, the pods' cgroups and the directory.
// It reports what it could not remove; it never stops early.
func (c *Cluster) Stop() []error {
	c.stopping.Store(true)
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
			fmt.Fprintf(c.log, "k8s-e2e: teardown: %v\n", err)
		}
	}
	if c.Client != nil && len(c.procs) > 0 {
		note(c.deleteAllPods())
	}
	// kubelet first (it would restart what is stopped under it), then
	// kube-proxy, the control plane, containerd last.
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if filepath.Base(p.Path) == "containerd" && c.sock != "" {
			note(c.removeContainers())
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		if !waitExit(p, 20*time.Second) {
			_ = p.Process.Kill()
			waitExit(p, 5*time.Second)
		}
	}
	c.procs = nil
	note(c.restoreSysctls())
	if c.sock != "" {
		note(c.killShims())
	}
	if c.dns != nil {
		c.dns.Close()
	}
	if c.apiProxy != nil {
		c.apiProxy.Close()
	}
	if c.api != nil {
		c.api.Stop()
	}
	if c.apiLog != nil {
		c.apiLog.Close()
	}
	note(c.unmountUnder(c.opts.Dir))
	note(c.removeNetns())
	if c.proxyUp {
		for _, fam := range []string{"ip", "ip6"} {
			if exec.Command("nft", "list", "table", fam, "kube-proxy").Run() == nil {
				note(run("nft", "delete", "table", fam, "kube-proxy"))
			}
		}
	}
	for _, r := range c.forwardRules()[:c.fwdRules] {
		note(run("iptables", append([]string{"-D", "FORWARD"}, r...)...))
	}
	if c.bridgeUp {
		note(run("ip", "link", "del", c.opts.Bridge))
	}
	note(removeCgroups("kubepods"))
	if c.opts.Dir != "" {
		note(os.RemoveAll(c.opts.Dir))
	}
	return errs
}

// kubeletSysctls are the kernel settings the kubelet sets at start
// (protectKernelDefaults: false); Stop puts back the values they had.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// restoreSysctls writes back the settings saved before the kubelet started.
func (c *Cluster) restoreSysctls() error {
	var errs []error
	for k, want := range c.sysctls {
		p := filepath.Join("/proc/sys", k)
		if v, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(v)) == want {
			continue
		}
		if err := os.WriteFile(p, []byte(want+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, want, err))
		}
	}
	return errors.Join(errs...)
}

// waitExit waits until p has exited (or is a zombie) or d has passed.
func waitExit(p *exec.Cmd, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.ProcessState != nil || syscall.Kill(p.Process.Pid, 0) != nil {
			return true
		}
		// A zombie until Wait reaps it: check its state.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid)); err == nil {
			if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
				time.Sleep(50 * time.Millisecond)
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// deleteAllPods deletes every pod and waits (60 s) until the kubelet has
// removed them, then force-deletes the rest.
func (c *Cluster) deleteAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	grace := int64(5)
	for _, ns := range nss.Items {
		// Controllers would recreate the pods: remove them first.
		apps := c.Client.AppsV1()
		_ = apps.StatefulSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = apps.DaemonSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = apps.Deployments(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = apps.ReplicaSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = c.Client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			zero := int64(0)
			var left []string
			if err == nil {
				for _, p := range pods.Items {
					left = append(left, p.Namespace+"/"+p.Name)
					_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				}
			}
			return fmt.Errorf("pods not removed by the kubelet in 60s (force-deleted): %v", left)
		}
		time.Sleep(time.Second)
	}
}

// removeContainers kills and deletes the containers the kubelet left in
// containerd's k8s.io namespace.
func (c *Cluster) removeContainers() error {
	out, err := exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
		time.Sleep(200 * time.Millisecond)
		_ = exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "tasks", "delete", "-f", id).Run()
	}
	out, err = exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "containers", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("ctr containers ls: %w", err)
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "containers", "delete", id).Run()
	}
	return nil
}

// killShims kills the runc shims our containerd started (they outlive
// it by design), found by the containerd address on their command line.
func (c *Cluster) killShims() error {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var killed []int
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) == 0 || !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		if !slices.Contains(args, c.sock) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	if len(killed) > 0 {
		fmt.Fprintf(c.log, "k8s-e2e: teardown: killed %d leftover shims %v\n", len(killed), killed)
	}
	return nil
}

// unmountUnder unmounts every mount point under dir, deepest first.
func (c *Cluster) unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	for range 3 { // stacked mounts come off one layer per pass
		mps, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		errs = errs[:0]
		for i := len(mps) - 1; i >= 0; i-- {
			if err := syscall.Unmount(mps[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mps[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	return mps, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeNetns removes the network namespaces of pods whose sandbox was
// not torn down by the CNI DEL (they appeared after Start).
func (c *Cluster) removeNetns() error {
	now, _ := filepath.Glob("/var/run/netns/cni-*")
	var errs []error
	for _, ns := range now {
		if slices.Contains(c.netnsKnown, ns) {
			continue
		}
		_ = syscall.Unmount(ns, syscall.MNT_DETACH)
		if err := os.Remove(ns); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the cgroup tree name (the kubelet's kubepods) from
// every v1 hierarchy and the unified one, deepest first. Cgroups that
// still hold processes stay and are reported.
func removeCgroups(name string) error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	if st, err := os.Stat("/sys/fs/cgroup/" + name); err == nil && st.IsDir() {
		roots = append(roots, "/sys/fs/cgroup/"+name)
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
