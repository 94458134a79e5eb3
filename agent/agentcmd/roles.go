package agentcmd

import (
	"context"

	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consumer"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// provider assembles the provider agent, its probe responder and console.
func (as *assembly) provider(ctx context.Context) error {
	d := as.d
	pc := provider.Config{
		ClusterID: d.Bundle.ClusterID, LiqoClusterID: d.LiqoClusterID, Kube: as.kube, Broker: as.broker, Driver: as.driver,
		Sharing: d.Sharing, NodeName: d.NodeName, AdvertisedIP: d.AdvertisedIP, Clock: d.Clock,
		Logger: as.log, Tracker: as.tracker, Metrics: as.metrics,
	}
	if d.ProbeListen != "" {
		r, err := probe.Listen(d.ProbeListen)
		if err != nil {
			return err
		}
		as.a.cleanup = append(as.a.cleanup, func() { _ = r.Close() })
		r.SetDelay(d.ProbeDelay)
		as.a.Probe = r
		pc.ProbePort = r.Addr().Port
		as.a.Addrs.Probe = r.Addr().String()
		as.run("probe responder", r.Serve)
	}
	if d.Geo != nil {
		pc.Geo = geoLookup(d.Geo, func(l location.Location) *api.Topology {
			return &api.Topology{Region: l.Region, City: l.City, Latitude: l.Latitude, Longitude: l.Longitude}
		})
	}
	if d.Carbon != nil {
		pc.Carbon = func(ctx context.Context, region string) (*float64, []float64, error) {
			c, err := d.Carbon.Carbon(ctx, region)
			if err != nil {
				return nil, nil, err
			}
			v := c.Intensity
			return &v, c.Forecast, nil
		}
	}
	if d.TuneProvider != nil {
		d.TuneProvider(&pc)
	}
	agent, err := provider.New(pc)
	if err != nil {
		return err
	}
	as.a.Provider = agent
	if d.ConsoleListen != "" {
		cons := &console.Provider{ClusterID: d.Bundle.ClusterID, Agent: agent}
		var backend web.ProviderBackend = cons
		if d.Console.Provider != nil {
			backend = d.Console.Provider(cons)
		}
		pcons, err := web.NewProviderConsole(backend, as.consoleOptions())
		if err != nil {
			return err
		}
		if err := as.serveConsole(ctx, pcons.App(), pcons.Run); err != nil {
			return err
		}
	}
	as.run("provider agent", agent.Run)
	return nil
}

// consumer assembles the consumer agent, its local API and console.
func (as *assembly) consumer(ctx context.Context) error {
	d := as.d
	cc := consumer.Config{
		ClusterID: d.Bundle.ClusterID, LiqoClusterID: d.LiqoClusterID, Namespace: d.Namespace, Kube: as.kube, Client: as.cl,
		Broker: as.broker, Driver: as.driver, Prober: probe.NewProber(probe.ProberConfig{}),
		AdvertisedIP: d.AdvertisedIP, NodeName: d.NodeName, Clock: d.Clock, Logger: as.log, Tracker: as.tracker,
		Metrics: as.metrics, Registerer: as.reg, LocalAPIHosts: d.LocalAPIHosts,
		Model: d.Model, ChoiceAuditSize: d.ChoiceAuditSize, ChoiceMaxCandidates: d.ChoiceMaxCandidates,
		Consolidation: d.Consolidation,
	}
	if d.Geo != nil {
		cc.Geo = geoLookup(d.Geo, func(l location.Location) *consumer.Location {
			return &consumer.Location{Region: l.Region, City: l.City, Latitude: l.Latitude, Longitude: l.Longitude}
		})
	}
	if d.TuneConsumer != nil {
		d.TuneConsumer(&cc)
	}
	agent, err := consumer.New(cc)
	if err != nil {
		return err
	}
	as.a.Consumer = agent
	if d.LocalAPIListen != "" {
		ln, err := as.listen(ctx, "local-api", "local API", d.LocalAPIListen)
		if err != nil {
			return err
		}
		as.a.Addrs.LocalAPI = ln.Addr().String()
		as.serveHTTP("local API", ln, agent.LocalAPI())
	}
	if d.ConsoleListen != "" {
		// The console reads the agent in process (no loopback HTTP).
		cons := &console.Consumer{
			ClusterID: d.Bundle.ClusterID, Namespace: d.Namespace, Agent: agent, Broker: as.broker, Client: as.cl, Pods: as.cl,
			Logger: as.log,
		}
		var backend web.ConsumerBackend = cons
		if d.Console.Consumer != nil {
			backend = d.Console.Consumer(cons)
		}
		ccons, err := web.NewConsumerConsole(backend, as.consoleOptions())
		if err != nil {
			return err
		}
		if err := as.serveConsole(ctx, ccons.App(), ccons.Run); err != nil {
			return err
		}
	}
	as.run("consumer agent", agent.Run)
	return nil
}

// geoLookup adapts the Geo seam to an agent's lookup, which answers nil
// (and no error) for an address the locator does not know; to converts a
// found location to the agent's type.
func geoLookup[T any](g GeoLocator, to func(location.Location) *T) func(context.Context, string) (*T, error) {
	return func(ctx context.Context, ip string) (*T, error) {
		loc, found, err := g.Lookup(ctx, ip)
		if err != nil || !found {
			return nil, err
		}
		return to(loc), nil
	}
}

// consoleOptions are the console's options from Deps.Console.
func (as *assembly) consoleOptions() web.ConsoleOptions {
	c := as.d.Console
	return web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: c.Token, Currency: c.Currency, Refresh: c.Refresh, Clock: as.d.Clock, Log: as.log.With("component", "console")}, Places: c.Places}
}
