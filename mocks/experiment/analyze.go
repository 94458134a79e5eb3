package experiment

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// shuffles is how many label shuffles estimate the chance baseline.
const shuffles = 200

// PhaseResult is one phase's numbers.
type PhaseResult struct {
	Name       string `json:"name"`
	Policy     string `json:"policy"`
	Selections int    `json:"selections"`
	// Multiple is Σ value ÷ Σ achievable minimum over the phase's
	// selections (1 = always the best the federation offered then);
	// WorstMultiple the same for the achievable maximum.
	Multiple      float64 `json:"multiple"`
	WorstMultiple float64 `json:"worstMultiple"`
	// MedianRatio is the median of value ÷ best per selection.
	MedianRatio float64 `json:"medianRatio"`
	// MeanValue and MeanBest are the metric's means (gCO2eq/kWh or ms).
	MeanValue float64 `json:"meanValue"`
	MeanBest  float64 `json:"meanBest"`
	// Replay is the validity check against the baseline (absent for the
	// baseline itself).
	Replay *Replay `json:"replay,omitempty"`
}

// Replay says how well a phase saw the same conditions as the baseline:
// at each sample instant present in both, the provider with the best
// observed value is the label; Match is the fraction of instants with the
// same label, Chance the mean match after shuffling one phase's labels
// over its instants. Valid is Match ≥ the threshold and above chance: only
// then is the phase compared with the baseline.
type Replay struct {
	Samples   int     `json:"samples"`
	Match     float64 `json:"match"`
	Chance    float64 `json:"chance"`
	Threshold float64 `json:"threshold"`
	Valid     bool    `json:"valid"`
	Reason    string  `json:"reason,omitempty"`
}

// Analyze computes every phase's result; the first phase is the baseline
// of the replay checks.
func Analyze(cfg *Config, rec *Records) []PhaseResult {
	best := bestLabels(rec.Observations)
	var out []PhaseResult
	for i, p := range cfg.Phases {
		pr := phaseNumbers(p, rec.Selections)
		if i > 0 {
			rp := replay(best[cfg.Phases[0].Name], best[p.Name], cfg.Validity, cfg.Seed)
			pr.Replay = &rp
		}
		out = append(out, pr)
	}
	return out
}

func phaseNumbers(p Phase, sels []Selection) PhaseResult {
	pr := PhaseResult{Name: p.Name, Policy: string(p.Policy)}
	var sumV, sumB, sumW float64
	var ratios []float64
	for _, s := range sels {
		if s.Phase != p.Name {
			continue
		}
		pr.Selections++
		sumV, sumB, sumW = sumV+s.Value, sumB+s.Best, sumW+s.Worst
		if s.Best > 0 {
			ratios = append(ratios, s.Value/s.Best)
		}
	}
	if pr.Selections == 0 {
		return pr
	}
	n := float64(pr.Selections)
	pr.MeanValue, pr.MeanBest = sumV/n, sumB/n
	if sumB > 0 {
		pr.Multiple, pr.WorstMultiple = sumV/sumB, sumW/sumB
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		pr.MedianRatio = median(ratios)
	}
	return pr
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// bestLabels is, per phase and sample instant, the provider with the
// lowest observed value (ties by id).
func bestLabels(obs []Observation) map[string]map[int]string {
	type cand struct {
		id string
		v  float64
	}
	best := map[string]map[int]cand{}
	for _, o := range obs {
		m := best[o.Phase]
		if m == nil {
			m = map[int]cand{}
			best[o.Phase] = m
		}
		c, ok := m[o.Sample]
		if !ok || o.Observed < c.v || (o.Observed == c.v && o.Provider < c.id) {
			m[o.Sample] = cand{o.Provider, o.Observed}
		}
	}
	out := map[string]map[int]string{}
	for ph, m := range best {
		out[ph] = map[int]string{}
		for j, c := range m {
			out[ph][j] = c.id
		}
	}
	return out
}

// replay compares two phases' labels at their common sample instants.
func replay(a, b map[int]string, threshold float64, seed uint64) Replay {
	rp := Replay{Threshold: threshold}
	var la, lb []string
	for j, x := range a {
		if y, ok := b[j]; ok {
			la, lb = append(la, x), append(lb, y)
		}
	}
	rp.Samples = len(la)
	if rp.Samples < 3 {
		rp.Reason = "fewer than 3 sample instants in both phases: nothing to compare"
		return rp
	}
	rp.Match = matchFraction(la, lb)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var sum float64
	sh := slices.Clone(lb)
	for range shuffles {
		rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		sum += matchFraction(la, sh)
	}
	rp.Chance = sum / shuffles
	switch {
	case rp.Match < threshold:
		rp.Reason = "the phases saw the same best provider at too few instants: the conditions were not replayed (check the observation delay warning and the cadences)"
	case rp.Match <= rp.Chance:
		rp.Reason = "the match is no better than shuffled labels: the conditions carry no signal to compare on"
	default:
		rp.Valid = true
	}
	return rp
}

func matchFraction(a, b []string) float64 {
	n := 0
	for i := range a {
		if a[i] == b[i] {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

// roundDur is a duration for the outputs, in seconds with millisecond
// precision.
func roundDur(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
