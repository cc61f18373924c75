package auth

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/tributarydb/tributary/internal/testcert"
)

// sentToken is the token the server side reads from what c sends.
func sentToken(t *testing.T, c interface {
	GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error)
}) string {
	t.Helper()
	m, err := c.GetRequestMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return fromMetadata(metadata.New(m))
}

func TestBearerCredentials_SendWhatTheServerReads(t *testing.T) {
	for _, secure := range []bool{false, true} {
		c := BearerCredentials("static-token-0123456789", secure)
		if got := sentToken(t, c); got != "static-token-0123456789" {
			t.Errorf("sent %q, want the token", got)
		}
		if c.RequireTransportSecurity() != secure {
			t.Errorf("RequireTransportSecurity = %v, want %v", c.RequireTransportSecurity(), secure)
		}
	}
}

func TestTokensBearerCredentials_SendTheReloadedToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	const first, second = "first-token-0123456789", "second-token-0123456789"
	testcert.WriteFile(t, path, []byte(first+"\n"))
	toks, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	c := toks.BearerCredentials(true)
	if got := sentToken(t, c); got != first {
		t.Fatalf("sent %q, want %q", got, first)
	}
	testcert.WriteFile(t, path, []byte(second+"\n"))
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}
	if got := sentToken(t, c); got != second {
		t.Fatalf("after the reload: sent %q, want %q", got, second)
	}
}
