package compat

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCompat_Grpcurl lists a node's services by server reflection (on by
// default on a loopback listener) and calls grpc.health.v1.Health/Check
// with grpcurl, as an operator would without the .proto files; with
// tokens on, reflection needs one and the health call does not.
func TestCompat_Grpcurl(t *testing.T) {
	requireCompat(t)
	const token = "compat-token-0123456789abcdef"
	t.Setenv("TRIBUTARY_TOKEN", token)
	n := startNode(t, "--opentsdb-telnet-unauthenticated")
	grpcurl := func(args ...string) (string, error) {
		out, err := exec.Command(grpcurlBin, append([]string{"-plaintext", "-max-time", "10"}, args...)...).CombinedOutput()
		return string(out), err
	}
	auth := []string{"-H", "authorization: Bearer " + token}

	out, err := grpcurl(append(auth, n.grpc, "list")...)
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, svc := range []string{"tributary.v1.WriteService", "tributary.v1.QueryService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(out, svc+"\n") {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, out)
		}
	}
	out, err = grpcurl(append(auth, n.grpc, "describe", "tributary.v1.QueryService")...)
	if err != nil || !strings.Contains(out, "rpc ") {
		t.Errorf("grpcurl describe: %v\n%s", err, out)
	}
	// The token goes to the reflection calls only (grpcurl resolves the
	// method by reflection): the Check call itself carries none.
	reflectAuth := []string{"-reflect-header", "authorization: Bearer " + token}
	out, err = grpcurl(append(reflectAuth, n.grpc, "grpc.health.v1.Health/Check")...)
	if err != nil || !strings.Contains(out, `"status": "SERVING"`) {
		t.Errorf("Health/Check without a token: %v\n%s", err, out)
	}
	out, err = grpcurl(append(reflectAuth, "-d", `{"service":"tributary.v1.WriteService"}`, n.grpc, "grpc.health.v1.Health/Check")...)
	if err != nil || !strings.Contains(out, `"status": "SERVING"`) {
		t.Errorf("Health/Check of WriteService: %v\n%s", err, out)
	}
	out, err = grpcurl(n.grpc, "list")
	if err == nil || !strings.Contains(out, "Unauthenticated") {
		t.Errorf("reflection without a token: %v\n%s, want Unauthenticated", err, out)
	}
}
