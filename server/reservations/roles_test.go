package reservations

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// A cluster id names one cluster per role: a provider certificate named
// like a consumer (or the reverse) never sees or answers the other's
// instructions, nor reads its reservations. A legacy certificate (role "")
// acts as both.
func TestRolesSeparateInstructionsAndReservations(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 2)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	gk := gkName("c1", "p1")
	e.mustFind("p1", gk)
	e.result("p1", gk, kubeconfig("secret-kubeconfig"))
	peer := e.mustFind("c1", peerName("r1"))
	if peer.Kubeconfig != "secret-kubeconfig" {
		t.Fatalf("the consumer's Peer lacks the kubeconfig: %+v", peer)
	}
	e.reserve("c1", "r2", "p1") // a second GenerateKubeconfig-free reservation: Peer only
	views := func(cn string, role api.Role) []string {
		v, err := e.s.Instructions(e.ctx, cn, role, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ids(v)
	}
	for _, tt := range []struct {
		name string
		cn   string
		role api.Role
		want string
	}{
		{"the consumer", "c1", api.RoleConsumer, "peer-r1,peer-r2"},
		{"a provider certificate named like the consumer", "c1", api.RoleProvider, ""},
		{"a consumer certificate named like the provider", "p1", api.RoleConsumer, ""},
		{"a legacy certificate of the consumer", "c1", "", "peer-r1,peer-r2"},
	} {
		t.Run("instructions: "+tt.name, func(t *testing.T) {
			if got := strings.Join(views(tt.cn, tt.role), ","); got != tt.want {
				t.Fatalf("instructions = %q, want %q", got, tt.want)
			}
		})
	}
	// The provider named like the consumer advertises: the piggybacked
	// instructions are provider instructions only.
	resp := e.advertise("c1", 1)
	for _, in := range resp.Instructions {
		if in.Kind == api.KindPeer || in.Kubeconfig != "" {
			t.Fatalf("an advertisement by %q was answered with the consumer's %s", "c1", in.ID)
		}
	}
	for _, tt := range []struct {
		name, cn string
		role     api.Role
		id       string
		code     string
	}{
		{"provider certificate named like the consumer answers its Peer", "c1", api.RoleProvider, peerName("r1"), api.CodeForbidden},
		{"another consumer answers the Peer", "c2", api.RoleConsumer, peerName("r1"), api.CodeForbidden},
	} {
		t.Run("result: "+tt.name, func(t *testing.T) {
			wantCode(t, e.s.PostResult(e.ctx, tt.cn, tt.role, tt.id, peered("vn")), tt.code)
		})
	}
	for _, tt := range []struct {
		name string
		cn   string
		role api.Role
		code string // "" = allowed
	}{
		{"its consumer", "c1", api.RoleConsumer, ""},
		{"its provider", "p1", api.RoleProvider, ""},
		{"its consumer, legacy certificate", "c1", "", ""},
		{"its provider, legacy certificate", "p1", "", ""},
		{"a provider certificate named like its consumer", "c1", api.RoleProvider, api.CodeForbidden},
		{"a consumer certificate named like its provider", "p1", api.RoleConsumer, api.CodeForbidden},
		{"another consumer", "c2", api.RoleConsumer, api.CodeForbidden},
		{"another provider", "p2", api.RoleProvider, api.CodeForbidden},
	} {
		t.Run("reservation: "+tt.name, func(t *testing.T) {
			_, err := e.s.Reservation(e.ctx, tt.cn, tt.role, "r1")
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
	// The real consumer still answers its Peer.
	if err := e.s.PostResult(e.ctx, "c1", api.RoleConsumer, peerName("r1"), peered("vn-r1")); err != nil {
		t.Fatal(err)
	}
	// A gk answered by a consumer certificate named like the provider.
	e.advertise("p2", 1)
	e.reserve("c1", "r3", "p2")
	wantCode(t, e.s.PostResult(e.ctx, "p2", api.RoleConsumer, gkName("c1", "p2"), kubeconfig("forged")), api.CodeForbidden)
	if got := e.phase("r3"); got != api.PhaseGeneratingKubeconfig {
		t.Fatalf("r3 = %s after a refused result, want GeneratingKubeconfig", got)
	}
}

// A long-poll of a provider certificate named like a consumer is woken by
// the consumer's new Peer but does not return it.
func TestLongPollOfTheOtherRole(t *testing.T) {
	e := newEnv(t)
	e.advertise("p1", 1)
	e.heartbeat("c1")
	e.reserve("c1", "r1", "p1")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	type result struct {
		ids []string
		err error
	}
	wrong, right := make(chan result, 1), make(chan result, 1)
	poll := func(role api.Role, out chan<- result) {
		v, err := e.s.Instructions(ctx, "c1", role, time.Minute)
		out <- result{ids(v), err}
	}
	go poll(api.RoleProvider, wrong)
	go poll(api.RoleConsumer, right)
	testpoll.Until(t, 10*time.Second, "both long-polls parked", func() bool { return e.s.Waiters() == 2 })
	e.result("p1", gkName("c1", "p1"), kubeconfig("K")) // issues the Peer, wakes "c1"
	if got := <-right; got.err != nil || strings.Join(got.ids, ",") != peerName("r1") {
		t.Fatalf("the consumer's long-poll returned %v, %v", got.ids, got.err)
	}
	// The provider-role poll was woken too and parked again on a new channel.
	testpoll.Until(t, 10*time.Second, "the other role's poll parked again", func() bool {
		e.s.mu.Lock()
		defer e.s.mu.Unlock()
		_, parked := e.s.st.waitCh["c1"]
		return parked && e.s.Waiters() == 1
	})
	cancel()
	if got := <-wrong; got.err != nil || len(got.ids) != 0 {
		t.Fatalf("the provider-role long-poll of %q returned %v, %v", "c1", got.ids, got.err)
	}
}
