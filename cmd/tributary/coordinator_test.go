package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/internal/testcert"
)

func coordinatorOptions(f coordinatorFlags, clusterListen string) (coordinator.Options, error) {
	o := coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: "d", ClusterListen: clusterListen, IntakeListen: "127.0.0.1:7443"}
	f.retainRaw, f.retain1h, f.retain1d = 24*time.Hour, 24*time.Hour, 24*time.Hour
	err := f.apply(&o, false)
	return o, err
}

func TestCoordinatorFlags_TLS(t *testing.T) {
	c := testcert.New(t)
	tok := filepath.Join(t.TempDir(), "edge-token")
	if err := os.WriteFile(tok, []byte("# edges' token\nsecret-token-of-16-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	edge := testcert.New(t)
	o, err := coordinatorOptions(coordinatorFlags{peerCert: c.CertFile, peerKey: c.KeyFile, ca: c.CertFile, edgeCA: edge.CertFile, edgeTokenFile: tok}, "127.0.0.1:7444")
	if err != nil {
		t.Fatal(err)
	}
	if o.Insecure || o.ClusterServerTLS == nil || o.ClusterClientTLS == nil || o.IntakeTLS == nil {
		t.Fatalf("TLS options not all set: %+v", o)
	}
	// Each listener trusts its own CA only.
	if !o.ClusterServerTLS.ClientCAs.Equal(c.Pool) || !o.IntakeTLS.ClientCAs.Equal(edge.Pool) {
		t.Fatal("the cluster listener does not trust exactly --peer-ca, or the intake exactly --edge-ca")
	}
	// Edge queries get the coordinator's TLS identity and the token.
	if len(o.EdgeDialOptions) != 2 {
		t.Fatalf("%d edge dial options, want TLS credentials and the token", len(o.EdgeDialOptions))
	}
}

func TestCoordinatorFlags_Refused(t *testing.T) {
	c := testcert.New(t)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	cases := map[string]struct {
		f      coordinatorFlags
		listen string
	}{
		"no TLS and not insecure":  {coordinatorFlags{}, "127.0.0.1:7444"},
		"insecure and cert":        {coordinatorFlags{insecureCluster: true, peerCert: c.CertFile}, "127.0.0.1:7444"},
		"key missing":              {coordinatorFlags{peerCert: c.CertFile, ca: c.CertFile}, "127.0.0.1:7444"},
		"empty edge token file":    {coordinatorFlags{peerCert: c.CertFile, peerKey: c.KeyFile, ca: c.CertFile, edgeCA: testcert.New(t).CertFile, edgeTokenFile: empty}, "127.0.0.1:7444"},
		"no edge CA":               {coordinatorFlags{peerCert: c.CertFile, peerKey: c.KeyFile, ca: c.CertFile}, "127.0.0.1:7444"},
		"insecure and shared CA":   {coordinatorFlags{insecureCluster: true, allowSharedCA: true}, "127.0.0.1:7444"},
		"peers without self":       {coordinatorFlags{insecureCluster: true, peers: "2=c2@127.0.0.1:1"}, "127.0.0.1:7444"},
		"peers malformed":          {coordinatorFlags{insecureCluster: true, peers: "1=c1"}, "127.0.0.1:7444"},
		"insecure on non-loopback": {coordinatorFlags{insecureCluster: true}, "10.1.2.3:7444"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := coordinatorOptions(tc.f, tc.listen); !errors.Is(err, errUsage) {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}

func TestCoordinatorFlags_SharedCARefusedUnlessAllowed(t *testing.T) {
	c := testcert.New(t)
	// The same CA certificate in another file, after another certificate:
	// the files differ, the CA does not.
	pem, err := os.ReadFile(c.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(testcert.New(t).CertFile)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "edge-bundle.pem")
	if err := os.WriteFile(bundle, append(other, pem...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, edgeCA := range []string{c.CertFile, bundle} {
		f := coordinatorFlags{peerCert: c.CertFile, peerKey: c.KeyFile, ca: c.CertFile, edgeCA: edgeCA}
		_, err := coordinatorOptions(f, "127.0.0.1:7444")
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--allow-shared-ca") || !strings.Contains(err.Error(), "cluster listener") {
			t.Fatalf("--edge-ca %s: err = %v, want a usage error explaining the shared CA and naming --allow-shared-ca", edgeCA, err)
		}
		f.allowSharedCA = true
		o, err := coordinatorOptions(f, "127.0.0.1:7444")
		if err != nil {
			t.Fatalf("--edge-ca %s with --allow-shared-ca: %v", edgeCA, err)
		}
		if o.IntakeTLS == nil || o.ClusterServerTLS == nil {
			t.Fatal("TLS options not set")
		}
	}
}

func TestCoordinatorFlags_QueryMaxStaleness(t *testing.T) {
	for _, local := range []bool{false, true} {
		fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
		var f coordinatorFlags
		var o coordinator.Options
		f.register(fs, &o, local)
		if err := fs.Parse(nil); err != nil || o.QueryMaxStaleness != 0 {
			t.Fatalf("local %v: default %s %v, want 0 (always fresh)", local, o.QueryMaxStaleness, err)
		}
		if err := fs.Parse([]string{"--query-max-staleness=30s"}); err != nil || o.QueryMaxStaleness != 30*time.Second {
			t.Fatalf("local %v: --query-max-staleness=30s gave %s %v", local, o.QueryMaxStaleness, err)
		}
	}
	o := coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: "d", QueryMaxStaleness: -time.Second}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "negative QueryMaxStaleness") {
		t.Fatalf("negative staleness: %v", err)
	}
}
