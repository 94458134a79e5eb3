package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
)

// consumerSettings is what the consumer console changed, kept in the data
// folder (consumer/settings.yaml) because the simulated cluster that holds
// the ConsumerPolicy lives in memory: the policy (with its location) and
// the demo workload come back at the next start, as the providers' sharing
// files do.
type consumerSettings struct {
	Policy   fav1alpha1.ConsumerPolicySpec `json:"policy"`
	Workload savedWorkload                 `json:"workload"`
}

type savedWorkload struct {
	Enabled  bool              `json:"enabled"`
	Replicas int32             `json:"replicas"`
	CPU      resource.Quantity `json:"cpu"`
	Memory   resource.Quantity `json:"memory"`
}

func consumerSettingsPath(o Options) string {
	return filepath.Join(o.DataDir, "consumer", "settings.yaml")
}

// loadConsumerSettings reads the saved settings (false when there are
// none). A file that cannot be used is an error naming it: delete it to
// start from the defaults.
func loadConsumerSettings(path string) (consumerSettings, bool, error) {
	var s consumerSettings
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("reading the consumer's saved settings: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, false, fmt.Errorf("the consumer's saved settings %s: %w (delete the file to start from the defaults)", path, err)
	}
	if err := s.workload().Validate(); err != nil {
		return s, false, fmt.Errorf("the consumer's saved settings %s: workload: %w (delete the file to start from the defaults)", path, err)
	}
	return s, true, nil
}

func (s consumerSettings) workload() workload.Spec {
	return workload.Spec{Enabled: s.Workload.Enabled, Replicas: s.Workload.Replicas, CPU: s.Workload.CPU, Memory: s.Workload.Memory}
}

// write saves s atomically (a rename), so a crash never leaves half a file.
func (s consumerSettings) write(path string) error {
	data, err := yaml.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("saving the consumer's settings: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("saving the consumer's settings: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("saving the consumer's settings: %w", err)
	}
	return nil
}

func savedWorkloadOf(w workload.Spec) savedWorkload {
	return savedWorkload{Enabled: w.Enabled, Replicas: w.Replicas, CPU: w.CPU, Memory: w.Memory}
}

// RTTPerKM models the demo's network: a round trip of 1 ms per 100 km of
// great-circle distance (light in fibre covers about 200 km per ms one
// way), used once a provider or the consumer was moved from its city.
const RTTPerKM = 10 * time.Microsecond

// setConsumerLocation records where the consumer says it is (nil: its
// city) and moves the probe delays.
func (f *Federation) setConsumerLocation(loc *api.Topology) {
	f.locMu.Lock()
	if loc != nil {
		l := *loc
		f.consumerLoc = &l
	} else {
		f.consumerLoc = nil
	}
	f.locMu.Unlock()
	f.retuneProbes()
}

// retuneProbes sets each provider's echo delay: its city's configured
// ProbeDelay while neither it nor the consumer moved, else the distance
// between where each says it is (RTTPerKM).
func (f *Federation) retuneProbes() {
	f.locMu.Lock()
	defer f.locMu.Unlock()
	cons, _ := geo.Home(f.consumerRegion)
	consMoved := f.consumerLoc != nil
	if consMoved {
		cons = *f.consumerLoc
	}
	for _, p := range f.Providers {
		if p.echo == nil || p.Agent == nil {
			continue
		}
		at, known := geo.Home(p.Spec.Region)
		moved := false
		if set := p.Agent.Sharing().Config().Location; set != nil {
			at, known, moved = *set, true, true
		}
		if !moved && !consMoved || !known {
			p.echo.SetDelay(p.Spec.ProbeDelay)
			continue
		}
		km := placement.DistanceKM(cons.Latitude, cons.Longitude, at.Latitude, at.Longitude)
		p.echo.SetDelay(time.Duration(km * float64(RTTPerKM)))
	}
}
