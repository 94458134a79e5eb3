// Package loadgencmd provides the `loadgen` subcommand: it drives a broker
// with simulated agents (server/loadgen), either a broker it starts itself
// from the same binary (--start-broker, with a fresh PKI and data directory)
// or a running one (--broker-url, --pki-dir with the federation's CA key,
// --broker-pid for its CPU and RSS), and prints the report as Markdown or
// JSON.
package loadgencmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/server/loadgen"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// Options are the command's flags.
type Options struct {
	Config       loadgen.Config
	Instructions string
	Output       string
	StartBroker  bool
	PKIDir       string
	// BrokerArgs are extra flags for the started broker.
	BrokerArgs []string
	// BrokerLogLevel is the started broker's --log-level.
	BrokerLogLevel string
	// NoDashboard starts the broker without its dashboard listener.
	NoDashboard bool
	// KeepDir keeps the started broker's directory (PKI, data, log).
	KeepDir bool
	// BrokerBinary is the binary started as the broker (default: this one).
	BrokerBinary string
	// pickPort picks a loopback address for the started broker (tests;
	// nil: freePort).
	pickPort func() (string, error)
}

// NewCommand returns the `loadgen` subcommand.
func NewCommand() *cobra.Command {
	var o Options
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Drive a broker with simulated agents and report its CPU, memory and latency",
		Long: `Simulate providers and consumers against a broker: each has its own mTLS
certificate (issued in memory from the federation's CA) and keep-alive
HTTP/1.1 connections, and follows the agents' cadences (advertisements every
30 s, heartbeats every 15 s, node-group lists every 5 s, instruction
long-polls or polls every 5 s), with jittered starts. After --warmup, --duration
is measured: per-route latency (p50/p90/p99/max), errors per route and status,
the broker's CPU per request and RSS (from /proc/<pid>), and the generator's
own CPU and scheduling lag.

With --start-broker the same binary is started as the broker on loopback ports
with a fresh PKI and data directory (removed afterwards) and connection caps
sized for the agents. Otherwise give --broker-url, --pki-dir (with ca.key) and
--broker-pid of a broker on this machine; its --max-conns-per-ip must allow
every simulated agent from one address.`,
		Example: `  federation-autoscaler loadgen --start-broker --providers 500 --consumers 500
  federation-autoscaler loadgen --start-broker --providers 250 --consumers 250 --viewers 1 --output json
  federation-autoscaler loadgen --broker-url https://127.0.0.1:8443 --pki-dir /etc/fa/pki --broker-pid 4242`,
		Args: cobra.NoArgs,
		RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
			// The generator's own collections pause its agents and show
			// up in their latencies as if the broker were slow: it trades
			// memory for a quarter of them (GOGC, when set, wins). The
			// started broker keeps the runtime's default.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(generatorGOGC)
			}
			return Run(cmd.Context(), o, cmd.OutOrStdout(), log)
		}),
	}
	f := cmd.Flags()
	c := &o.Config
	f.IntVar(&c.Providers, "providers", 250, "simulated provider agents")
	f.IntVar(&c.Consumers, "consumers", 250, "simulated consumer agents")
	f.DurationVar(&c.Warmup, "warmup", 40*time.Second, "time the agents run before the measured window (they register, one TLS handshake each, spread over its first half)")
	f.DurationVar(&c.Window, "duration", 2*time.Minute, "the measured window")
	f.DurationVar(&c.AdvertiseEvery, "advertise-every", 30*time.Second, "advertisement period of a provider")
	f.DurationVar(&c.HeartbeatEvery, "heartbeat-every", 15*time.Second, "heartbeat period of a consumer")
	f.DurationVar(&c.NodeGroupsEvery, "nodegroups-every", 5*time.Second, "node-group list period of a consumer")
	f.StringVar(&o.Instructions, "instructions", string(loadgen.LongPoll), "how agents fetch instructions: longpoll (back-to-back waits, like this project's agents) or poll (every --poll-every, like the reference agents)")
	f.DurationVar(&c.PollEvery, "poll-every", 5*time.Second, "instruction poll period with --instructions poll")
	f.DurationVar(&c.LongPollWait, "long-poll-wait", 30*time.Second, "the wait of one instruction long-poll (at most 60s)")
	f.IntVar(&c.Viewers, "viewers", 0, "websocket viewers of the live dashboard (needs an open dashboard: --start-broker, or --dashboard-url of a broker without --dashboard-token)")
	f.StringVar(&c.DashboardURL, "dashboard-url", "", "the dashboard listener's URL for --viewers, e.g. http://127.0.0.1:9444 (set by --start-broker)")
	f.StringVar(&c.MetricsURL, "metrics-url", "", "the broker's /metrics, e.g. http://127.0.0.1:9444/metrics: its own latency histogram is read at both ends of the window and each route's broker-side p99 reported beside the generator's (set by --start-broker with a dashboard)")
	f.StringVar(&o.Output, "output", "markdown", "report format: markdown or json")
	f.BoolVar(&o.StartBroker, "start-broker", false, "start this binary's broker on loopback ports with a fresh PKI and data directory")
	f.StringVar(&o.BrokerLogLevel, "broker-log-level", "info", "--log-level of the started broker (info logs a line per request, as a default deployment does)")
	f.BoolVar(&o.NoDashboard, "no-dashboard", false, "start the broker without its dashboard listener")
	f.StringArrayVar(&o.BrokerArgs, "broker-arg", nil, "extra flag for the started broker (repeatable), e.g. --broker-arg=--rate-limit-rps=10")
	f.StringVar(&o.BrokerBinary, "broker-binary", "", "binary started by --start-broker (default: this one), e.g. an older build to compare")
	f.BoolVar(&o.KeepDir, "keep-dir", false, "keep the started broker's directory (PKI, database, broker.log) and print its path")
	f.StringVar(&c.BrokerURL, "broker-url", "", "Broker API URL of a running broker, e.g. https://127.0.0.1:8443")
	f.StringVar(&o.PKIDir, "pki-dir", "", "directory with the federation's ca.crt and ca.key (issues the agents' certificates) for --broker-url")
	f.IntVar(&c.BrokerPID, "broker-pid", 0, "pid of the running broker, for its CPU and RSS (/proc/<pid>)")
	return cmd
}

// Validate checks the flags and says how to fix them.
func (o *Options) Validate() error {
	var errs []error
	c := &o.Config
	if c.Providers < 0 || c.Consumers < 0 || c.Providers+c.Consumers == 0 {
		errs = append(errs, fmt.Errorf("--providers %d and --consumers %d: want at least one agent and no negative count", c.Providers, c.Consumers))
	}
	switch loadgen.InstructionMode(o.Instructions) {
	case loadgen.LongPoll, loadgen.Poll:
	default:
		errs = append(errs, fmt.Errorf("--instructions %q: want longpoll or poll", o.Instructions))
	}
	if c.LongPollWait > time.Minute {
		errs = append(errs, fmt.Errorf("--long-poll-wait %s: the broker accepts at most 60s", c.LongPollWait))
	}
	for name, d := range map[string]time.Duration{"--warmup": c.Warmup, "--duration": c.Window, "--advertise-every": c.AdvertiseEvery,
		"--heartbeat-every": c.HeartbeatEvery, "--nodegroups-every": c.NodeGroupsEvery, "--poll-every": c.PollEvery, "--long-poll-wait": c.LongPollWait} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if o.Output != "markdown" && o.Output != "json" {
		errs = append(errs, fmt.Errorf("--output %q: want markdown or json", o.Output))
	}
	if c.Viewers < 0 {
		errs = append(errs, fmt.Errorf("--viewers must be >= 0, got %d", c.Viewers))
	}
	errs = append(errs, o.brokerErrors()...)
	return errors.Join(errs...)
}

// brokerErrors checks the choice of broker: --start-broker, or the address
// and CA of a running one.
func (o *Options) brokerErrors() []error {
	var errs []error
	c := &o.Config
	if o.StartBroker {
		if c.BrokerURL != "" || o.PKIDir != "" || c.BrokerPID != 0 {
			errs = append(errs, errors.New("--start-broker starts its own broker: drop --broker-url, --pki-dir and --broker-pid"))
		}
		if o.NoDashboard && c.Viewers > 0 {
			errs = append(errs, errors.New("--viewers need the dashboard: drop --no-dashboard"))
		}
		return errs
	}
	if c.BrokerURL == "" || o.PKIDir == "" {
		errs = append(errs, errors.New("give --start-broker, or --broker-url and --pki-dir (the directory with the federation's ca.crt and ca.key) of a running broker"))
	}
	if c.Viewers > 0 && c.DashboardURL == "" {
		errs = append(errs, errors.New("--viewers needs --dashboard-url"))
	}
	return errs
}

// Run runs the load and writes the report to out.
func Run(ctx context.Context, o Options, out io.Writer, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg := o.Config
	cfg.Instructions = loadgen.InstructionMode(o.Instructions)
	cfg.Log = log
	if o.StartBroker {
		b, err := startBroker(ctx, o, log)
		if err != nil {
			return err
		}
		defer b.stop(log, o.KeepDir)
		cfg.BrokerURL, cfg.DashboardURL, cfg.BrokerPID, cfg.CA = b.apiURL, b.dashURL, b.cmd.Process.Pid, b.ca
		if b.dashURL != "" {
			cfg.MetricsURL = b.dashURL + "/metrics"
		}
	} else {
		ca, err := pki.LoadCA(o.PKIDir)
		if err != nil {
			return fmt.Errorf("--pki-dir: %w", err)
		}
		cfg.CA = ca
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteMarkdown(out)
}

// broker is a broker child process.
type broker struct {
	cmd             *exec.Cmd
	dir, logPath    string
	apiURL, dashURL string
	ca              *pki.CA
	exited          chan error
}

// freePort returns a loopback port nobody listens on right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startBroker starts `<this binary> broker` with a fresh PKI and database
// and waits until it is ready.
func startBroker(ctx context.Context, o Options, log *slog.Logger) (*broker, error) {
	self := o.BrokerBinary
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("--start-broker: finding this binary: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "fa-loadgen-")
	if err != nil {
		return nil, err
	}
	b := &broker{dir: dir, logPath: filepath.Join(dir, "broker.log")}
	fail := func(err error) (*broker, error) {
		if b.cmd != nil && b.cmd.Process != nil {
			_ = b.cmd.Process.Kill()
			log.Debug("Broker killed", "exit", <-b.exited)
		}
		return nil, fmt.Errorf("%w (broker log: %s)", err, b.logPath)
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := pki.Init(pkiDir, []string{"127.0.0.1"}, false, time.Now()); err != nil {
		return fail(err)
	}
	if b.ca, err = pki.LoadCA(pkiDir); err != nil {
		return fail(err)
	}
	// The broker is told ports picked here (it reports its addresses only
	// in its log, whose level is the user's choice): a port picked and let
	// go can be taken by another process before the broker binds it, and
	// then the broker is started again on new ports, at most three times.
	for attempt := 1; ; attempt++ {
		err := b.launch(ctx, o, self, pkiDir, log)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return fail(err)
		}
		log.Warn("A port picked for the broker was taken before it bound it; starting it on new ports", "err", err)
	}
}

// errExited: the broker exited before it was ready.
var errExited = errors.New("the broker exited before it was ready")

// errPortTaken: the broker exited because a port picked for it was taken.
var errPortTaken = errors.New("a port picked for the broker was taken before it bound it")

// launch starts the broker on newly picked loopback ports and waits until
// it is ready.
func (b *broker) launch(ctx context.Context, o Options, self, pkiDir string, log *slog.Logger) error {
	pick := o.pickPort
	if pick == nil {
		pick = freePort
	}
	apiAddr, err := pick()
	if err != nil {
		return err
	}
	dashAddr := ""
	if !o.NoDashboard {
		if dashAddr, err = pick(); err != nil {
			return err
		}
	}
	args := brokerArgs(o, pkiDir, filepath.Join(b.dir, "data"), apiAddr, dashAddr, log)
	logf, err := os.Create(b.logPath)
	if err != nil {
		return err
	}
	b.cmd = exec.Command(self, args...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.Env = filteredEnv()
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		b.cmd = nil
		return fmt.Errorf("starting the broker: %w", err)
	}
	exited := make(chan error, 1)
	b.exited = exited
	go func() { exited <- b.cmd.Wait(); logf.Close() }()
	b.apiURL, b.dashURL = "https://"+apiAddr, ""
	if dashAddr != "" {
		b.dashURL = "http://" + dashAddr
	}
	log.Info("Broker started", "pid", b.cmd.Process.Pid, "api", b.apiURL, "dashboard", b.dashURL, "dir", b.dir)
	if err := b.waitReady(ctx, apiAddr, dashAddr); err != nil {
		if logText, rerr := os.ReadFile(b.logPath); errors.Is(err, errExited) && rerr == nil && bytes.Contains(logText, []byte("address already in use")) {
			b.cmd = nil // exited
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return err
	}
	return nil
}

// generatorGOGC is the generator's GC percentage (the runtime's default
// is 100).
const generatorGOGC = 400

// brokerArgs are the started broker's flags: its PKI, database and
// listeners ("" dashAddr: none), connection caps that admit every simulated
// agent (all connect from 127.0.0.1) within the descriptor limit, then
// --broker-arg.
func brokerArgs(o Options, pkiDir, dataDir, apiAddr, dashAddr string, log *slog.Logger) []string {
	args := []string{"broker", "--pki-dir", pkiDir, "--data-dir", dataDir, "--listen", apiAddr,
		"--log-level", o.BrokerLogLevel, "--dashboard-listen", dashAddr}
	conns := (o.Config.Providers+o.Config.Consumers)*loadgen.ConnectionsPerAgent(loadgen.InstructionMode(o.Instructions)) + 64
	listeners := 2
	if dashAddr == "" {
		listeners = 1
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		// The broker raises its soft limit to the hard one; its connection
		// caps must leave it 64 descriptors.
		if most := (int(lim.Max) - 64) / listeners; conns > most {
			log.Warn("The simulated agents need more connections than the broker's descriptor limit allows; capping (expect refused connections)",
				"needed", conns, "cap", most, "ulimitHard", lim.Max)
			conns = most
		}
	}
	args = append(args, "--max-conns", strconv.Itoa(conns), "--max-conns-per-ip", strconv.Itoa(conns))
	return append(args, o.BrokerArgs...)
}

// filteredEnv drops FA_* variables: the started broker is configured by
// its flags only.
func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) >= len(cli.EnvPrefix) && kv[:len(cli.EnvPrefix)] == cli.EnvPrefix {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls /readyz (or the API port without a dashboard) for 60 s.
func (b *broker) waitReady(ctx context.Context, apiAddr, dashAddr string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-b.exited:
			b.exited <- err
			return fmt.Errorf("%w: %v", errExited, err)
		default:
		}
		if dashAddr != "" {
			if resp, err := http.Get("http://" + dashAddr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		} else if c, err := net.DialTimeout("tcp", apiAddr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the broker was not ready within 60s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends the broker with SIGTERM (SIGKILL after 30 s) and removes its
// directory unless keep is set.
func (b *broker) stop(log *slog.Logger, keep bool) {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.exited:
		log.Debug("Broker stopped", "exit", err)
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		log.Warn("Broker did not stop within 30s of SIGTERM; killed it", "exit", <-b.exited)
	}
	if keep {
		log.Info("Kept the broker's directory", "dir", b.dir, "log", b.logPath)
		return
	}
	_ = os.RemoveAll(b.dir)
}
