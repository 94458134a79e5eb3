package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenTokenStoreGeneratesOnceAndStoresOnlyTheHash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "console.token")
	ts, fresh, err := OpenTokenStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != 43 {
		t.Fatalf("fresh token %d characters, want 43 (256 bits, base64url)", len(fresh))
	}
	if !ts.Verify(fresh) || ts.Verify(fresh+"x") || ts.Verify("") {
		t.Fatal("Verify disagrees with the generated token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(fresh)) || !strings.HasPrefix(string(b), "sha256:") {
		t.Fatalf("the file must hold only the hash, got %q", b)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", st.Mode().Perm())
	}
	again, fresh2, err := OpenTokenStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh2 != "" {
		t.Fatal("a second start must not print a token again")
	}
	if !again.Verify(fresh) {
		t.Fatal("the reloaded store does not verify the original token")
	}
}

func TestOpenTokenStoreRejectsCorruptFile(t *testing.T) {
	for _, content := range []string{"hello", "sha256:zz", "sha256:abcd"} {
		path := filepath.Join(t.TempDir(), "t")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := OpenTokenStore(path, nil); err == nil || !strings.Contains(err.Error(), "delete the file") {
			t.Fatalf("%q: err %v, want a corrupt-file error telling what to do", content, err)
		}
	}
}

func TestStaticTokens(t *testing.T) {
	if _, err := NewStaticToken("short"); err == nil {
		t.Fatal("a 5-character token was accepted")
	}
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("a-long-enough-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := TokenFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !ts.Verify("a-long-enough-token") {
		t.Fatal("trailing newline of a Secret file must not matter")
	}
}

func TestSafeNext(t *testing.T) {
	cases := map[string]string{
		"":                     "/",
		"/":                    "/",
		"/reservations?x=1":    "/reservations?x=1",
		"//evil.example/":      "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"relative":             "/",
	}
	for in, want := range cases {
		if got := SafeNext(in); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
