package liqo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

const validKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: provider
  cluster: {server: "https://provider.example:6443"}
`

// fakeLiqoctl writes a liqoctl stand-in into a temporary folder. Each run
// appends its argv (one line, arguments separated by spaces) to argv.log and,
// for --remote-kubeconfig, copies the file's mode and content next to it. The
// script's behaviour is the shell snippet body, run after recording.
func fakeLiqoctl(t *testing.T, body string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "liqoctl")
	script := `#!/bin/sh
dir="$(dirname "$0")"
echo "$*" >> "$dir/argv.log"
prev=""
for a in "$@"; do
  if [ "$prev" = "--remote-kubeconfig" ]; then
    stat -c %a "$a" > "$dir/remote.mode"
    cat "$a" > "$dir/remote.content"
    echo "$a" > "$dir/remote.path"
  fi
  prev="$a"
done
` + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

func TestLiqoctlCommands(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		call     func(ctx context.Context, d *liqo.Liqoctl) (string, error)
		wantArgv string
		wantOut  string
		wantErr  string // substring; empty means success
		remote   bool   // a remote kubeconfig file must have been passed
		noKC     bool   // run without --kubeconfig
	}{
		{
			name: "generate prints the kubeconfig",
			body: "printf '\\n%s\\n\\n' '" + strings.ReplaceAll(validKubeconfig, "\n", "\n") + "'",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return d.GeneratePeeringUser(ctx, "liqo-consumer-1")
			},
			wantArgv: "generate peering-user --consumer-cluster-id liqo-consumer-1 --kubeconfig /etc/local.kubeconfig --skip-confirm",
			wantOut:  strings.TrimSpace(validKubeconfig),
		},
		{
			name:    "generate printing no kubeconfig is an error",
			body:    "echo done",
			call:    func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return d.GeneratePeeringUser(ctx, "c1") },
			wantErr: "printed no kubeconfig",
		},
		{
			name:    "generate failure carries redacted stderr",
			body:    "echo 'error: secret exists; client-key-data: QUJDREVG' >&2; exit 1",
			call:    func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return d.GeneratePeeringUser(ctx, "c1") },
			wantErr: "liqoctl generate peering-user failed: exit status 1: error: secret exists; client-key-data: [redacted]",
		},
		{
			name: "delete peering user",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.DeletePeeringUser(ctx, "liqo-consumer-1")
			},
			wantArgv: "delete peering-user --consumer-cluster-id liqo-consumer-1 --kubeconfig /etc/local.kubeconfig --skip-confirm",
		},
		{
			// liqoctl v1.1.2 deletes an absent user without error; a "not
			// found" is something else (here: Liqo not installed) and fails.
			name:    "a not-found from delete is not guessed to be success",
			body:    "echo 'ERRO  configmaps \"clusterid-configmap\" not found' >&2; exit 1",
			call:    func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return "", d.DeletePeeringUser(ctx, "c1") },
			wantErr: `configmaps "clusterid-configmap" not found`,
		},
		{
			// A retry finds the CSR of an attempt whose answer was lost:
			// the user is deleted and generated afresh.
			name: "generate after a partial user deletes it and generates again",
			body: `case "$1" in
generate) if [ ! -f "$dir/generated-once" ]; then touch "$dir/generated-once"
  echo 'ERRO  unable to generate certificate for the user: certificatesigningrequests.certificates.k8s.io "liqo-peer-user-c1" already exists' >&2; exit 1; fi
  printf '%s\n' '` + validKubeconfig + `';;
esac`,
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return d.GeneratePeeringUser(ctx, "c1") },
			wantArgv: "generate peering-user --consumer-cluster-id c1 --skip-confirm\n" +
				"delete peering-user --consumer-cluster-id c1 --skip-confirm\n" +
				"generate peering-user --consumer-cluster-id c1 --skip-confirm",
			wantOut: strings.TrimSpace(validKubeconfig),
			noKC:    true,
		},
		{
			name:    "generate after a partial user whose delete fails reports both",
			body:    `echo "ERRO  $1: rolebindings \"x\" already exists" >&2; exit 1`,
			call:    func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return d.GeneratePeeringUser(ctx, "c1") },
			wantErr: "ERRO  delete: rolebindings",
		},
		{
			name:    "delete other failure",
			body:    "echo 'forbidden' >&2; exit 2",
			call:    func(ctx context.Context, d *liqo.Liqoctl) (string, error) { return "", d.DeletePeeringUser(ctx, "c1") },
			wantErr: "exit status 2: forbidden",
		},
		{
			name: "peer",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Peer(ctx, "liqo-provider-1", validKubeconfig)
			},
			wantArgv: "peer --remote-kubeconfig <remote> --gw-server-service-type NodePort --create-resource-slice=false --timeout 9m55s --kubeconfig /etc/local.kubeconfig --skip-confirm",
			remote:   true,
		},
		{
			name: "peer failure",
			body: "echo 'network not ready' >&2; exit 1",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Peer(ctx, "p1", validKubeconfig)
			},
			wantErr: "liqoctl peer failed: exit status 1: network not ready",
			remote:  true,
		},
		{
			name: "peer without a kubeconfig",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Peer(ctx, "p1", "  ")
			},
			wantErr: "no kubeconfig for provider p1",
		},
		{
			name: "unpeer",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Unpeer(ctx, "liqo-provider-1", validKubeconfig)
			},
			wantArgv: "unpeer --remote-kubeconfig <remote> --timeout 55s --kubeconfig /etc/local.kubeconfig --skip-confirm",
			remote:   true,
		},
		{
			// The provider revoked the credential: liqoctl unpeer cannot read
			// its cluster id; force unpeer tears the peering down locally.
			name: "unpeer falls back to force unpeer when the provider refuses",
			body: `case "$1" in unpeer) echo 'ERRO  an error occurred while retrieving cluster id: Unauthorized' >&2; exit 1;; esac`,
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Unpeer(ctx, "p1", validKubeconfig)
			},
			wantArgv: "unpeer --remote-kubeconfig <remote> --timeout 55s --kubeconfig /etc/local.kubeconfig --skip-confirm\n" +
				"force unpeer p1 --kubeconfig /etc/local.kubeconfig --skip-confirm",
			remote: true,
		},
		{
			name: "unpeer without the credential goes straight to force unpeer",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Unpeer(ctx, "p1", "")
			},
			wantArgv: "force unpeer p1 --kubeconfig /etc/local.kubeconfig --skip-confirm",
		},
		{
			name: "unpeer of a provider whose ForeignCluster is gone is success",
			// liqoctl v1.1.2's own words (its spinner leaves %s unformatted).
			body: `case "$1" in unpeer) echo 'ERRO  Unauthorized' >&2; exit 1;; force) echo 'Retrieving remote cluster info...'; echo 'ERRO: Remote cluster with ID %s not foundp1'; exit 1;; esac`,
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Unpeer(ctx, "p1", validKubeconfig)
			},
			remote: true,
		},
		{
			// Without Liqo, neither command works: an error, never success.
			name: "unpeer on a cluster without Liqo is an error",
			body: `case "$1" in unpeer) echo 'ERRO  configmaps "clusterid-configmap" not found' >&2; exit 1;; force) echo 'ERRO  no matches for kind "ForeignCluster"' >&2; exit 1;; esac`,
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return "", d.Unpeer(ctx, "p1", validKubeconfig)
			},
			wantErr: `no matches for kind "ForeignCluster"`,
			remote:  true,
		},
		{
			name: "invalid cluster id is refused before running liqoctl",
			call: func(ctx context.Context, d *liqo.Liqoctl) (string, error) {
				return d.GeneratePeeringUser(ctx, "Bad_ID")
			},
			wantErr: `consumer Liqo cluster id "Bad_ID" is not a valid Liqo cluster id`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, dir := fakeLiqoctl(t, tt.body)
			kc := "/etc/local.kubeconfig"
			if tt.noKC {
				kc = ""
			}
			d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: path, Kubeconfig: kc, TempDir: t.TempDir()})
			out, err := tt.call(context.Background(), d)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			if out != tt.wantOut {
				t.Errorf("output = %q, want %q", out, tt.wantOut)
			}
			if tt.wantArgv != "" {
				argv := readFile(t, filepath.Join(dir, "argv.log"))
				if tt.remote {
					argv = strings.Replace(argv, readFile(t, filepath.Join(dir, "remote.path")), "<remote>", 1)
				}
				if argv != tt.wantArgv {
					t.Errorf("argv = %q\n          want %q", argv, tt.wantArgv)
				}
			}
			if tt.remote {
				if mode := readFile(t, filepath.Join(dir, "remote.mode")); mode != "600" {
					t.Errorf("remote kubeconfig mode = %s, want 600", mode)
				}
				if got := readFile(t, filepath.Join(dir, "remote.content")); got != strings.TrimSpace(validKubeconfig) {
					t.Errorf("remote kubeconfig content = %q", got)
				}
				if _, err := os.Stat(readFile(t, filepath.Join(dir, "remote.path"))); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("remote kubeconfig file still exists after the call (stat: %v)", err)
				}
			}
			if tt.wantErr != "" && strings.Contains(tt.wantErr, "not a valid") {
				if _, err := os.Stat(filepath.Join(dir, "argv.log")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("liqoctl ran despite an invalid id")
				}
			}
		})
	}
}

func TestLiqoctlTimeoutKillsTheCommand(t *testing.T) {
	path, _ := fakeLiqoctl(t, "exec sleep 30")
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: path, DeletePeeringUserTimeout: 200 * time.Millisecond})
	start := time.Now()
	err := d.DeletePeeringUser(context.Background(), "c1")
	var ce *liqo.CommandError
	if !errors.As(err, &ce) || !ce.TimedOut {
		t.Fatalf("error = %v, want a timed-out CommandError", err)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the call took %s; the timeout was 200ms", el)
	}
}

func TestLiqoctlMissingBinary(t *testing.T) {
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: filepath.Join(t.TempDir(), "no-liqoctl")})
	err := d.DeletePeeringUser(context.Background(), "c1")
	if err == nil || !strings.Contains(err.Error(), "liqoctl delete peering-user failed") {
		t.Fatalf("error = %v, want a failure naming the command", err)
	}
}

func TestLongOutputIsCapped(t *testing.T) {
	path, _ := fakeLiqoctl(t, "i=0; while [ $i -lt 500 ]; do echo 'a long line of liqoctl output' >&2; i=$((i+1)); done; exit 1")
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: path})
	err := d.DeletePeeringUser(context.Background(), "c1")
	var ce *liqo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want a CommandError", err)
	}
	if len(ce.Output) > 2100 {
		t.Errorf("output carried in the error is %d bytes, want ≤ ~2 KiB", len(ce.Output))
	}
}

func TestPEMIsRedacted(t *testing.T) {
	path, _ := fakeLiqoctl(t, "printf 'bad cert\\n-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n' >&2; exit 1")
	d := liqo.NewLiqoctl(liqo.LiqoctlOptions{Path: path})
	err := d.Peer(context.Background(), "p1", validKubeconfig)
	if err == nil || strings.Contains(err.Error(), "MIIB") || !strings.Contains(err.Error(), "[redacted PEM]") {
		t.Fatalf("error = %v, want the PEM block redacted", err)
	}
}
