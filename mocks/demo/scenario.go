package demo

import (
	_ "embed"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
)

// scenarioYAML is the demo's world as data (scenario.yaml).
//
//go:embed scenario.yaml
var scenarioYAML []byte

// Scenario is the demo's world: who is in the federation and how the
// simulated parts behave. The embedded scenario.yaml is the default
// (DefaultScenario); ParseScenario reads one.
type Scenario struct {
	Consumer ConsumerScenario `json:"consumer"`
	// ProviderNodes sizes every provider's workers.
	ProviderNodes NodeScenario `json:"providerNodes"`
	// Providers in order; --providers N takes the first N.
	Providers []ProviderScenario `json:"providers"`
	Workload  WorkloadScenario   `json:"workload"`
	Agents    AgentScenario      `json:"agents"`
}

// ConsumerScenario is the consumer cluster: a mock-geo region (its
// loopback address), the city its console shows, its one local worker.
type ConsumerScenario struct {
	Region string       `json:"region"`
	City   string       `json:"city"`
	Node   NodeScenario `json:"node"`
}

// MaxScenarioNodes bounds a provider's workers in a scenario: every one is
// a simulated Node in the demo's process.
const MaxScenarioNodes = 100

// NodeScenario sizes simulated workers.
type NodeScenario struct {
	// Count is how many (providers only; default 1).
	Count  int               `json:"count,omitempty"`
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
}

// ProviderScenario is one provider city.
type ProviderScenario struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	// CPUPrice per core-hour, MemoryPrice per GiB-hour.
	CPUPrice    resource.Quantity `json:"cpuPrice"`
	MemoryPrice resource.Quantity `json:"memoryPrice"`
	Renewable   bool              `json:"renewable,omitempty"`
	// ProbeDelay is added to every latency-probe echo.
	ProbeDelay metav1.Duration `json:"probeDelay"`
}

// WorkloadScenario is the console's workload switch.
type WorkloadScenario struct {
	Namespace string            `json:"namespace"`
	Replicas  int32             `json:"replicas"`
	CPU       resource.Quantity `json:"cpu"`
	Memory    resource.Quantity `json:"memory"`
}

// AgentScenario are the agents' cadences.
type AgentScenario struct {
	// ConsumerHeartbeat is the consumer's heartbeat period, PolicyPoll how
	// often it re-reads its ConsumerPolicy, Resync its reconcile period,
	// ProbeTTL how long a latency measurement is reused.
	ConsumerHeartbeat metav1.Duration `json:"consumerHeartbeat"`
	PolicyPoll        metav1.Duration `json:"policyPoll"`
	Resync            metav1.Duration `json:"resync"`
	ProbeTTL          metav1.Duration `json:"probeTTL"`
	// ProviderDebounce groups a burst of pod events into one advertisement.
	ProviderDebounce metav1.Duration `json:"providerDebounce"`
}

// ParseScenario reads a scenario (YAML or JSON; unknown fields are
// refused) and checks it, naming every mistake.
func ParseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("demo scenario: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("demo scenario: %w", err)
	}
	if s.ProviderNodes.Count == 0 {
		s.ProviderNodes.Count = 1
	}
	return &s, nil
}

// DefaultScenario is the embedded scenario.yaml.
func DefaultScenario() (*Scenario, error) { return ParseScenario(scenarioYAML) }

// Validate says what is wrong with a scenario (every mistake at once).
func (s *Scenario) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, ok := geo.LoopbackAddress(s.Consumer.Region, 10); !ok {
		add("consumer.region %q is not a region of mock-geo's table (docs/mocks.md)", s.Consumer.Region)
	}
	node := func(what string, n NodeScenario) {
		if n.CPU.Sign() <= 0 || n.Memory.Sign() <= 0 {
			add("%s: cpu %q and memory %q must both be positive", what, n.CPU.String(), n.Memory.String())
		}
		if n.Count < 0 || n.Count > MaxScenarioNodes {
			add("%s.count %d: use 1 to %d (0: 1)", what, n.Count, MaxScenarioNodes)
		}
	}
	node("consumer.node", s.Consumer.Node)
	node("providerNodes", s.ProviderNodes)
	if len(s.Providers) == 0 {
		add("providers: a demo needs at least one")
	}
	seen := map[string]bool{}
	for i, p := range s.Providers {
		at := fmt.Sprintf("providers[%d] (%s)", i, p.ID)
		if msgs := validation.IsDNS1123Label(p.ID); len(msgs) > 0 {
			add("%s: id is not a cluster id: %s", at, msgs[0])
		}
		if seen[p.ID] {
			add("%s: id used twice", at)
		}
		seen[p.ID] = true
		if _, ok := geo.LoopbackAddress(p.Region, 10); !ok {
			add("%s: region %q is not a region of mock-geo's table (docs/mocks.md)", at, p.Region)
		}
		if p.CPUPrice.Sign() < 0 || p.MemoryPrice.Sign() < 0 {
			add("%s: prices must not be negative", at)
		}
		if p.ProbeDelay.Duration < 0 {
			add("%s: probeDelay %s is negative", at, p.ProbeDelay.Duration)
		}
	}
	w := workload.Spec{Replicas: s.Workload.Replicas, CPU: s.Workload.CPU, Memory: s.Workload.Memory}
	if err := w.Validate(); err != nil {
		add("workload: %w", err)
	}
	if msgs := validation.IsDNS1123Label(s.Workload.Namespace); len(msgs) > 0 {
		add("workload.namespace %q: %s", s.Workload.Namespace, msgs[0])
	}
	for name, d := range map[string]metav1.Duration{
		"consumerHeartbeat": s.Agents.ConsumerHeartbeat, "policyPoll": s.Agents.PolicyPoll, "resync": s.Agents.Resync,
		"probeTTL": s.Agents.ProbeTTL, "providerDebounce": s.Agents.ProviderDebounce,
	} {
		if d.Duration <= 0 {
			add("agents.%s %s: must be positive", name, d.Duration)
		}
	}
	return errors.Join(errs...)
}

// ProviderSpecs returns the scenario's first n providers as ProviderSpecs
// (n is capped to how many there are).
func (s *Scenario) ProviderSpecs(n int) []ProviderSpec {
	n = max(0, min(n, len(s.Providers)))
	out := make([]ProviderSpec, n)
	for i, p := range s.Providers[:n] {
		out[i] = ProviderSpec{
			ID: p.ID, Region: p.Region, Nodes: s.ProviderNodes.Count,
			NodeCPU: s.ProviderNodes.CPU.String(), NodeMemory: s.ProviderNodes.Memory.String(),
			CPUPrice: p.CPUPrice.String(), MemoryPrice: p.MemoryPrice.String(), Renewable: p.Renewable,
			ProbeDelay: p.ProbeDelay.Duration,
		}
	}
	return out
}

// mustDefaultScenario is DefaultScenario for the package's defaults. The
// embedded file is checked by the package's golden test, so an error here
// is a broken build, not bad input (as regexp.MustCompile).
func mustDefaultScenario() *Scenario {
	s, err := DefaultScenario()
	if err != nil {
		panic(err)
	}
	return s
}

// DefaultProviders returns the first n cities of the default scenario:
// Sydney (cheapest, coal grid), Montreal (hydro, the greenest), Paris
// (nearest to London), then further cities.
func DefaultProviders(n int) []ProviderSpec { return mustDefaultScenario().ProviderSpecs(n) }

// MaxProviders is how many distinct cities the default scenario has.
func MaxProviders() int { return len(mustDefaultScenario().Providers) }
