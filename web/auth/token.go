// Package auth protects the web consoles: a login token kept only as a
// SHA-256 hash, server-side sessions in an HttpOnly SameSite=Strict cookie, a
// per-session CSRF token checked on every write, and the security headers
// every page carries.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MinTokenLength is the shortest login token accepted from an operator (a
// file, a Secret or a flag). Generated tokens are 43 characters (256 bits).
const MinTokenLength = 16

const hashPrefix = "sha256:"

// Verifier checks a login token.
type Verifier interface {
	Verify(token string) bool
}

// TokenStore verifies a login token against its SHA-256 hash; the token
// itself is never kept. A generated token has 256 bits of entropy, so a fast
// hash is appropriate (there is nothing to brute-force).
type TokenStore struct {
	hash [sha256.Size]byte
}

// OpenTokenStore loads the token hash stored at path. When the file does not
// exist it generates a token from random (crypto/rand.Reader when nil),
// writes its hash to path (mode 0600, parent directories 0700) and returns
// the token in fresh: the caller prints it once and never logs it. fresh is
// empty when an existing hash was loaded.
func OpenTokenStore(path string, random io.Reader) (ts *TokenStore, fresh string, err error) {
	if path == "" {
		return nil, "", errors.New("token store: empty path; set the console token file")
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		h, err := parseHash(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, "", fmt.Errorf("token store %s: %w (delete the file to generate a new token)", path, err)
		}
		return &TokenStore{hash: h}, "", nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("token store: read %s: %w", path, err)
	}
	token, err := GenerateToken(random)
	if err != nil {
		return nil, "", err
	}
	ts = &TokenStore{hash: sha256.Sum256([]byte(token))}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("token store: create directory for %s: %w", path, err)
	}
	// O_EXCL: two processes racing on first start must not both "win".
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("token store: create %s: %w", path, err)
	}
	if _, err := fmt.Fprintf(f, "%s%s\n", hashPrefix, hex.EncodeToString(ts.hash[:])); err != nil {
		_ = f.Close()
		return nil, "", fmt.Errorf("token store: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, "", fmt.Errorf("token store: write %s: %w", path, err)
	}
	return ts, token, nil
}

// NewStaticToken verifies against a token given by the operator (read from
// a file, a Kubernetes Secret or a flag). Only its hash is kept.
func NewStaticToken(token string) (*TokenStore, error) {
	token = strings.TrimSpace(token)
	if len(token) < MinTokenLength {
		return nil, fmt.Errorf("login token too short: %d characters, need at least %d", len(token), MinTokenLength)
	}
	return &TokenStore{hash: sha256.Sum256([]byte(token))}, nil
}

// TokenFromFile reads an operator-provided token (for example a mounted
// Secret) and returns a verifier for it.
func TokenFromFile(path string) (*TokenStore, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read login token file: %w", err)
	}
	ts, err := NewStaticToken(string(b))
	if err != nil {
		return nil, fmt.Errorf("login token file %s: %w", path, err)
	}
	return ts, nil
}

// GenerateToken returns a URL-safe 256-bit random token.
func GenerateToken(random io.Reader) (string, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [32]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Verify reports whether token is the login token, in constant time.
func (t *TokenStore) Verify(token string) bool {
	h := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1
}

func parseHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	hexed, ok := strings.CutPrefix(s, hashPrefix)
	if !ok {
		return h, fmt.Errorf("stored hash must start with %q", hashPrefix)
	}
	b, err := hex.DecodeString(hexed)
	if err != nil || len(b) != sha256.Size {
		return h, errors.New("stored hash is not 64 hex digits")
	}
	copy(h[:], b)
	return h, nil
}
