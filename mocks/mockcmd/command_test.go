package mockcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
)

func run(ctx context.Context, args ...string) error {
	root := cli.NewRoot(NewGeoCommand(), NewEcoCommand())
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func TestBadDataRefused(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("regions:\n  X: [1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"mock-geo", "mock-eco"} {
		err := run(context.Background(), cmd, "--listen", "127.0.0.1:0", "--data", bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: err = %v, want one naming %s", cmd, err, bad)
		}
	}
	t.Setenv("FA_DATA", filepath.Join(t.TempDir(), "missing.json"))
	if err := run(context.Background(), "mock-eco", "--listen", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("FA_DATA not honoured: %v", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, cmd := range []string{"mock-geo", "mock-eco"} {
		if err := run(ctx, cmd, "--listen", "127.0.0.1:0"); err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
	}
	if err := run(context.Background(), "mock-geo", "--listen", "256.0.0.1:x"); err == nil {
		t.Error("bad --listen accepted")
	}
}
