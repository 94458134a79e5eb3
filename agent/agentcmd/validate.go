package agentcmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// maxChoiceAuditSize bounds --choice-audit-size.
const maxChoiceAuditSize = 4096

// Validate checks every flag without touching a file, the network or the
// cluster, and says how to fix each mistake (all of them at once).
func (o *Options) Validate() error {
	var p problems
	role := api.Role(o.Role)
	if role != api.RoleProvider && role != api.RoleConsumer {
		p.addf("--role %q: use provider or consumer", o.Role)
	}
	if o.Bundle == "" {
		p.addf("--bundle is required: the join bundle made by 'federation-autoscaler pki join'")
	}
	o.checkDriver(&p)
	o.checkNames(&p)
	o.checkListeners(&p)
	o.checkServices(&p)
	if _, err := o.Limits.ForListeners(listenerCount(role, o.HealthListen, o.LocalAPIListen, o.ConsoleListen)); err != nil {
		p.add(err)
	}
	o.checkRoleFlags(role, &p)
	p = append(p, o.checkChoice(role)...)
	p = append(p, o.checkConsolidation()...)
	return errors.Join(p...)
}

// problems collects the mistakes Validate finds, in the order it checks.
type problems []error

func (p *problems) add(err error) { *p = append(*p, err) }

func (p *problems) addf(format string, args ...any) { p.add(fmt.Errorf(format, args...)) }

// checkDriver checks --liqo-driver and the flags of the driver it picks.
func (o *Options) checkDriver(p *problems) {
	if c, ok := o.driverChoice(o.LiqoDriver); ok && c.Validate != nil {
		if err := c.Validate(); err != nil {
			p.add(err)
		}
	} else if !ok && o.LiqoDriver != "liqoctl" {
		p.addf("--liqo-driver %q: use %s", o.LiqoDriver, o.driverNames())
	}
	if o.LiqoDriver == "liqoctl" && o.LiqoctlPath == "" {
		p.addf("--liqoctl-path is empty: give the liqoctl binary (a name on $PATH or a path)")
	}
}

// checkNames checks the Kubernetes and Liqo names and the advertised IP.
func (o *Options) checkNames(p *problems) {
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		p.addf("--namespace %q is not a namespace name: %s", o.Namespace, msgs[0])
	}
	if o.LiqoClusterID != "" {
		if err := liqo.CheckClusterID("--liqo-cluster-id", o.LiqoClusterID); err != nil {
			p.addf("%w", err)
		}
	}
	if msgs := validation.IsDNS1123Label(o.LiqoNamespace); o.LiqoNamespace != "" && len(msgs) > 0 { // "": liqo.DefaultNamespace
		p.addf("--liqo-namespace %q is not a namespace name: %s", o.LiqoNamespace, msgs[0])
	}
	if o.NodeName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
			p.addf("--node-name %q is not a node name: %s", o.NodeName, msgs[0])
		}
	}
	if o.AdvertisedIP != "" && net.ParseIP(o.AdvertisedIP) == nil {
		p.addf("--advertised-ip %q is not an IP address", o.AdvertisedIP)
	}
}

// checkListeners checks every --*-listen address.
func (o *Options) checkListeners(p *problems) {
	for _, l := range []struct{ flag, addr string }{
		{"--local-api-listen", o.LocalAPIListen}, {"--console-listen", o.ConsoleListen},
		{"--health-listen", o.HealthListen}, {"--probe-listen", o.ProbeListen},
	} {
		if err := checkListen(l.addr); err != nil {
			p.addf("%s %q: %w (or empty to disable)", l.flag, l.addr, err)
		}
	}
}

// checkServices checks the URLs of the simulated geo and eco services.
func (o *Options) checkServices(p *problems) {
	if o.MockGeoURL != "" {
		if _, err := location.NewGeoClient(o.MockGeoURL, nil); err != nil {
			p.addf("--mock-geo-url: %w", err)
		}
	}
	if o.MockEcoURL != "" {
		if _, err := location.NewEcoClient(o.MockEcoURL, nil, nil); err != nil {
			p.addf("--mock-eco-url: %w", err)
		}
	}
}

// checkRoleFlags refuses the flags of the other role and checks the
// consumer's --local-api-allowed-hosts.
func (o *Options) checkRoleFlags(role api.Role, p *problems) {
	switch role {
	case api.RoleConsumer:
		for _, f := range []struct{ flag, value string }{
			{"--sharing-file", o.SharingFile}, {"--price-file", o.PriceFile}, {"--capacity-file", o.CapacityFile},
			{"--renewable-file", o.RenewableFile}, {"--probe-listen", o.ProbeListen}, {"--mock-eco-url", o.MockEcoURL},
		} {
			if f.value != "" {
				p.addf("%s is a provider flag: the consumer agent would ignore it", f.flag)
			}
		}
		for _, h := range o.LocalAPIAllowedHosts {
			if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(strings.TrimSuffix(strings.ToLower(h), "."))) > 0 {
				p.addf("--local-api-allowed-hosts: %q is neither a DNS name nor an IP address", h)
			}
		}
	case api.RoleProvider:
		if len(o.LocalAPIAllowedHosts) > 0 {
			p.addf("--local-api-allowed-hosts is a consumer flag: the provider agent has no local API")
		}
	}
}

// checkConsolidation checks the consumer's --consolidation-* flags.
func (o *Options) checkConsolidation() []error {
	var errs []error
	c := o.Consolidation
	if c.Budget.Max < 0 || c.Budget.Max > api.MaxMovesPerWindow {
		errs = append(errs, fmt.Errorf("--consolidation-max-moves %d: use 0 (no moves) to %d", c.Budget.Max, api.MaxMovesPerWindow))
	}
	if c.Budget.Window < 0 || c.Budget.Window > api.MaxMoveWindowSeconds*time.Second {
		errs = append(errs, fmt.Errorf("--consolidation-window %s: use 1s to %s (0: the default, %s)", c.Budget.Window, api.MaxMoveWindowSeconds*time.Second, consolidate.DefaultMoveWindow))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--consolidation-place-timeout", c.PlaceTimeout}, {"--consolidation-surge-timeout", c.SurgeTimeout}, {"--consolidation-drain-timeout", c.DrainTimeout}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("%s %s: must not be negative (0: the default)", f.name, f.d))
		}
	}
	return errs
}

// checkChoice checks the consumer's Choice-policy flags (a provider takes
// none).
func (o *Options) checkChoice(role api.Role) []error {
	var errs []error
	if role == api.RoleProvider {
		if o.Model.URL != "" {
			errs = append(errs, errors.New("--model-url is a consumer flag: the provider agent chooses nothing"))
		}
		return errs
	}
	if err := o.Model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--model-*: %w", err))
	}
	if o.ChoiceAuditSize < 0 || o.ChoiceAuditSize > maxChoiceAuditSize {
		errs = append(errs, fmt.Errorf("--choice-audit-size %d: use 1 to %d (0: the default, %d)", o.ChoiceAuditSize, maxChoiceAuditSize, choice.DefaultAuditSize))
	}
	if o.ChoiceMaxCandidates < 0 || o.ChoiceMaxCandidates > choice.MaxRankingEntries {
		errs = append(errs, fmt.Errorf("--choice-max-candidates %d: use 1 to %d (0: the default, %d)", o.ChoiceMaxCandidates, choice.MaxRankingEntries, choice.DefaultMaxCandidates))
	}
	return errs
}

// checkListen accepts "" and host:port with a port number.
func checkListen(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, e.g. 127.0.0.1:9090 or :8082: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
