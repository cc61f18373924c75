package auth

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Tokens is the set of accepted bearer tokens. The zero value (no tokens)
// accepts every request: authentication is off.
//
// Tokens read from a file (LoadTokens) follow the file: Watch and Reload
// read it again, and every copy of the value sees the new list at once. A
// reload never empties the set, so Enabled does not change while the
// process runs.
type Tokens struct {
	static [][]byte
	file   *watched[tokenList] // nil: no token file
}

type tokenList struct{ list [][]byte }

// NewTokens returns a set holding the non-empty tokens given.
func NewTokens(tokens ...string) Tokens {
	var t Tokens
	for _, s := range tokens {
		if s = strings.TrimSpace(s); s != "" {
			t.static = append(t.static, []byte(s))
		}
	}
	return t
}

// LoadTokens reads tokens from a file, one per line; blank lines and lines
// starting with '#' are ignored. The set follows later changes to the
// file (see Watch and Reload); a changed file that does not parse, or
// holds no token, leaves the previous tokens in force.
func LoadTokens(path string) (Tokens, error) {
	w, err := newWatched(KindTokens, "token file "+path, func() (*tokenList, error) { return parseTokenFile(path) }, path)
	if err != nil {
		return Tokens{}, err
	}
	return Tokens{file: w}, nil
}

func parseTokenFile(path string) (*tokenList, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	var list [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for ln := 1; sc.Scan(); ln++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) < 16 {
			return nil, fmt.Errorf("token file %s line %d: token is %d characters; use at least 16", path, ln, len(s))
		}
		list = append(list, []byte(s))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read token file %s: %w", path, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("token file %s holds no tokens", path)
	}
	return &tokenList{list: list}, nil
}

// lists returns the token lists in force: the file's first.
func (t Tokens) lists() [2][][]byte {
	var out [2][][]byte
	if t.file != nil {
		out[0] = t.file.load().list
	}
	out[1] = t.static
	return out
}

// First returns the first token of the set ("" when empty): the one a
// client sends.
func (t Tokens) First() string {
	for _, l := range t.lists() {
		if len(l) > 0 {
			return string(l[0])
		}
	}
	return ""
}

// Enabled reports whether requests must carry a token.
func (t Tokens) Enabled() bool { return t.file != nil || len(t.static) > 0 }

// Valid reports whether tok is one of the accepted tokens, in time that
// does not depend on where the tokens differ.
func (t Tokens) Valid(tok string) bool {
	if !t.Enabled() {
		return true
	}
	ok := 0
	for _, l := range t.lists() {
		for _, want := range l {
			ok |= subtle.ConstantTimeCompare(want, []byte(tok))
		}
	}
	return ok == 1 && tok != ""
}

// With returns a set holding t's tokens (following its file, if any) and
// the non-empty ones given.
func (t Tokens) With(tokens ...string) Tokens {
	out := Tokens{static: append([][]byte(nil), t.static...), file: t.file}
	out.static = append(out.static, NewTokens(tokens...).static...)
	return out
}

// ErrNoToken and ErrBadToken are the two ways a request fails
// authentication.
var (
	ErrNoToken  = errors.New("authentication required: send 'Authorization: Bearer <token>'")
	ErrBadToken = errors.New("the token is not valid")
)
