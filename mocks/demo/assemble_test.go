package demo

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/agent/agentcmd"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestAgentsAreBuiltByTheAgentAssembly: the demo's agents are the agent
// subcommand's: by default Options.Assemble is agentcmd.Assemble itself,
// and every agent the demo runs is the one that assembly returned, built
// from the simulated seams (the agent's own simulated cluster, the
// simulated Liqo, mock-geo, this run's broker).
func TestAgentsAreBuiltByTheAgentAssembly(t *testing.T) {
	var o Options
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(o.Assemble).Pointer() != reflect.ValueOf(agentcmd.Assemble).Pointer() {
		t.Fatal("the demo's default assembly is not agentcmd.Assemble")
	}

	type call struct {
		role api.Role
		deps agentcmd.Deps
		got  *agentcmd.Agent
	}
	var (
		mu    sync.Mutex
		calls = map[string]call{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fed, err := Start(ctx, Options{
		DataDir: t.TempDir(), Providers: DefaultProviders(2), NoConsoles: true,
		Assemble: func(ctx context.Context, role api.Role, d agentcmd.Deps) (*agentcmd.Agent, error) {
			a, err := agentcmd.Assemble(ctx, role, d)
			mu.Lock()
			defer mu.Unlock()
			calls[d.Bundle.ClusterID] = call{role, d, a}
			return a, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fed.Stop() }()

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("%d agents assembled, want 2 providers and the consumer", len(calls))
	}
	seams := func(id string, role api.Role, address string) *agentcmd.Agent {
		t.Helper()
		c, ok := calls[id]
		switch {
		case !ok || c.got == nil:
			t.Fatalf("%s: not assembled", id)
		case c.role != role || c.got.Role != role:
			t.Fatalf("%s: assembled as %s, want %s", id, c.role, role)
		case c.deps.Liqo == nil || c.deps.Geo == nil || !c.deps.InstallCRDs:
			t.Fatalf("%s: assembled without the simulated Liqo, mock-geo or the CRD install: %+v", id, c.deps)
		case !strings.Contains(c.deps.Kube.Host, address):
			t.Fatalf("%s: Kubernetes API %s, want its own simulated cluster on %s", id, c.deps.Kube.Host, address)
		case c.deps.BrokerURL != fed.BrokerURL:
			t.Fatalf("%s: broker %s, want this run's %s", id, c.deps.BrokerURL, fed.BrokerURL)
		}
		return c.got
	}
	for _, p := range fed.Providers {
		a := seams(p.Spec.ID, api.RoleProvider, p.Address)
		if a.Provider == nil || a.Provider != p.Agent || a.Addrs.Probe != p.ProbeAddr {
			t.Fatalf("%s: the demo runs another provider agent than the assembled one", p.Spec.ID)
		}
		if calls[p.Spec.ID].deps.Carbon == nil || calls[p.Spec.ID].deps.ProbeDelay != p.Spec.ProbeDelay {
			t.Fatalf("%s: assembled without mock-eco or its probe delay", p.Spec.ID)
		}
	}
	a := seams(ConsumerID, api.RoleConsumer, fed.Consumer.Address)
	if a.Consumer == nil || a.Consumer != fed.Consumer.Agent || "http://"+a.Addrs.LocalAPI != fed.Consumer.LocalAPIURL {
		t.Fatal("the demo runs another consumer agent (or local API) than the assembled one")
	}
}
