package views

// KV is a labelled value.
type KV struct {
	Label string
	Value string
}

// Option is a select option.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// ProviderConsole is the provider console page.
type ProviderConsole struct {
	Status ProviderStatus
	Form   SharingForm
	// Location is the location picker (nil: no cities to offer).
	Location *LocationForm
	Errors   FieldErrors
	// Flash confirms a successful write; FormError explains a failed one.
	Flash     string
	FormError string
}

// ProviderStatus is the live part of the provider console.
type ProviderStatus struct {
	ClusterID      string
	Facts          []KV
	Capacity       []KV
	Chunks         []ChunkTypeRow
	Loans          []LoanRow
	LastAdvertised string
	Broker         string
	BrokerClass    string
}

// LoanRow is what the provider lends now, and to whom.
type LoanRow struct {
	Reservation string
	Consumer    string
	Chunks      string
	Phase       string
	PhaseClass  string
	Since       string
	// Price is what the loan earns per hour at the current prices.
	Price string
}

// SharingForm is the provider's sharing configuration form.
type SharingForm struct {
	Prices    []PriceField
	Caps      []CapField
	Renewable bool
	Allowed   string
	Denied    string
	Quota     string
}

// PriceField is a unit price input.
type PriceField struct {
	Name  string
	Label string
	Unit  string
	Value string
}

// CapField is a capacity cap of one resource.
type CapField struct {
	Resource  string
	ModeName  string
	ValueName string
	Modes     []Option
	Value     string
}

// ConsumerConsole is the consumer console page.
type ConsumerConsole struct {
	Status ConsumerStatus
	Policy PolicyForm
	// Location is the location picker (nil: none).
	Location *LocationForm
	// Intent is the intent box (nil: the backend cannot set it).
	Intent    *IntentForm
	Workload  *WorkloadForm
	Reserve   ReserveForm
	Errors    FieldErrors
	Flash     string
	FormError string
	CSRF      string
}

// ConsumerStatus is the live part of the consumer console.
type ConsumerStatus struct {
	ClusterID string
	Facts     []KV
	RTTs      []RTTRow
	Groups    []GroupRow
	// MetricHeader names the node groups' metric under the applied policy.
	MetricHeader string
	Reservations []ConsumerReservationRow
	Nodes        []NodeRow
	Workload     string
	// Why explains the placement (nil when the broker gave none).
	Why *Why
	// Unfit lists pending pods no chunk can fit; UnfitError says why they
	// could not be read.
	Unfit      []UnfitRow
	UnfitError string
	// Choice is the Choice policy's decisions panel (nil: not shown).
	Choice *ChoicePanel
	// Migrations are the broker's moves of the manual reservations, newest
	// first; Saved what the finished ones saved ("—" before the first).
	Migrations []MigrationRow
	Saved      string
	// Budget is the spend budget panel (nil: the consumer has none).
	Budget *BudgetPanel
	// Totals is what the consumer's borrowed capacity costs and emits and
	// what it spent, as the broker says (nil: the broker sent none).
	Totals *TotalsRow
}

// BudgetPanel shows a consumer's budget: Summary ("budget 82 % used",
// "budget reached: scale-up refused") with its badge class, the limits
// against the spend, and the last refusal's reason and age.
type BudgetPanel struct {
	Summary, Class      string
	Facts               []KV
	Refusal, RefusedAgo string
}

// ChoicePanel shows the Choice selector's current choice and its audit log.
type ChoicePanel struct {
	Intent string
	// Current is the chosen provider per chunk type ("zurich (standard)");
	// Source says whether the model or the fallback chose it.
	Current     string
	Source      string
	SourceClass string
	// Account is the model's own reason for its ranking; Why why the
	// fallback applies.
	Account string
	Why     string
	Rows    []DecisionRow
}

// DecisionRow is one entry of the Choice audit log.
type DecisionRow struct {
	At, Source, SourceClass, Picks, Note, Latency string
	Model, Prompt, Raw, Ranking, Rejected         string
}

// IntentForm is the consumer's intent box (Choice policy).
type IntentForm struct {
	Value string
	Max   int
}

// UnfitRow is a pending pod no node group can fit.
type UnfitRow struct {
	Pod      string
	Requests string
	Reason   string
}

// RTTRow is a measured round-trip time.
type RTTRow struct {
	Provider string
	RTT      string
	Chosen   bool
}

// GroupRow is a node group offered to the consumer.
type GroupRow struct {
	ID       string
	Provider string
	Type     string
	Cost     string
	Metric   string
	Reserved string
}

// ConsumerReservationRow is a reservation the consumer holds.
type ConsumerReservationRow struct {
	ID         string
	Provider   string
	Chunks     string
	Phase      string
	PhaseClass string
	Origin     string
	Created    string
	Releasable bool
}

// NodeRow is a virtual node.
type NodeRow struct {
	Name        string
	Reservation string
	Provider    string
	State       string
	StateClass  string
	Since       string
}

// PolicyForm selects the placement policy.
type PolicyForm struct {
	Policies []Option
	Weights  []WeightField
}

// WeightField is one Weighted-policy weight input; Max is the largest
// weight the broker accepts.
type WeightField struct {
	Name  string
	Label string
	Value string
	Max   string
}

// WorkloadForm is the demo workload switch.
type WorkloadForm struct {
	Enabled  bool
	Replicas string
	CPU      string
	Memory   string
}

// ReserveForm creates a manual reservation.
type ReserveForm struct {
	Providers  []Option
	ChunkTypes []Option
	Count      string
	// MaxCount is the most chunks one submission asks for.
	MaxCount int
}
