package rest_test

import (
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

// Identity is role + name: over real mTLS, every call of a certificate of
// the other role named like a member, and of another member of the same
// role, on anything of that member is refused with 403 Forbidden, and
// their instruction lists never hold the member's instructions.
func TestCrossRoleAndCrossTenantCallsAreRefused(t *testing.T) {
	b := startBroker(t)
	provA := b.client(t, "prov-a", api.RoleProvider)
	provC := b.client(t, "prov-c", api.RoleProvider)
	consA := b.client(t, "cons-a", api.RoleConsumer)
	for _, p := range []struct {
		c  *resttest.Client
		id string
	}{{provA, "prov-a"}, {provC, "prov-c"}} {
		expect(t, p.c.Must(t, "POST", "/api/v1/advertisements", advertisement(p.id, 4)), 200, "")
	}
	expect(t, consA.Must(t, "POST", "/api/v1/heartbeat", heartbeat("cons-a")), 200, "")
	// res-1 on prov-a: kubeconfig delivered, its Peer (kubeconfig inlined)
	// waits for cons-a. res-2 on prov-c: its GenerateKubeconfig waits.
	expect(t, consA.Must(t, "POST", "/api/v1/reservations", reservation("prov-a"), api.HeaderReservationID, "res-1"), 201, "")
	expect(t, consA.Must(t, "POST", "/api/v1/reservations", reservation("prov-c"), api.HeaderReservationID, "res-2"), 201, "")
	gkA := waitInstruction(t, provA, api.KindGenerateKubeconfig, "res-1")
	gkC := waitInstruction(t, provC, api.KindGenerateKubeconfig, "res-2")
	kubeconfig := map[string]any{"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadKubeconfig, "kubeconfig": "apiVersion: v1\nkind: Config\n# secret\n"}}
	expect(t, provA.Must(t, "POST", "/api/v1/instructions/"+gkA.ID+"/result", kubeconfig), 200, "")
	peer := waitInstruction(t, consA, api.KindPeer, "res-1")
	if !strings.Contains(peer.Kubeconfig, "# secret") {
		t.Fatalf("the consumer's Peer lacks the kubeconfig: %+v", peer)
	}

	clients := map[string]*resttest.Client{
		"provider named cons-a": b.client(t, "cons-a", api.RoleProvider),
		"consumer named prov-c": b.client(t, "prov-c", api.RoleConsumer),
		"consumer cons-b":       b.client(t, "cons-b", api.RoleConsumer),
		"provider prov-b":       b.client(t, "prov-b", api.RoleProvider),
	}
	peered := map[string]any{"status": "Succeeded", "payload": map[string]any{"kind": api.PayloadPeer, "virtualNodeNames": []string{"forged"}}}
	refused := []struct {
		who, method, path string
		body              any
	}{
		// A provider certificate named like the consumer.
		{"provider named cons-a", "POST", "/api/v1/instructions/" + peer.ID + "/result", peered},
		{"provider named cons-a", "GET", "/api/v1/reservations/res-1", nil},
		{"provider named cons-a", "DELETE", "/api/v1/reservations/res-1", nil},
		{"provider named cons-a", "POST", "/api/v1/heartbeat", heartbeat("cons-a")},
		{"provider named cons-a", "GET", "/api/v1/nodegroups", nil},
		{"provider named cons-a", "POST", "/api/v1/reservations", reservation("prov-a")},
		// A consumer certificate named like a provider.
		{"consumer named prov-c", "POST", "/api/v1/instructions/" + gkC.ID + "/result", kubeconfig},
		{"consumer named prov-c", "GET", "/api/v1/reservations/res-2", nil},
		{"consumer named prov-c", "POST", "/api/v1/advertisements", advertisement("prov-c", 4)},
		{"consumer named prov-c", "GET", "/api/v1/advertisements/prov-c", nil},
		// Another consumer.
		{"consumer cons-b", "POST", "/api/v1/instructions/" + peer.ID + "/result", peered},
		{"consumer cons-b", "GET", "/api/v1/reservations/res-1", nil},
		{"consumer cons-b", "DELETE", "/api/v1/reservations/res-1", nil},
		{"consumer cons-b", "POST", "/api/v1/heartbeat", heartbeat("cons-a")},
		// Another provider.
		{"provider prov-b", "POST", "/api/v1/instructions/" + gkC.ID + "/result", kubeconfig},
		{"provider prov-b", "GET", "/api/v1/reservations/res-1", nil},
		{"provider prov-b", "GET", "/api/v1/advertisements/prov-a", nil},
		{"provider prov-b", "POST", "/api/v1/advertisements", advertisement("prov-a", 4)},
	}
	for _, tt := range refused {
		t.Run(tt.who+" "+tt.method+" "+tt.path, func(t *testing.T) {
			r := clients[tt.who].Must(t, tt.method, tt.path, tt.body)
			expect(t, r, 403, api.CodeForbidden)
		})
	}
	for who, c := range clients {
		for _, q := range []string{"", "?wait=10ms"} {
			t.Run(who+" lists instructions"+q, func(t *testing.T) {
				r := c.Must(t, "GET", "/api/v1/instructions"+q, nil)
				expect(t, r, 200, "")
				if string(r.Body) != `{"instructions":[]}` {
					t.Fatalf("%s was handed instructions: %s", who, r.Body)
				}
			})
		}
	}
	// Nothing changed: the Peer still waits for cons-a, res-2 for its kubeconfig.
	if again := waitInstruction(t, consA, api.KindPeer, "res-1"); again.ID != peer.ID {
		t.Fatalf("Peer %s, want %s", again.ID, peer.ID)
	}
	if got := getReservation(t, consA, "res-1"); got.Status != api.PhasePeering || len(got.VirtualNodeNames) != 0 {
		t.Fatalf("res-1 = %s %v after refused calls", got.Status, got.VirtualNodeNames)
	}
	if got := getReservation(t, consA, "res-2"); got.Status != api.PhaseGeneratingKubeconfig {
		t.Fatalf("res-2 = %s after refused calls", got.Status)
	}
	// The member itself may.
	getReservation(t, provA, "res-1")
	expect(t, consA.Must(t, "POST", "/api/v1/instructions/"+peer.ID+"/result", peered), 200, "")
}
