package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// ConsoleDecisionRows is how many Choice decisions the consumer console
// shows (the agent keeps --choice-audit-size).
const ConsoleDecisionRows = 20

// postIntent sets (or clears) the consumer's intent.
func (cc *ConsumerConsole) postIntent(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	intent := strings.TrimSpace(strings.ReplaceAll(formValue(c, "intent"), "\r\n", "\n"))
	form := views.IntentForm{Value: intent, Max: choice.MaxIntentLength}
	if err := choice.CheckIntent(intent); err != nil {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{intent: &form, errs: views.FieldErrors{"intent": "Intent: " + err.Error()}}, "")
	}
	if err := cc.intents.SetIntent(c.UserContext(), intent); err != nil {
		return cc.render(c, backendStatus(err), consumerForms{intent: &form, bad: "Intent not saved: " + err.Error()}, "")
	}
	return c.Redirect(cc.site.path("/?ok=intent"), fiber.StatusSeeOther)
}

// choicePanel is the decisions panel: shown under the Choice policy and
// whenever the selector has decided something.
func choicePanel(now time.Time, st ConsumerStatus) *views.ChoicePanel {
	if st.AppliedPlacement != api.PlacementChoice && len(st.Decisions) == 0 {
		return nil
	}
	p := &views.ChoicePanel{Intent: st.Intent, Current: dash, Source: "no decision yet", SourceClass: "warn"}
	if len(st.Decisions) > 0 {
		d := st.Decisions[0]
		p.Current = picksLabel(d.Picks)
		p.Source, p.SourceClass = decisionSource(d)
		if d.Fallback {
			p.Why = d.Why
		} else {
			p.Account = d.Reason
		}
	}
	for i, d := range st.Decisions {
		if i == ConsoleDecisionRows {
			break
		}
		r := views.DecisionRow{At: ago(now, d.At), Picks: picksLabel(d.Picks), Latency: dash, Model: d.Model,
			Prompt: d.Prompt, Raw: d.RawAnswer, Ranking: strings.Join(d.Ranking, ", "), Rejected: strings.Join(d.Rejected, "; ")}
		r.Source, r.SourceClass = decisionSource(d)
		switch {
		case d.Fallback:
			r.Note = d.Why
		case d.Cached:
			r.Note = "from the cached answer (room changed)"
		case d.Reason != "":
			r.Note = "model's account: " + d.Reason
		}
		if d.Latency > 0 {
			r.Latency = fmt.Sprintf("%.0f ms", float64(d.Latency)/float64(time.Millisecond))
		}
		p.Rows = append(p.Rows, r)
	}
	return p
}

// decisionSource labels who chose: the model, the fallback, or both (the
// model for some chunk types, the fallback order where its ranking had no
// room).
func decisionSource(d ChoiceDecision) (label, class string) {
	if d.Fallback {
		return "fallback", "warn"
	}
	for _, p := range d.Picks {
		if !p.ByModel {
			return "model, partly fallback", "warn"
		}
	}
	return "model", "ok"
}

func picksLabel(ps []ChoicePick) string {
	if len(ps) == 0 {
		return dash
	}
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, p.Provider+" ("+string(p.ChunkType)+")")
	}
	return strings.Join(parts, ", ")
}
