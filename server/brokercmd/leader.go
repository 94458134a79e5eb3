package brokercmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/ops"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Defaults of the leader election (--leader-elect-*), tuned so that a
// standby takes over within 5 s of the leader's death: it may acquire the
// Lease LeaseDuration after it last saw it renewed, and it looks every
// RetryPeriod (client-go adds up to 20 % jitter). client-go's usual
// 15 s / 10 s / 2 s take 15-17 s.
const (
	DefaultLeaseName     = "federation-autoscaler-broker"
	DefaultLeaseDuration = 3 * time.Second
	DefaultRenewDeadline = 2 * time.Second
	DefaultRetryPeriod   = 500 * time.Millisecond
)

// StandbyRetryAfter is the Retry-After of a standby's 503 answers.
const StandbyRetryAfter = 1 * time.Second

// LeaderOptions configure leader election (--leader-elect and its flags).
type LeaderOptions struct {
	Enabled                                   bool
	LeaseName                                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// elected is set on the Options Run gets once this replica leads.
	elected bool
	// store is the store the standby kept warm (store.Follower), and
	// loaded is called once Run has loaded the state from it.
	store  store.Store
	loaded func()
}

func (lo *LeaderOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&lo.Enabled, "leader-elect", false, "with --store kubernetes: run as one of several replicas; the one holding the Lease --leader-elect-lease-name serves, the others answer 503 with Retry-After and are not ready until they take over")
	f.StringVar(&lo.LeaseName, "leader-elect-lease-name", DefaultLeaseName, "name of the coordination.k8s.io Lease in --namespace")
	f.DurationVar(&lo.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "how long a standby waits after the leader's last renewal before it takes over")
	f.DurationVar(&lo.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "how long the leader tries to renew before it gives up leading (and exits)")
	f.DurationVar(&lo.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "how often replicas try to acquire or renew the Lease")
}

func (lo *LeaderOptions) errors(backend string) []error {
	if !lo.Enabled {
		return nil
	}
	var errs []error
	if backend != StoreKubernetes {
		errs = append(errs, errors.New("--leader-elect needs --store kubernetes: the replicas share the state in the API server"))
	}
	if lo.LeaseName == "" {
		errs = append(errs, errors.New("--leader-elect-lease-name must not be empty"))
	}
	if !(lo.RetryPeriod > 0 && lo.RenewDeadline > lo.RetryPeriod && lo.LeaseDuration > lo.RenewDeadline) {
		errs = append(errs, fmt.Errorf("want --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0",
			lo.LeaseDuration, lo.RenewDeadline, lo.RetryPeriod))
	}
	return errs
}

// errLostLease ends a leader that could not renew its Lease: it exits, and
// its restart is a standby (no two replicas serve at once for longer than
// the store's fencing lets them write).
var errLostLease = errors.New("lost the leader Lease; exiting so that a restart joins as a standby")

// runElected serves as a standby until this replica holds the Lease, then
// runs the broker (Run) on the same listeners until ctx ends or the Lease
// is lost.
func runElected(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	tlsCfg, err := loadTLS(o.PKIDir, log)
	if err != nil {
		return err
	}
	cfg, err := o.Store.kubeConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--leader-elect: building the client: %w", err)
	}
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()[:8]
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: o.Leader.LeaseName, Namespace: o.Store.namespace()},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	st, err := openKube(o, log)
	if err != nil {
		return err
	}
	sb, err := startStandby(o, tlsCfg, log)
	if err != nil {
		return err
	}
	stopFollow, followDone := follow(ctx, st)
	defer func() { stopFollow(); <-followDone }()
	var elected = make(chan struct{})
	var lost atomic.Bool
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	runCtx, runCancel := context.WithCancel(ctx)
	defer runCancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: o.Leader.LeaseName, ReleaseOnCancel: true,
		LeaseDuration: o.Leader.LeaseDuration, RenewDeadline: o.Leader.RenewDeadline, RetryPeriod: o.Leader.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {
				// Also called when this replica gives the Lease up (leCancel
				// after Run); only a renewal failure is a loss.
				if leCtx.Err() == nil {
					lost.Store(true)
					runCancel()
				}
			},
			OnNewLeader: func(leader string) { log.Info("Broker leader", "leader", leader, "self", leader == id) },
		},
	})
	if err != nil {
		sb.stop(log)
		return fmt.Errorf("--leader-elect: %w", err)
	}
	leDone := make(chan struct{})
	go func() { defer close(leDone); le.Run(leCtx) }()
	log.Info("Standing by for the leader Lease", "lease", o.Store.namespace()+"/"+o.Leader.LeaseName, "identity", id)
	select {
	case <-ctx.Done():
		sb.stop(log)
		leCancel()
		<-leDone
		return nil
	case <-elected:
	}
	log.Info("Elected leader: loading the state and serving", "identity", id)
	o.APIListener, o.DashboardListener = sb.handOver(log)
	o.Leader.elected = true
	o.Leader.store, o.Leader.loaded = st, stopFollow
	err = Run(runCtx, o, log)
	leCancel() // releases the Lease now that nothing writes
	<-leDone
	if lost.Load() {
		return errLostLease
	}
	return err
}

// follow keeps a warm copy of the state in st while this replica stands
// by, until stop, which Run calls once it has loaded the state as the
// leader (a takeover reads only what the copy cannot vouch for); done
// closes when the copy is gone.
func follow(ctx context.Context, st store.Follower) (stop func(), done <-chan struct{}) {
	fctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		_ = st.Follow(fctx) // ends with fctx
	}()
	return cancel, ch
}

// standby answers on the broker's listeners while another replica leads:
// the API with 503 + Retry-After (every agent retries it), the dashboard
// listener with /healthz ok and /readyz 503 (no Service sends it traffic).
type standby struct {
	apiLn, dashLn *handoffListener
	api, dash     *fiber.App
	wg            sync.WaitGroup
}

func startStandby(o Options, tlsCfg *tls.Config, log *slog.Logger) (*standby, error) {
	apiRaw, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	sb := &standby{apiLn: newHandoff(apiRaw)}
	sb.api = standbyApp(false)
	sb.serve(sb.api, tls.NewListener(sb.apiLn, tlsCfg), log)
	log.Info("Broker API listening (mTLS, standby)", "addr", apiRaw.Addr().String())
	if o.DashboardListen != "" {
		dashRaw, err := net.Listen("tcp", o.DashboardListen)
		if err != nil {
			sb.stop(log)
			return nil, fmt.Errorf("--dashboard-listen %s: %w", o.DashboardListen, err)
		}
		sb.dashLn = newHandoff(dashRaw)
		sb.dash = standbyApp(true)
		sb.serve(sb.dash, sb.dashLn, log)
		log.Info("Dashboard listening (HTTP, standby)", "addr", dashRaw.Addr().String())
	}
	return sb, nil
}

func (sb *standby) serve(app *fiber.App, ln net.Listener, log *slog.Logger) {
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("Standby listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// standbyApp answers everything with 503 + Retry-After but the health
// probe; dashboard says whether it serves the dashboard listener's /readyz.
func standbyApp(dashboard bool) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(api.HealthResponse{Status: "ok"}) })
	if dashboard {
		app.Get("/readyz", func(c *fiber.Ctx) error {
			return c.Status(http.StatusServiceUnavailable).JSON(ops.ReadyResponse{Status: "standby", Checks: map[string]string{"leader": "another replica holds the Lease"}})
		})
	}
	app.Use(func(c *fiber.Ctx) error {
		c.Set("Retry-After", strconv.Itoa(int(StandbyRetryAfter/time.Second)))
		return c.Status(http.StatusServiceUnavailable).JSON(api.ErrorResponse{
			Code:    api.CodeServiceUnavailable,
			Message: "this broker replica is a standby; the leader serves (retry: a takeover takes a few seconds)",
		})
	})
	return app
}

// handOver stops the standby apps and returns the raw listeners, still
// open, for the leader's Run.
func (sb *standby) handOver(log *slog.Logger) (net.Listener, net.Listener) {
	sb.stop(log)
	var dash net.Listener
	if sb.dashLn != nil {
		dash = sb.dashLn.release()
	}
	return sb.apiLn.release(), dash
}

// stop ends the standby apps (their listeners stay open until release or
// closeRaw).
func (sb *standby) stop(log *slog.Logger) {
	for _, app := range []*fiber.App{sb.api, sb.dash} {
		if app == nil {
			continue
		}
		if err := app.ShutdownWithTimeout(shutdownTimeout); err != nil {
			log.Error("Standby shutdown", "err", err)
		}
	}
	sb.wg.Wait()
}

// handoffListener lets the standby app serve a listener and give it up
// without closing it: Close only ends this user's Accept.
type handoffListener struct {
	net.Listener
	closed atomic.Bool
}

func newHandoff(ln net.Listener) *handoffListener { return &handoffListener{Listener: ln} }

// deadliner is a listener whose Accept can be woken (*net.TCPListener).
type deadliner interface{ SetDeadline(time.Time) error }

func (h *handoffListener) Accept() (net.Conn, error) {
	c, err := h.Listener.Accept()
	if h.closed.Load() {
		if c != nil {
			_ = c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

// Close ends Accept (waking it through the deadline) but not the listener.
func (h *handoffListener) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	if d, ok := h.Listener.(deadliner); ok {
		return d.SetDeadline(time.Now())
	}
	return nil
}

// release returns the underlying listener, ready for its next user.
func (h *handoffListener) release() net.Listener {
	_ = h.Close()
	if d, ok := h.Listener.(deadliner); ok {
		_ = d.SetDeadline(time.Time{})
	}
	return h.Listener
}
