package liqo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"
)

// Timeouts of the liqoctl commands (reference §9.2).
const (
	DefaultGenerateTimeout          = 60 * time.Second
	DefaultDeletePeeringUserTimeout = 30 * time.Second
	DefaultPeerTimeout              = 10 * time.Minute
	DefaultUnpeerTimeout            = 60 * time.Second
)

// maxStderr bounds how much of liqoctl's output an error carries.
const maxStderr = 2048

// LiqoctlOptions configures a Liqoctl driver. Zero values take the defaults.
type LiqoctlOptions struct {
	// Path is the liqoctl binary ("liqoctl", looked up in PATH, by default).
	Path string
	// Kubeconfig is passed as --kubeconfig (the local cluster); empty lets
	// liqoctl use $KUBECONFIG or the in-cluster configuration.
	Kubeconfig string
	// TempDir holds the short-lived remote kubeconfig files (os.TempDir()
	// by default).
	TempDir string
	// Timeouts per command; zero means the Default…Timeout constant.
	GenerateTimeout, DeletePeeringUserTimeout, PeerTimeout, UnpeerTimeout time.Duration
	// Client, when set, is used by Unpeer to delete the provider's
	// ForeignCluster after liqoctl unpeer (as the reference does); it needs
	// list and delete on foreignclusters.core.liqo.io.
	Client client.Client
	// Logger receives one line per command (never the kubeconfig).
	Logger *slog.Logger
}

// Liqoctl implements Driver by running the liqoctl CLI.
type Liqoctl struct {
	opts LiqoctlOptions
	log  *slog.Logger
}

var _ Driver = (*Liqoctl)(nil)

// NewLiqoctl returns a Driver that runs liqoctl with opts.
func NewLiqoctl(opts LiqoctlOptions) *Liqoctl {
	if opts.Path == "" {
		opts.Path = "liqoctl"
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.GenerateTimeout, DefaultGenerateTimeout},
		{&opts.DeletePeeringUserTimeout, DefaultDeletePeeringUserTimeout},
		{&opts.PeerTimeout, DefaultPeerTimeout},
		{&opts.UnpeerTimeout, DefaultUnpeerTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Liqoctl{opts: opts, log: log.With("component", "liqoctl")}
}

// GeneratePeeringUser runs `liqoctl generate peering-user
// --consumer-cluster-id <consumerLiqoClusterID>` and returns its trimmed
// standard output, which must be a kubeconfig. liqoctl v1.1.2 refuses a
// second generate while anything of an earlier user is left (its CSR
// liqo-peer-user-<id> or its RoleBindings: `… already exists`), which is
// what a retry after a lost answer, an agent restart mid-call or a failed
// delete finds; the driver then deletes that user (DeletePeeringUser) and
// generates once more, so a call converges from any partial state. The
// earlier credential stops working: its answer never reached the broker.
func (l *Liqoctl) GeneratePeeringUser(ctx context.Context, consumerLiqoClusterID string) (string, error) {
	if err := CheckClusterID("consumer Liqo cluster id", consumerLiqoClusterID); err != nil {
		return "", err
	}
	generate := func() (string, error) {
		return l.run(ctx, l.opts.GenerateTimeout, "generate", "peering-user", "--consumer-cluster-id", consumerLiqoClusterID)
	}
	out, err := generate()
	if err != nil && outputSays(err, "already exists") {
		l.log.InfoContext(ctx, "A peering user of an earlier attempt is left; deleting it and generating a new one",
			"consumerLiqoClusterID", consumerLiqoClusterID, "err", err)
		if derr := l.DeletePeeringUser(ctx, consumerLiqoClusterID); derr != nil {
			return "", fmt.Errorf("generating the peering user for consumer %s: %w", consumerLiqoClusterID, errors.Join(err, derr))
		}
		out, err = generate()
	}
	if err != nil {
		return "", err
	}
	kc := strings.TrimSpace(out)
	if !strings.Contains(kc, "apiVersion") || !strings.Contains(kc, "clusters") {
		return "", fmt.Errorf("liqoctl generate peering-user for consumer %s printed no kubeconfig (%d bytes of output)", consumerLiqoClusterID, len(kc))
	}
	return kc, nil
}

// DeletePeeringUser runs `liqoctl delete peering-user --consumer-cluster-id
// <consumerLiqoClusterID>`. liqoctl deletes the user's RoleBindings and then
// its CSRs by label (DeleteAllOf: the provider role needs deletecollection on
// certificatesigningrequests); a user that is not there, or only partly,
// succeeds the same way, so no output is second-guessed.
func (l *Liqoctl) DeletePeeringUser(ctx context.Context, consumerLiqoClusterID string) error {
	if err := CheckClusterID("consumer Liqo cluster id", consumerLiqoClusterID); err != nil {
		return err
	}
	_, err := l.run(ctx, l.opts.DeletePeeringUserTimeout, "delete", "peering-user", "--consumer-cluster-id", consumerLiqoClusterID)
	return err
}

// Peer writes kubeconfig to a 0600 temporary file (removed afterwards) and
// runs `liqoctl peer --remote-kubeconfig <file> --gw-server-service-type
// NodePort --create-resource-slice=false`. liqoctl reconciles an existing
// peering, so repeating it is harmless.
func (l *Liqoctl) Peer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error {
	if err := CheckClusterID("provider Liqo cluster id", providerLiqoClusterID); err != nil {
		return err
	}
	return l.withKubeconfig(kubeconfig, providerLiqoClusterID, func(path string) error {
		_, err := l.run(ctx, l.opts.PeerTimeout, "peer",
			"--remote-kubeconfig", path,
			"--gw-server-service-type", "NodePort",
			"--create-resource-slice=false",
			"--timeout", liqoctlTimeout(l.opts.PeerTimeout).String())
		return err
	})
}

// Unpeer runs `liqoctl unpeer --remote-kubeconfig <file>`. That command reads
// the provider's cluster id through the credential first, so it cannot
// succeed once the provider revoked the credential, is gone, or the
// credential is lost; then Unpeer falls back to `liqoctl force unpeer <id>`
// (v1.1.2), which tears the peering down on this cluster alone (the provider
// cleans its side when it revokes the user). force unpeer reporting that no
// ForeignCluster of that id exists means the peering is already gone:
// success. Anything else (Liqo not installed here, the API refusing) is an
// error carrying both failures. Finally, when a Client is configured, the
// provider's ForeignCluster is deleted (DeleteForeignClusters).
func (l *Liqoctl) Unpeer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error {
	if err := CheckClusterID("provider Liqo cluster id", providerLiqoClusterID); err != nil {
		return err
	}
	err := l.withKubeconfig(kubeconfig, providerLiqoClusterID, func(path string) error {
		_, err := l.run(ctx, l.opts.UnpeerTimeout, "unpeer",
			"--remote-kubeconfig", path,
			"--timeout", liqoctlTimeout(l.opts.UnpeerTimeout).String())
		return err
	})
	if err != nil {
		l.log.WarnContext(ctx, "liqoctl unpeer failed; tearing the peering down locally with liqoctl force unpeer",
			"providerLiqoClusterID", providerLiqoClusterID, "err", err)
		_, ferr := l.run(ctx, l.opts.UnpeerTimeout, "force", "unpeer", providerLiqoClusterID)
		switch {
		case ferr == nil:
		case forceUnpeerFoundNothing(ferr, providerLiqoClusterID):
			l.log.InfoContext(ctx, "No ForeignCluster left: the peering is already gone", "providerLiqoClusterID", providerLiqoClusterID)
		default:
			return fmt.Errorf("unpeering from %s: %w", providerLiqoClusterID, errors.Join(err, ferr))
		}
	}
	if l.opts.Client == nil {
		return nil
	}
	return DeleteForeignClusters(ctx, l.opts.Client, providerLiqoClusterID)
}

// DeleteForeignClusters deletes the ForeignClusters of the given Liqo
// cluster id (by name, by label liqo.io/remote-cluster-id and by
// spec.clusterID). None is success. While an Identity or a VirtualNode of
// that cluster is still in its tenant namespace (being finalised), Liqo's
// controllers re-create a deleted ForeignCluster, empty; so nothing is
// deleted then and the error says to retry (Unpeer is retried until it
// succeeds). A cluster without the Identity kind (the simulated Liqo's
// CRDs) has none to wait for.
func DeleteForeignClusters(ctx context.Context, c client.Client, liqoClusterID string) error {
	tenant := TenantNamespace(liqoClusterID)
	var vns offloadingv1beta1.VirtualNodeList
	if err := c.List(ctx, &vns, client.InNamespace(tenant)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing the VirtualNodes of provider %s: %w", liqoClusterID, err)
	}
	var ids authv1beta1.IdentityList
	if err := c.List(ctx, &ids, client.InNamespace(tenant)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing the Identities of provider %s: %w", liqoClusterID, err)
	}
	if n, m := len(vns.Items), len(ids.Items); n+m > 0 {
		return fmt.Errorf("the ForeignCluster %s is kept for now: %d VirtualNode(s) and %d Identity(ies) of it are still in %s (Liqo would re-create a deleted ForeignCluster empty); retry once they are gone",
			liqoClusterID, n, m, tenant)
	}
	var list liqocorev1beta1.ForeignClusterList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing ForeignClusters to remove provider %s: %w", liqoClusterID, err)
	}
	sel := labels.SelectorFromSet(labels.Set{RemoteClusterIDLabel: liqoClusterID})
	for i := range list.Items {
		fc := &list.Items[i]
		if fc.Name != liqoClusterID && string(fc.Spec.ClusterID) != liqoClusterID && !sel.Matches(labels.Set(fc.Labels)) {
			continue
		}
		if err := c.Delete(ctx, fc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ForeignCluster %s: %w", fc.Name, err)
		}
	}
	return nil
}

func (l *Liqoctl) withKubeconfig(kubeconfig, provider string, fn func(path string) error) error {
	if strings.TrimSpace(kubeconfig) == "" {
		return fmt.Errorf("no kubeconfig for provider %s: liqoctl needs the provider's peering credential", provider)
	}
	f, err := os.CreateTemp(l.opts.TempDir, "fa-remote-kubeconfig-*")
	if err != nil {
		return fmt.Errorf("creating the temporary remote kubeconfig file: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	// CreateTemp already opens with 0600; Chmod guards against a umask-free
	// platform difference.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("restricting %s to 0600: %w", path, err)
	}
	if _, err := f.WriteString(kubeconfig); err != nil {
		f.Close()
		return fmt.Errorf("writing the temporary remote kubeconfig: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the temporary remote kubeconfig: %w", err)
	}
	return fn(path)
}

// CommandError is a failed liqoctl run: the subcommand, how it ended and
// its trimmed, redacted output.
type CommandError struct {
	Command  string // e.g. "liqoctl peer"
	Err      error  // exit status, timeout or start failure
	TimedOut bool
	Output   string // stderr (or stdout when stderr is empty), redacted, at most 2 KiB
}

func (e *CommandError) Error() string {
	msg := e.Command + " failed: " + e.Err.Error()
	if e.TimedOut {
		msg = e.Command + " timed out: " + e.Err.Error()
	}
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

func (l *Liqoctl) run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{}, args...)
	if l.opts.Kubeconfig != "" {
		full = append(full, "--kubeconfig", l.opts.Kubeconfig)
	}
	full = append(full, "--skip-confirm")
	name := "liqoctl " + args[0]
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		name += " " + args[1]
	}
	cmd := exec.CommandContext(ctx, l.opts.Path, full...)
	cmd.WaitDelay = 5 * time.Second // do not hang on children holding the pipes
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	l.log.InfoContext(ctx, "Ran liqoctl", "command", name, "duration", time.Since(start).Round(time.Millisecond), "ok", err == nil)
	if err == nil {
		return stdout.String(), nil
	}
	out := stderr.String()
	if strings.TrimSpace(out) == "" {
		out = stdout.String()
	}
	cerr := &CommandError{Command: name, Err: err, Output: sanitize(out)}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cerr.TimedOut = true
		cerr.Err = fmt.Errorf("after %s: %w", timeout, err)
	}
	return "", cerr
}

// liqoctlTimeout is the --timeout given to liqoctl: a little less than ours,
// so liqoctl reports its own timeout before it is killed.
func liqoctlTimeout(ours time.Duration) time.Duration {
	if ours > 10*time.Second {
		return ours - 5*time.Second
	}
	return ours
}

// forceUnpeerFoundNothing reports whether `liqoctl force unpeer id` failed
// because no ForeignCluster of id exists. liqoctl v1.1.2 prints it through
// its spinner unformatted: "Remote cluster with ID %s not found<id>"; both
// that and the formatted sentence match.
func forceUnpeerFoundNothing(err error, id string) bool {
	return outputSays(err, "remote cluster with ID") && outputSays(err, "not found") && outputSays(err, id)
}

// outputSays reports whether err is a liqoctl run that ended on its own
// (not our timeout) with output containing phrase (case-insensitive).
func outputSays(err error, phrase string) bool {
	var ce *CommandError
	if !errors.As(err, &ce) || ce.TimedOut {
		return false
	}
	return strings.Contains(strings.ToLower(ce.Output), strings.ToLower(phrase))
}

var (
	// secretPatterns match credential material liqoctl might echo: PEM
	// blocks, kubeconfig data fields, bearer tokens.
	pemBlock    = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]+-----.*?(-----END [A-Z ]+-----|$)`)
	secretField = regexp.MustCompile(`(?i)((?:client-key-data|client-certificate-data|certificate-authority-data|token|password)\s*[:=]\s*)\S+`)
	bearer      = regexp.MustCompile(`(?i)(bearer\s+)\S+`)
)

// sanitize redacts secrets from liqoctl output, trims it and caps its size.
func sanitize(s string) string {
	s = pemBlock.ReplaceAllString(s, "[redacted PEM]")
	s = secretField.ReplaceAllString(s, "${1}[redacted]")
	s = bearer.ReplaceAllString(s, "${1}[redacted]")
	s = strings.TrimSpace(s)
	if len(s) > maxStderr {
		s = s[:maxStderr] + "…"
	}
	return s
}
