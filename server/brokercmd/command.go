// Package brokercmd provides the `broker` subcommand: it opens the durable
// store, loads the domain, and serves the Broker API v1 over mTLS and the
// dashboard listener over plain HTTP until its context ends.
package brokercmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/pprof"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/internal/memlimit"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
	"github.com/federation-autoscaler/federation-autoscaler/server/ops"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// shutdownTimeout bounds the graceful shutdown of each listener.
const shutdownTimeout = 15 * time.Second

// certExpiryWarning: a broker certificate expiring sooner is logged at start.
const certExpiryWarning = 30 * 24 * time.Hour

// Options are the broker's flags.
type Options struct {
	PKIDir             string
	DataDir            string
	Listen             string
	DashboardListen    string
	AllowLegacyCerts   bool
	ReservationLease   time.Duration
	ProviderStaleAfter time.Duration
	// DisconnectGrace keeps a stale provider's live reservations this much
	// longer (0: fail them at once); a consumer may set its own.
	DisconnectGrace time.Duration
	// ReevaluateInterval and the thresholds drive the re-evaluation of
	// held capacity (a consumer may set its own thresholds).
	ReevaluateInterval time.Duration
	CostThreshold      float64
	CarbonThreshold    float64
	RTTThreshold       float64
	// MigrationBudget moves of a consumer's manual reservations may start
	// in any MigrationWindow (0: no migration); a move whose target is not
	// Ready within MigrationTimeout fails (a consumer may set its own
	// budget and window).
	MigrationBudget  int
	MigrationWindow  time.Duration
	MigrationTimeout time.Duration
	RateLimitBurst   int
	RateLimitRPS     float64
	ReleaseBurst     int
	ChunkConfig      string
	DashboardToken   string
	// Currency is the ISO 4217 code the dashboard shows prices in.
	Currency string
	// ChunkWattsStandard and ChunkWattsGPU are one chunk's power draw, for
	// the carbon of borrowed capacity (0: the placement defaults).
	ChunkWattsStandard, ChunkWattsGPU float64
	// RandomSeed seeds the Random placement policy's draws (the
	// experiments' baseline; docs/placement.md).
	RandomSeed uint64
	// HistoryWindow is how long the dashboard's charts and stored history
	// reach back (0: web.DefaultHistoryWindow).
	HistoryWindow time.Duration
	// Limits bound what each listener holds (--max-conns,
	// --max-conns-per-ip, --handshake-timeout; zero: automatic).
	Limits netguard.Limits
	// ResetDamagedStore moves a damaged database aside and starts empty
	// instead of refusing to start.
	ResetDamagedStore bool
	// Store chooses the store (--store bolt|kubernetes and its flags).
	Store StoreOptions
	// Leader runs the broker as one of several replicas (--leader-elect).
	Leader LeaderOptions
	// Pprof serves Go's profiles under /debug/pprof/ on the dashboard
	// listener, behind --dashboard-token when set (--pprof).
	Pprof bool
	// Mounts add routes to the dashboard listener besides the web
	// dashboard (which Run mounts itself).
	Mounts []ops.Mount
	// APIListener and DashboardListener, when set, are used instead of
	// listening on Listen and DashboardListen (a program embedding the
	// broker binds ephemeral ports first; Run closes them).
	APIListener, DashboardListener net.Listener
	// OnDashboard, when set, receives the web dashboard once built (an
	// embedding program can drop its browsers' websockets).
	OnDashboard func(*web.Dashboard)
}

// NewCommand returns the `broker` subcommand. Extra dashboard mounts (the
// web dashboard) may be passed in.
func NewCommand(mounts ...ops.Mount) *cobra.Command {
	var mem memlimit.Options
	o := Options{Mounts: mounts}
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run the federation broker (Broker API v1 over mTLS, dashboard over HTTP)",
		Long: `Run the broker: the federation's control plane. It serves the Broker API v1
on --listen over mTLS (client certificates from 'federation-autoscaler pki join'),
and health, readiness, metrics, the overview and the dashboard on
--dashboard-listen over plain HTTP. State lives in a bbolt file in --data-dir
(or, with --store kubernetes, in custom resources and Secrets of a Kubernetes
API server); every acknowledged change is durable before the answer goes out.`,
		Example: `  federation-autoscaler pki init --dir /etc/fa/pki --host broker.example.org
  federation-autoscaler broker --pki-dir /etc/fa/pki --data-dir /var/lib/fa`,
		Args: cobra.NoArgs,
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			// The memory limit is the process's: set by the command, not
			// by Run, which programs embed beside other components.
			d, err := mem.Apply()
			if err != nil {
				return err
			}
			log.Info("Go memory limit", "bytes", d.Limit, "source", d.Source)
			return Run(cmd.Context(), o, log)
		}),
	}
	f := cmd.Flags()
	mem.AddFlags(f)
	f.StringVar(&o.PKIDir, "pki-dir", "", "directory with ca.crt, broker.crt and broker.key (made by 'pki init') (required)")
	f.StringVar(&o.DataDir, "data-dir", "", "directory of the broker's database (created if missing) (required with --store bolt)")
	f.StringVar(&o.Listen, "listen", ":8443", "address of the Broker API (mTLS)")
	f.StringVar(&o.DashboardListen, "dashboard-listen", DefaultDashboardListen, "address of the dashboard listener (plain HTTP: health, readiness, metrics, overview, dashboard); loopback by default, e.g. :9444 for every interface (then set --dashboard-token); empty disables it")
	f.BoolVar(&o.AllowLegacyCerts, "allow-legacy-certs", false, "accept client certificates without a role (the reference broker's) for both roles")
	f.DurationVar(&o.ReservationLease, "reservation-lease", reservations.DefaultReservationLease, "a reservation whose consumer has not sent a heartbeat for this long expires")
	f.DurationVar(&o.ProviderStaleAfter, "provider-stale-after", reservations.DefaultProviderStaleAfter, "a provider without an advertisement for this long becomes unavailable")
	f.DurationVar(&o.DisconnectGrace, "disconnect-grace", reservations.DefaultDisconnectGrace, "once a provider is stale (--provider-stale-after), keep its live reservations this much longer before they fail, so an agent restart evicts nothing; 0: fail them at once; a consumer's ConsumerPolicy lifecycle.disconnectGraceSeconds overrides it, and a virtual node the consumer reports NotReady ends it at once")
	f.DurationVar(&o.ReevaluateInterval, "reevaluate-interval", reservations.DefaultReevaluateInterval, "re-evaluate every consumer's held capacity at least this often (a price, carbon, capacity or policy change does it at the next sweep)")
	f.Float64Var(&o.CostThreshold, "reevaluate-cost-threshold", placement.DefaultCostThreshold, "Price consumers: another provider must be cheaper by more than this per chunk and hour (in --currency) for a held chunk to be worth moving")
	f.Float64Var(&o.CarbonThreshold, "reevaluate-carbon-threshold", placement.DefaultCarbonThreshold, "Eco consumers: another provider must emit less by more than this many gCO2eq per chunk and hour")
	f.Float64Var(&o.RTTThreshold, "reevaluate-rtt-threshold", placement.DefaultRTTThreshold, "Latency consumers: another provider's measured RTT must be lower by more than this many ms")
	f.IntVar(&o.MigrationBudget, "migration-budget", reservations.DefaultMigrationBudget, "the one disruption budget: at most this many moves of one consumer to a better provider start in any --migration-window, the broker's migrations of manual reservations and the consumer agent's consolidations of autoscaled capacity counted together; 0: no move of either kind; a consumer's ConsumerPolicy lifecycle.migrations (or its deprecated aliases maxMovesPerWindow / moveWindowSeconds) overrides it")
	f.DurationVar(&o.MigrationWindow, "migration-window", reservations.DefaultMigrationWindow, "the window of --migration-budget (the one disruption budget)")
	f.DurationVar(&o.MigrationTimeout, "migration-timeout", reservations.DefaultMigrationTimeout, "a move whose new reservation's virtual node is not Ready this long after it started fails: the new reservation is released, the old one kept (and not moved again for this long)")
	f.IntVar(&o.RateLimitBurst, "rate-limit-burst", rest.DefaultRateLimitBurst, "token-bucket burst of the per-certificate rate limit")
	f.Float64Var(&o.RateLimitRPS, "rate-limit-rps", rest.DefaultRateLimitRPS, "sustained requests per second of the per-certificate rate limit")
	f.IntVar(&o.ReleaseBurst, "rate-limit-release-burst", rest.DefaultReleaseBurst, "token-bucket burst of the per-certificate releases (DELETE of reservations; a whole scale-down), refilled at --rate-limit-rps; never below --rate-limit-burst; 0: the default")
	f.StringVar(&o.ChunkConfig, "chunk-config", "", "YAML or JSON file with the chunk shapes (default: the built-in shapes)")
	f.Float64Var(&o.ChunkWattsStandard, "chunk-watts-standard", placement.DefaultStandardChunkWatts, "power draw of one standard chunk in watts, for the carbon of borrowed capacity (gCO2eq/h = chunks × kW × grid gCO2eq/kWh)")
	f.Float64Var(&o.ChunkWattsGPU, "chunk-watts-gpu", placement.DefaultGPUChunkWatts, "power draw of one GPU chunk in watts, for the carbon of borrowed capacity")
	f.Uint64Var(&o.RandomSeed, "random-seed", 0, "seed of the Random placement policy's draws (the experiments' baseline): the same seed and the same sequence of reservations draw the same providers")
	f.DurationVar(&o.HistoryWindow, "history-window", web.DefaultHistoryWindow, "how far back the dashboard's charts reach; their samples (every 5s) are stored in the broker's database and kept across restarts for this long")
	f.StringVar(&o.Currency, "currency", web.DefaultCurrency, "ISO 4217 code the dashboard shows prices in (placement compares prices as numbers: the federation prices in one currency)")
	f.StringVar(&o.DashboardToken, "dashboard-token", "", "bearer token required for the overview and the dashboard pages (health, readiness and metrics stay open)")
	f.BoolVar(&o.Pprof, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the dashboard listener (behind --dashboard-token when set; CPU profiles at most ?seconds=25: the listener's write timeout is 30s)")
	o.Limits.AddFlags(f)
	cmd.AddCommand(newMigrateCommand())
	o.Store.addFlags(f)
	o.Leader.addFlags(f)
	f.BoolVar(&o.ResetDamagedStore, "reset-damaged-store", false, "when the database in --data-dir is damaged, move it aside (broker.db.damaged-<time>) and start with an empty one instead of refusing to start; an intact database is used as it is")
	return cmd
}

// Validate checks the options and says how to fix them.
func (o *Options) Validate() error {
	errs := o.placeErrors()
	for _, w := range []struct {
		flag string
		v    float64
	}{{"--chunk-watts-standard", o.ChunkWattsStandard}, {"--chunk-watts-gpu", o.ChunkWattsGPU}} {
		if !(w.v >= 0 && w.v <= MaxChunkWatts) {
			errs = append(errs, fmt.Errorf("%s must be between 0 and %v watts (0: the default), got %v", w.flag, MaxChunkWatts, w.v))
		}
	}
	if o.HistoryWindow != 0 && (o.HistoryWindow < MinHistoryWindow || o.HistoryWindow > MaxHistoryWindow) {
		errs = append(errs, fmt.Errorf("--history-window must be between %s and %s, got %s", MinHistoryWindow, MaxHistoryWindow, o.HistoryWindow))
	}
	if o.ReservationLease <= 0 {
		errs = append(errs, fmt.Errorf("--reservation-lease must be positive, got %s", o.ReservationLease))
	}
	if o.ProviderStaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--provider-stale-after must be positive, got %s", o.ProviderStaleAfter))
	}
	if o.DisconnectGrace < 0 || o.DisconnectGrace > api.MaxDisconnectGraceSeconds*time.Second {
		errs = append(errs, fmt.Errorf("--disconnect-grace must be between 0 (no grace) and %s, got %s", api.MaxDisconnectGraceSeconds*time.Second, o.DisconnectGrace))
	}
	if o.ReevaluateInterval != 0 && o.ReevaluateInterval < time.Second {
		errs = append(errs, fmt.Errorf("--reevaluate-interval must be at least 1s (0: the default %s), got %s", reservations.DefaultReevaluateInterval, o.ReevaluateInterval))
	}
	th := o.thresholds()
	if fe := (&api.Thresholds{CostPerHour: &th.CostPerHour, CarbonPerHour: &th.CarbonPerHour, RTTMillis: &th.RTTMillis}).Check(""); fe != nil {
		errs = append(errs, fmt.Errorf("--reevaluate-%s-threshold must be %s, got %s", thresholdFlag[fe.Field], fe.Want, fe.Value))
	}
	errs = append(errs, o.migrationErrors()...)
	if o.RateLimitBurst < 1 {
		errs = append(errs, fmt.Errorf("--rate-limit-burst must be >= 1, got %d", o.RateLimitBurst))
	}
	if o.ReleaseBurst < 0 {
		errs = append(errs, fmt.Errorf("--rate-limit-release-burst must be >= 0 (0: the default %d), got %d", rest.DefaultReleaseBurst, o.ReleaseBurst))
	}
	if t := strings.TrimSpace(o.DashboardToken); o.DashboardToken != "" && len(t) < auth.MinTokenLength {
		errs = append(errs, fmt.Errorf("--dashboard-token is %d characters; use at least %d (e.g. openssl rand -hex 16)", len(t), auth.MinTokenLength))
	}
	if !(o.RateLimitRPS > 0) {
		errs = append(errs, fmt.Errorf("--rate-limit-rps must be > 0, got %v", o.RateLimitRPS))
	}
	if _, err := o.Limits.ForListeners(o.listeners()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// placeErrors checks where the broker reads and listens: --pki-dir (with
// its files), --data-dir, --listen and --dashboard-listen.
func (o *Options) placeErrors() []error {
	var errs []error
	if o.PKIDir == "" {
		errs = append(errs, errors.New("--pki-dir is required: the directory made by `federation-autoscaler pki init --dir D`"))
	} else {
		for _, name := range []string{pki.CACertFile, pki.BrokerCertFile, pki.BrokerKeyFile} {
			p := filepath.Join(o.PKIDir, name)
			if _, err := os.Stat(p); err != nil {
				errs = append(errs, fmt.Errorf("--pki-dir: %s is missing (%w): run `federation-autoscaler pki init --dir %s` first", p, err, o.PKIDir))
			}
		}
	}
	errs = append(errs, o.Store.errors(o.DataDir)...)
	errs = append(errs, o.Leader.errors(o.Store.Backend)...)
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen must not be empty, e.g. :8443"))
	} else if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want host:port, e.g. :8443: %w", o.Listen, err))
	}
	if o.DashboardListen != "" {
		if _, _, err := net.SplitHostPort(o.DashboardListen); err != nil {
			errs = append(errs, fmt.Errorf("--dashboard-listen %q: want host:port, e.g. :9444, or empty to disable: %w", o.DashboardListen, err))
		}
	}
	return errs
}

// Bounds of the flags above.
const (
	MaxChunkWatts    = 100_000.0
	MinHistoryWindow = 5 * time.Minute
	MaxHistoryWindow = 7 * 24 * time.Hour
)

// chunkWatts is the power draw per chunk type, zero values left to the
// placement defaults.
func (o *Options) chunkWatts() map[api.ChunkType]float64 {
	w := map[api.ChunkType]float64{}
	if o.ChunkWattsStandard > 0 {
		w[api.ChunkStandard] = o.ChunkWattsStandard
	}
	if o.ChunkWattsGPU > 0 {
		w[api.ChunkGPU] = o.ChunkWattsGPU
	}
	return w
}

// DefaultDashboardListen is the dashboard listener's default address:
// loopback, because without --dashboard-token the dashboard shows the whole
// federation to whoever reaches it. A deployment that needs it on the
// network (kubelet probes, a Service) passes --dashboard-listen :9444.
const DefaultDashboardListen = "127.0.0.1:9444"

// isLoopback reports whether addr is a loopback address (an unspecified
// address, ":9444", listens on every interface and is not).
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// listeners is how many listeners the broker opens.
func (o *Options) listeners() int {
	if o.DashboardListen == "" && o.DashboardListener == nil {
		return 1
	}
	return 2
}

// webDashboard returns the mount of the live web dashboard: it renders the
// domain's overview, pushes changes to browsers until ctx ends and, with a
// dashboard token, has its own login page and session cookie, which the
// listener's token guard honours.
func webDashboard(ctx context.Context, svc *reservations.Service, hist web.HistoryStore, o Options, log *slog.Logger) (ops.Mount, error) {
	opts := web.DashboardOptions{SiteOptions: web.SiteOptions{Currency: o.Currency, Log: log}, StaleAfter: o.ProviderStaleAfter, HistoryWindow: o.HistoryWindow, HistoryStore: hist}
	if o.DashboardToken != "" {
		tok, err := auth.NewStaticToken(o.DashboardToken)
		if err != nil {
			return nil, fmt.Errorf("--dashboard-token: %w", err)
		}
		opts.Token = tok
	}
	d, err := web.NewDashboard(svc, opts)
	if err != nil {
		return nil, fmt.Errorf("building the web dashboard: %w", err)
	}
	if o.OnDashboard != nil {
		o.OnDashboard(d)
	}
	return func(app *fiber.App) ops.Access {
		d.Mount(app)
		go func() {
			if err := d.Run(ctx); err != nil {
				log.Error("Web dashboard stopped", "err", err)
			}
		}()
		return ops.Access{Owns: d.Owns, Authenticated: d.Authenticated}
	}, nil
}

// pprofMount serves /debug/pprof/ when on. Its routes are behind the
// dashboard's token guard (the mount owns none of them).
func pprofMount(on bool) []ops.Mount {
	if !on {
		return nil
	}
	return []ops.Mount{func(app *fiber.App) ops.Access {
		// The mutex profile is empty unless sampled: one contention in
		// 20 is recorded, with the stack that held the lock.
		runtime.SetMutexProfileFraction(20)
		app.Use(pprof.New())
		return ops.Access{}
	}}
}

// Run serves the broker until ctx ends (graceful shutdown) or a listener
// fails (an error).
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if o.Leader.Enabled && !o.Leader.elected {
		return runElected(ctx, o, log)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	tlsCfg, err := loadTLS(o.PKIDir, log)
	if err != nil {
		return err
	}
	chunks, err := o.chunkConfig()
	if err != nil {
		return err
	}
	ready := &ops.Readiness{}
	svc, hist, err := openService(o, chunks, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Error("Closing the store failed", "err", err)
		}
	}()
	ready.SetStoreLoaded(true)
	if o.Leader.loaded != nil {
		o.Leader.loaded()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), svc.Collector())
	guard, err := netguard.New(netguard.Options{Limits: o.Limits, Listeners: o.listeners(), Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	srv, err := listen(o, guard, tlsCfg)
	if err != nil {
		return err
	}

	// base ends the domain's background work and every long-poll at once
	// when shutdown starts.
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		if err := svc.Run(base); err != nil {
			log.Error("Broker background work stopped", "err", err)
		}
	}()

	srv.serveAPI(base, o, svc, reg, guard.Limits(), log)
	ready.SetAPIServing(true)
	if o.Leader.elected {
		go reconcileAfterTakeover(base, svc, log)
	}

	if err := srv.serveDashboard(base, o, svc, hist, reg, ready, log); err != nil {
		cancel()
		srv.shutdown(log)
		<-runDone
		return err
	}

	runErr := srv.wait(ctx, log)
	ready.SetAPIServing(false)
	cancel()
	srv.shutdown(log)
	<-runDone
	return runErr
}

// chunkConfig is the chunk shapes (--chunk-config, else the built-in ones).
func (o *Options) chunkConfig() (placement.ChunkConfig, error) {
	if o.ChunkConfig == "" {
		return placement.DefaultChunkConfig(), nil
	}
	chunks, err := placement.LoadChunkConfig(o.ChunkConfig)
	if err != nil {
		return chunks, fmt.Errorf("--chunk-config: %w", err)
	}
	return chunks, nil
}

// serveAPI serves the Broker API on the API listener; base ends its
// long-polls at shutdown.
func (srv *servers) serveAPI(base context.Context, o Options, svc *reservations.Service, reg *prometheus.Registry, lim netguard.Limits, log *slog.Logger) {
	srv.api = rest.NewApp(rest.Config{
		Broker:           svc,
		Logger:           log,
		AllowLegacyCerts: o.AllowLegacyCerts,
		RateLimitBurst:   o.RateLimitBurst,
		RateLimitRPS:     o.RateLimitRPS,
		ReleaseBurst:     o.ReleaseBurst,
		Metrics:          reg,
		BaseContext:      func() context.Context { return base },
	})
	go srv.serve("API", srv.api, srv.apiLn)
	log.Info("Broker API listening (mTLS)", "addr", srv.apiLn.Addr().String(), "allowLegacyCerts", o.AllowLegacyCerts,
		"maxConns", lim.MaxConns, "maxConnsPerIP", lim.MaxConnsPerIP, "handshakeTimeout", lim.HandshakeTimeout)
}

// reconcileAfterTakeover asks every active cluster for its state once this
// replica leads (reservations.Service.ReconcileAll): what the old leader
// acknowledged is in the store, but a result or advertisement it received
// and never stored is only in the agents. It runs beside the serving API.
func reconcileAfterTakeover(ctx context.Context, svc *reservations.Service, log *slog.Logger) {
	n, err := svc.ReconcileAll(ctx)
	if err != nil {
		log.Warn("Issuing Reconcile to the clusters after the takeover failed; agents still re-post their results and advertisements", "err", err)
		return
	}
	log.Info("Leader takeover: Reconcile issued to the active clusters", "clusters", n)
}

// loadTLS loads the broker's server TLS material from dir and warns when its
// certificate expires within certExpiryWarning.
func loadTLS(dir string, log *slog.Logger) (*tls.Config, error) {
	tlsCfg, err := pki.ServerTLSConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the broker's TLS material from --pki-dir %s: %w", dir, err)
	}
	if leaf := tlsCfg.Certificates[0].Leaf; leaf != nil {
		if left := time.Until(leaf.NotAfter); left < certExpiryWarning {
			log.Warn("The broker certificate expires soon; issue a new one before then or every agent's handshake fails",
				"file", filepath.Join(dir, pki.BrokerCertFile), "notAfter", leaf.NotAfter.UTC(), "left", left.Round(time.Hour))
		}
	}
	return tlsCfg, nil
}

// openService opens the store (--store) and loads the domain from it. The
// history store keeps the dashboard's history (nil: in memory only).
func openService(o Options, chunks placement.ChunkConfig, log *slog.Logger) (*reservations.Service, web.HistoryStore, error) {
	st, hist, err := openStore(o, log)
	if err != nil {
		return nil, nil, err
	}
	svc, err := reservations.New(reservations.Config{
		Store:              st,
		Logger:             log,
		ChunkConfig:        chunks,
		ReservationLease:   o.ReservationLease,
		ProviderStaleAfter: o.ProviderStaleAfter,
		DisconnectGrace:    o.DisconnectGrace,
		Thresholds:         ptr(o.thresholds()),
		ReevaluateInterval: o.ReevaluateInterval,
		MigrationBudget:    o.MigrationBudget,
		MigrationWindow:    o.MigrationWindow,
		MigrationTimeout:   o.MigrationTimeout,
		Placer:             placement.NewIndex(chunks, placement.WithChunkWatts(o.chunkWatts()), placement.WithRandomSeed(o.RandomSeed)),
		SpendStore:         spendStore(hist),
	})
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return svc, hist, nil
}

// spendStore is the store that keeps the spend book: the one keeping the
// dashboard's history (the bbolt store), else none (in memory only).
func spendStore(hist web.HistoryStore) reservations.SpendStore {
	if ss, ok := hist.(reservations.SpendStore); ok {
		return ss
	}
	return nil
}

// servers are the broker's listeners and the apps serving them.
type servers struct {
	apiLn, dashLn net.Listener
	api, dash     *fiber.App
	// errc receives each app's end (nil when it stopped cleanly).
	errc chan error
}

// listen opens the API listener (mTLS) and the dashboard listener (when
// asked for), both through the guard: floods, EMFILE and silent peers never
// end the process (server/netguard).
func listen(o Options, guard *netguard.Guard, tlsCfg *tls.Config) (*servers, error) {
	srv := &servers{errc: make(chan error, 2)}
	rawAPI := o.APIListener
	if rawAPI == nil {
		var err error
		if rawAPI, err = net.Listen("tcp", o.Listen); err != nil {
			return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
		}
	}
	srv.apiLn = guard.WrapTLS("api", rawAPI, tlsCfg)
	if rawDash := o.DashboardListener; rawDash != nil {
		srv.dashLn = guard.Wrap("dashboard", rawDash)
	} else if o.DashboardListen != "" {
		var err error
		if srv.dashLn, err = guard.Listen(context.Background(), "dashboard", o.DashboardListen); err != nil {
			_ = srv.apiLn.Close()
			return nil, fmt.Errorf("--dashboard-listen %s: %w", o.DashboardListen, err)
		}
	}
	return srv, nil
}

// serve runs app on ln and reports its end on errc.
func (srv *servers) serve(name string, app *fiber.App, ln net.Listener) {
	if err := app.Listener(ln); err != nil {
		srv.errc <- fmt.Errorf("%s listener %s: %w", name, ln.Addr(), err)
		return
	}
	srv.errc <- nil
}

// serveDashboard serves the dashboard listener, when there is one: the web
// dashboard, metrics, health, pprof when asked for and o.Mounts.
func (srv *servers) serveDashboard(base context.Context, o Options, svc *reservations.Service, hist web.HistoryStore, reg *prometheus.Registry, ready *ops.Readiness, log *slog.Logger) error {
	if srv.dashLn == nil {
		return nil
	}
	webDash, err := webDashboard(base, svc, hist, o, log)
	if err != nil {
		return err
	}
	srv.dash = ops.New(ops.Config{
		Overview:     svc,
		Explanations: svc,
		Gatherer:     reg,
		Readiness:    ready,
		Token:        o.DashboardToken,
		Logger:       log,
		Mounts:       append(append([]ops.Mount{webDash}, pprofMount(o.Pprof)...), o.Mounts...),
	})
	go srv.serve("dashboard", srv.dash, srv.dashLn)
	log.Info("Dashboard listening (HTTP)", "addr", srv.dashLn.Addr().String(), "tokenRequired", o.DashboardToken != "")
	if o.DashboardToken == "" && !isLoopback(srv.dashLn.Addr()) {
		log.Warn("THE DASHBOARD IS OPEN TO THE NETWORK WITHOUT A TOKEN: anyone who reaches "+srv.dashLn.Addr().String()+
			" sees every provider, consumer, price and reservation; set --dashboard-token, or bind it to loopback (--dashboard-listen 127.0.0.1:9444)",
			"addr", srv.dashLn.Addr().String())
	}
	return nil
}

// wait returns when ctx ends (nil) or a listener stops (its error).
func (srv *servers) wait(ctx context.Context, log *slog.Logger) error {
	select {
	case <-ctx.Done():
		log.Info("Shutting down")
		return nil
	case err := <-srv.errc:
		if err == nil {
			err = errors.New("a listener stopped unexpectedly")
		}
		log.Error("Listener failed; shutting down", "err", err)
		return err
	}
}

// shutdown stops the apps gracefully (each within shutdownTimeout) and
// closes the listeners.
func (srv *servers) shutdown(log *slog.Logger) {
	if srv.api != nil {
		if err := srv.api.ShutdownWithTimeout(shutdownTimeout); err != nil {
			log.Error("API shutdown", "err", err)
		}
	}
	if srv.dash != nil {
		if err := srv.dash.ShutdownWithTimeout(shutdownTimeout); err != nil {
			log.Error("Dashboard shutdown", "err", err)
		}
	}
	// Shutdown is a no-op when it runs before a Listener has started
	// serving; closing the listeners ends them in every case.
	_ = srv.apiLn.Close()
	if srv.dashLn != nil {
		_ = srv.dashLn.Close()
	}
}

// migrationErrors checks the migration flags (the bounds of the
// consumers' own lifecycle.migrations; a zero duration takes the default).
func (o *Options) migrationErrors() []error {
	var errs []error
	if o.MigrationBudget < 0 || o.MigrationBudget > api.MaxMigrationsPerWindow {
		errs = append(errs, fmt.Errorf("--migration-budget must be between 0 (no migration) and %d, got %d", api.MaxMigrationsPerWindow, o.MigrationBudget))
	}
	if w := o.MigrationWindow; w < 0 || w > api.MaxMigrationWindowSeconds*time.Second {
		errs = append(errs, fmt.Errorf("--migration-window must be between 1s and %s (0: the default %s), got %s", api.MaxMigrationWindowSeconds*time.Second, reservations.DefaultMigrationWindow, w))
	}
	if d := o.MigrationTimeout; d != 0 && d < time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("--migration-timeout must be between 1s and 24h (0: the default %s), got %s", reservations.DefaultMigrationTimeout, d))
	}
	return errs
}

// thresholdFlag names the flag of each api.Thresholds field.
var thresholdFlag = map[string]string{"costPerHour": "cost", "carbonPerHour": "carbon", "rttMillis": "rtt"}

func (o *Options) thresholds() placement.Thresholds {
	return placement.Thresholds{CostPerHour: o.CostThreshold, CarbonPerHour: o.CarbonThreshold, RTTMillis: o.RTTThreshold}
}

func ptr[T any](v T) *T { return &v }
