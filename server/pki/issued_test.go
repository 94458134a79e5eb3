package pki

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestJoinRefusesTheOtherRoleAndOverwrites(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	bundle := func(name string) string { return filepath.Join(out, name+".tar.gz") }
	join := func(id string, role api.Role, path string, force bool) error {
		return WriteJoinBundle(dir, id, role, "https://b:8443", path, force, t0)
	}
	if err := join("c1", api.RoleConsumer, bundle("c1"), false); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(bundle("c1"))
	for _, tt := range []struct {
		name    string
		id      string
		role    api.Role
		path    string
		force   bool
		wantErr string // "" = accepted
	}{
		{"other role, new file", "c1", api.RoleProvider, bundle("c1-as-provider"), false, `cluster id "c1" already holds a consumer certificate`},
		{"other role, --force does not help", "c1", api.RoleProvider, bundle("c1-as-provider"), true, `already holds a consumer certificate`},
		{"same id and role, existing file", "c1", api.RoleConsumer, bundle("c1"), false, "already exists: refusing to overwrite a join bundle"},
		{"another cluster, existing file", "c2", api.RoleConsumer, bundle("c1"), false, "use --force to replace it"},
		{"same id and role, --force replaces", "c1", api.RoleConsumer, bundle("c1"), true, ""},
		{"same id and role, new file (re-issue)", "c1", api.RoleConsumer, bundle("c1-again"), false, ""},
		{"another cluster, other role", "p1", api.RoleProvider, bundle("p1"), false, ""},
		{"that provider as a consumer", "p1", api.RoleConsumer, bundle("p1-as-consumer"), false, `cluster id "p1" already holds a provider certificate`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, existed := os.Stat(tt.path)
			err := join(tt.id, tt.role, tt.path, tt.force)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := LoadBundleBytes(mustRead(t, tt.path)); err != nil || b.ClusterID != tt.id || b.Role != tt.role {
					t.Fatalf("bundle %+v, %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if existed != nil {
				if _, err := os.Stat(tt.path); !os.IsNotExist(err) {
					t.Fatalf("a refused join wrote %s", tt.path)
				}
			}
		})
	}
	if after, _ := os.ReadFile(bundle("c1")); string(after) == string(before) {
		t.Error("--force did not replace the bundle")
	}
	issued, err := ReadIssued(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range issued {
		got = append(got, c.ClusterID+"/"+string(c.Role))
		if c.Serial == "" || !c.NotAfter.After(c.IssuedAt) {
			t.Errorf("entry %+v lacks serial or validity", c)
		}
	}
	if want := "c1/consumer c1/consumer c1/consumer p1/provider"; strings.Join(got, " ") != want {
		t.Fatalf("registry = %v, want %s", got, want)
	}
	// A new CA forgets every certificate: the id may take the other role.
	if err := Init(dir, nil, true, t0); err != nil {
		t.Fatal(err)
	}
	if err := join("c1", api.RoleProvider, bundle("c1-new-ca"), false); err != nil {
		t.Fatalf("after pki init --force: %v", err)
	}
}

func TestJoinWithoutRegistryAndDamagedRegistry(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	// A PKI directory from before the registry: joins work and start it.
	if err := os.Remove(filepath.Join(dir, IssuedFile)); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := WriteJoinBundle(dir, "c1", api.RoleConsumer, "https://b", filepath.Join(out, "a"), false, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadIssued(dir); err != nil || len(got) != 1 {
		t.Fatalf("registry after the first join: %v, %v", got, err)
	}
	for name, content := range map[string]string{
		"truncated":     `{"certificates":[{"clusterId":"c1"`,
		"unknown field": `{"certificates":[],"x":1}`,
		"bad entry":     `{"certificates":[{"clusterId":"C 1","role":"consumer"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, IssuedFile), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(out, "damaged-"+strings.ReplaceAll(name, " ", "-"))
			err := WriteJoinBundle(dir, "c9", api.RoleConsumer, "https://b", path, false, t0)
			if err == nil || !strings.Contains(err.Error(), "is damaged") || !strings.Contains(err.Error(), "restore it from a backup") {
				t.Fatalf("err = %v, want a damaged-registry refusal", err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatal("a bundle was written with a damaged registry")
			}
		})
	}
}

// Concurrent joins of one PKI directory lose no entry.
func TestJoinConcurrentRegistry(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, nil, false, t0); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "c" + string(rune('a'+i))
			errs <- WriteJoinBundle(dir, id, api.RoleConsumer, "https://b", filepath.Join(out, id), false, time.Now())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, err := ReadIssued(dir); err != nil || len(got) != n {
		t.Fatalf("registry holds %d entries (%v), want %d", len(got), err, n)
	}
}
