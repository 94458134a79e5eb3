package agentcmd

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// consoleVerifier returns the console's login verifier. A token file (for
// example a mounted Secret) wins; otherwise a token is generated on first
// start, written once to out, and only its hash is kept in the store file.
func consoleVerifier(o Options, role api.Role, out io.Writer) (auth.Verifier, error) {
	if o.ConsoleTokenFile != "" {
		v, err := auth.TokenFromFile(o.ConsoleTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--console-token-file: %w", err)
		}
		return v, nil
	}
	path := o.ConsoleTokenStore
	if path == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			dir = os.TempDir()
		}
		path = filepath.Join(dir, "federation-autoscaler", string(role)+"-console-token")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("console token store %s: %w (set --console-token-store or --console-token-file)", path, err)
	}
	ts, fresh, err := auth.OpenTokenStore(path, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("console token store %s: %w (set --console-token-store or --console-token-file)", path, err)
	}
	if fresh != "" {
		// Printed once, never logged: only its hash is stored.
		fmt.Fprintf(out, "\nConsole login token (shown once; its hash is kept in %s):\n  %s\n\n", path, fresh)
	}
	return ts, nil
}
