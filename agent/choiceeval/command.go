package choiceeval

import (
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
)

// MaxRuns bounds --runs.
const MaxRuns = 100

// NewCommand returns the `choice-eval` subcommand.
func NewCommand() *cobra.Command {
	ep := choice.Endpoint{API: choice.APIOllama}
	runs := 1
	cmd := &cobra.Command{
		Use:   "choice-eval",
		Short: "Evaluate a model endpoint as the Choice policy's ranker on four intent scenarios",
		Long: `Ask a model endpoint to rank a nine-provider catalogue (Milan, Zurich, Paris,
Frankfurt, Vienna, London, Helsinki, Mumbai, Montreal) for four intents, through
the broker's own Choice view and the consumer agent's selector (the same prompt,
validation and fallback), and report how often the model's pick meets each
scenario's measurable criterion. A pick made by the fallback (the model's answer
was unusable) counts as a failure. See docs/placement.md.`,
		Example: `  federation-autoscaler choice-eval --model-url http://127.0.0.1:11434 --model-name llama3.2:3b --runs 5
  federation-autoscaler choice-eval --model-api OpenAI --model-url http://127.0.0.1:8080 --model-name qwen2.5-3b-instruct`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 || runs > MaxRuns {
				return fmt.Errorf("--runs %d: use 1 to %d", runs, MaxRuns)
			}
			rep, err := Run(cmd.Context(), ep, &http.Client{}, runs)
			if err != nil {
				return err
			}
			return Print(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVar((*string)(&ep.API), "model-api", string(choice.APIOllama), "Ollama (POST /api/generate) or OpenAI (POST /v1/chat/completions)")
	f.StringVar(&ep.URL, "model-url", "", "base URL of the model endpoint (required)")
	f.StringVar(&ep.Model, "model-name", "llama3.2:3b", "model to ask")
	f.DurationVar(&ep.Timeout, "model-timeout", choice.DefaultTimeout, "longest wait for one answer (a slower answer is a failure)")
	f.IntVar(&runs, "runs", 1, fmt.Sprintf("runs per scenario (1 to %d)", MaxRuns))
	return cmd
}

// Print writes the report: every run, then the pass rates.
func Print(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Model: %s\n\n", rep.Model)
	fmt.Fprintln(tw, "SCENARIO\tPICK\tBY\tPASS\tLATENCY\tNOTE")
	for _, o := range rep.Outcomes {
		by, note := "model", o.Reason
		if !o.ByModel {
			by, note = "fallback", o.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%.2fs\t%s\n", o.Scenario, o.Pick, by, o.Pass, o.Latency, note)
	}
	fmt.Fprintln(tw, "\nSCENARIO\tPASSED\tRUNS\tRATE\tFALLBACKS")
	for _, r := range rep.Rates() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f%%\t%d\n", r.Name, r.Passed, r.Run, 100*float64(r.Passed)/float64(max(r.Run, 1)), r.Fallback)
	}
	return tw.Flush()
}
