package experiment

import (
	"sync"
	"time"
)

// Selection is one placement: a reservation (reserve mode) or the
// provider a consumer's view would grow on (observe mode).
type Selection struct {
	Phase     string
	Iteration int
	// Tau is when it was seen, since the phase started.
	Tau           time.Duration
	Consumer      string
	Provider      string
	ReservationID string
	// Value is the suite's metric of the choice at Tau (ground truth);
	// Best and Worst the achievable minimum and maximum at that moment
	// (see Analyze).
	Value, Best, Worst float64
}

// Observation is what the federation saw of a condition at a sample
// instant: the broker's carbon of a provider, or a probe's round trip
// from a consumer to a provider; Truth is the generator's value.
type Observation struct {
	Phase    string
	Sample   int
	Tau      time.Duration
	Consumer string // latency only
	Provider string
	Observed float64
	Truth    float64
}

// Snapshot is one provider in a federation snapshot.
type Snapshot struct {
	Phase     string
	Sample    int
	Tau       time.Duration
	Provider  string
	Available bool
	Free      int32
	Reserved  int32
	Carbon    *float64
}

// Reservation is a reservation row as last seen.
type Reservation struct {
	Phase     string
	ID        string
	Consumer  string
	Provider  string
	Status    string
	FirstSeen time.Duration
}

// Records is everything a run saw, per phase in run order.
type Records struct {
	mu           sync.Mutex
	Selections   []Selection
	Observations []Observation
	Snapshots    []Snapshot
	Reservations []Reservation
}

func (r *Records) addSelection(s Selection) {
	r.mu.Lock()
	r.Selections = append(r.Selections, s)
	r.mu.Unlock()
}

func (r *Records) addObservations(o []Observation) {
	r.mu.Lock()
	r.Observations = append(r.Observations, o...)
	r.mu.Unlock()
}

func (r *Records) addSnapshots(s []Snapshot) {
	r.mu.Lock()
	r.Snapshots = append(r.Snapshots, s...)
	r.mu.Unlock()
}

func (r *Records) addReservation(s Reservation) {
	r.mu.Lock()
	r.Reservations = append(r.Reservations, s)
	r.mu.Unlock()
}
