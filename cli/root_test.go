package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
)

// TestWithLogger: a command's RunE gets the logger its --log-level and
// --log-format select (on the command's stderr); a bad value is the
// command's error and the command does not run.
func TestWithLogger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "": runs
		wantLog string // what the run's log line looks like
	}{
		{"defaults: text at info", nil, "", `level=INFO msg=ran`},
		{"json", []string{"--log-format", "json"}, "", `"msg":"ran"`},
		{"debug shows debug lines", []string{"--log-level", "debug"}, "", `level=DEBUG msg=detail`},
		{"bad level", []string{"--log-level", "loud"}, `--log-level "loud": use debug, info, warn or error`, ""},
		{"bad format", []string{"--log-format", "xml"}, `--log-format "xml": use text or json`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			sub := &cobra.Command{Use: "sub", Args: cobra.NoArgs, RunE: cli.WithLogger(func(cmd *cobra.Command, log *slog.Logger) error {
				ran = true
				log.Info("ran")
				log.Debug("detail")
				return nil
			})}
			root := cli.NewRoot(sub)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append([]string{"sub"}, tc.args...))
			err := root.ExecuteContext(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			case ran != (tc.wantErr == ""):
				t.Fatalf("ran = %v with error %v", ran, err)
			case tc.wantLog != "" && !strings.Contains(out.String(), tc.wantLog):
				t.Fatalf("log %q lacks %q", out.String(), tc.wantLog)
			}
		})
	}
}
