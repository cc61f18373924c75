package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/internal/testcert"
)

func TestCAPool_ReadsABundleAndNamesTheFlagOfABadOne(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, testcert.NewCA(t).CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pool, err := caPool("tls-ca", good); err != nil || pool == nil {
		t.Fatalf("a CA bundle: pool %v, err %v", pool, err)
	}
	_, err := caPool("tls-ca", filepath.Join(dir, "missing.pem"))
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "--tls-ca: ") {
		t.Errorf("a missing file: %v", err)
	}
	_, err = caPool("mqtt-ca", empty)
	if err == nil || err.Error() != "--mqtt-ca "+empty+": no PEM certificate in it" {
		t.Errorf("a file without a certificate: %v", err)
	}
}
