package brokercmd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// TestMigrateStore moves a broker's state from bolt to a real API server
// (the documented migration), serves it from there, and copies it back to a
// fresh bolt directory (the Kubernetes store's backup).
func TestMigrateStore(t *testing.T) {
	p := resttest.NewPKI(t)
	data := t.TempDir()
	proc := startBroker(t, "--pki-dir", p.Dir, "--data-dir", data)
	prov := p.NewClient(t, "https://"+proc.APIAddr, "prov-a", api.RoleProvider, 1)
	cons := p.NewClient(t, "https://"+proc.APIAddr, "cons-a", api.RoleConsumer, 1)
	prov.Must(t, "POST", "/api/v1/advertisements", map[string]any{"clusterId": "prov-a", "liqoClusterId": "liqo-prov-a",
		"resources": map[string]string{"cpu": "8", "memory": "16Gi"}})
	cons.Must(t, "POST", "/api/v1/heartbeat", map[string]any{"clusterId": "cons-a", "liqoClusterId": "liqo-cons-a"})
	ids := []string{"res-m1", "res-m2", "res-m3"}
	for _, id := range ids {
		r := cons.Must(t, "POST", "/api/v1/reservations", api.ReservationRequest{ProviderClusterID: "prov-a", ChunkCount: 1, ChunkType: api.ChunkStandard}, api.HeaderReservationID, id)
		if r.Status != 201 {
			t.Fatalf("reserve %s: %d %s", id, r.Status, r.Body)
		}
	}
	if err := proc.Stop(t); err != nil {
		t.Fatal(err)
	}

	kube := kubeStoreArgs(t) // --store kubernetes --kubeconfig K --namespace N
	out, err := run(t, nil, append([]string{"broker", "migrate-store", "--from", "bolt", "--data-dir", data, "--to", "kubernetes"}, kube[2:]...)...)
	if err != nil || !strings.Contains(out, "records from bolt to kubernetes") {
		t.Fatalf("migrate bolt → kubernetes: %v\n%s", err, out)
	}
	var copied int
	if _, err := fmt.Sscanf(out[strings.Index(out, "copied"):], "copied %d", &copied); err != nil || copied < len(ids)+2 {
		t.Fatalf("copied %d records (%v), want the %d reservations, their instructions, the advertisement and the consumer:\n%s", copied, err, len(ids), out)
	}
	// Into a store that holds records: refused, nothing changed.
	out, err = run(t, nil, append([]string{"broker", "migrate-store", "--from", "bolt", "--data-dir", data, "--to", "kubernetes"}, kube[2:]...)...)
	if err == nil || !strings.Contains(out, "already holds") {
		t.Fatalf("a second migration into a full store: %v\n%s", err, out)
	}

	served := func(args ...string) {
		t.Helper()
		proc := startBroker(t, append([]string{"--pki-dir", p.Dir}, args...)...)
		c := p.NewClient(t, "https://"+proc.APIAddr, "cons-a", api.RoleConsumer, 1)
		for _, id := range ids {
			if r := c.Must(t, "GET", "/api/v1/reservations/"+id, nil); r.Status != 200 {
				t.Errorf("%v: reservation %s: %d %s", args, id, r.Status, r.Body)
			}
		}
		if err := proc.Stop(t); err != nil {
			t.Fatal(err)
		}
	}
	served(kube...)

	backup := t.TempDir()
	out, err = run(t, nil, append([]string{"broker", "migrate-store", "--from", "kubernetes", "--to", "bolt", "--data-dir", backup}, kube[2:]...)...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("copied %d records", copied)) {
		t.Fatalf("backup kubernetes → bolt: %v\n%s", err, out)
	}
	served("--data-dir", backup)

	if out, err := run(t, nil, "broker", "migrate-store", "--from", "bolt", "--to", "bolt", "--data-dir", backup); err == nil || !strings.Contains(out, "not the same") {
		t.Errorf("bolt → bolt: %v\n%s", err, out)
	}
}
