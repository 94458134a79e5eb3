package views

// Why explains one consumer's placement: per chunk type, the candidates
// with their metric values, the ones filtered out and why, the winner and
// its margin over the runner-up (docs/ui.md, "Why this provider").
type Why struct {
	Consumer string
	// Policy is the applied policy; Metric names the candidates' metric
	// column (with its unit and direction).
	Policy string
	Metric string
	// NotSharing says how many providers do not share with the consumer
	// ("" when none).
	NotSharing string
	Types      []WhyType
}

// WhyType is the decision for one chunk type.
type WhyType struct {
	Type string
	// Summary is the decision in one sentence.
	Summary string
	Rows    []WhyRow
	// More says how many candidates were left out of Rows ("" when none).
	More string
}

// WhyRow is one candidate provider.
type WhyRow struct {
	Rank     string
	Provider string
	Metric   string
	// Outcome is winner, eligible, blocking or filtered; Class its badge.
	Outcome string
	Class   string
	// Reason says in words why a provider was filtered out or blocks.
	Reason string
	Room   string
}

// EventRow is one entry of the dashboard's events log: a finished
// instruction or an ended reservation.
type EventRow struct {
	At       string
	Kind     string
	Class    string
	Consumer string
	Provider string
	// Subject is the reservation the event is about.
	Subject string
	Text    string
}

// TotalsRow is what one consumer's borrowed capacity costs and emits, and
// what it would on the alternatives (Federation: the sum of every row).
type TotalsRow struct {
	Consumer   string
	Federation bool
	Chunks     string
	// Rate is the spend per hour now; Today and Month what was spent since
	// 00:00 UTC and since the 1st of the month (UTC).
	Rate, Today, Month string
	// Carbon is the grid carbon of the borrowed capacity per hour.
	Carbon string
	// Dear* price the same chunks on the most expensive provider, Std* on
	// the Standard policy's choice; *Saving is that minus Rate.
	DearOn, Dear, DearCarbon, DearSaving string
	StdOn, Std, StdCarbon, StdSaving     string
}
