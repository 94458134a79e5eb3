package choice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Limits on a model's answer (docs/placement.md, "Choice").
const (
	// MaxAnswerBytes bounds the model's answer (the HTTP body and the JSON
	// text inside it); a longer answer is invalid and nothing of it is used.
	MaxAnswerBytes = 64 << 10
	// MaxRankingEntries bounds the ranking's length; a longer ranking is
	// invalid.
	MaxRankingEntries = 256
	// MaxReasonRunes bounds the model's reason as kept and shown; a longer
	// reason is cut (the ranking is still used).
	MaxReasonRunes = 500
)

// Answer is a model's answer, parsed: the provider ids it ranks, best
// first, and its own account of why (never proof of anything).
type Answer struct {
	Ranking []string `json:"ranking"`
	Reason  string   `json:"reason,omitempty"`
}

// ErrInvalidAnswer wraps every reason an answer is refused.
var ErrInvalidAnswer = errors.New("invalid model answer")

// ParseAnswer parses a model's answer as untrusted input. It must be
// exactly one JSON object {"ranking": [ids...], "reason": "..."} with
// nothing around it but white space (no prose, no code fences), no other
// keys, at most MaxAnswerBytes, a ranking of 1 to MaxRankingEntries
// strings. Which ids are acceptable is Validate's business. The reason is
// cut to MaxReasonRunes and stripped of control characters.
func ParseAnswer(text string) (Answer, error) {
	var a Answer
	if len(text) > MaxAnswerBytes {
		return a, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidAnswer, len(text), MaxAnswerBytes)
	}
	if !utf8.ValidString(text) {
		return a, fmt.Errorf("%w: not valid UTF-8", ErrInvalidAnswer)
	}
	trimmed := strings.TrimSpace(text)
	if !strings.HasPrefix(trimmed, "{") {
		return a, fmt.Errorf("%w: not a JSON object (it starts with %q); the answer must be the object alone", ErrInvalidAnswer, head(trimmed))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var raw struct {
		Ranking *[]string `json:"ranking"`
		Reason  *string   `json:"reason"`
	}
	if err := dec.Decode(&raw); err != nil {
		return a, fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return a, fmt.Errorf("%w: text after the JSON object; the answer must be the object alone", ErrInvalidAnswer)
	}
	switch {
	case raw.Ranking == nil:
		return a, fmt.Errorf("%w: no \"ranking\" list", ErrInvalidAnswer)
	case len(*raw.Ranking) == 0:
		return a, fmt.Errorf("%w: the ranking is empty", ErrInvalidAnswer)
	case len(*raw.Ranking) > MaxRankingEntries:
		return a, fmt.Errorf("%w: the ranking has %d entries, at most %d", ErrInvalidAnswer, len(*raw.Ranking), MaxRankingEntries)
	}
	a.Ranking = *raw.Ranking
	if raw.Reason != nil {
		a.Reason = cleanReason(*raw.Reason)
	}
	return a, nil
}

// head is the first few characters of s, for an error message.
func head(s string) string {
	const n = 24
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// cleanReason keeps at most MaxReasonRunes runes of s, control characters
// replaced by spaces.
func cleanReason(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == MaxReasonRunes {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// Rejection is a ranking entry that was not used, and why.
type Rejection struct {
	Entry  string `json:"entry"`
	Reason string `json:"reason"`
}

// Rejection reasons.
const (
	RejectUnknown   = "not in the broker's list"
	RejectDuplicate = "named twice"
	RejectNoRoom    = "no room for this chunk type"
)

// Validate keeps the entries of a ranking that name a listed provider, in
// the model's order, each once; the others are returned as rejections.
// listed is the set of provider ids the broker's view lists for this
// consumer: nothing outside it can ever be chosen.
func Validate(ranking []string, listed map[string]bool) (valid []string, rejected []Rejection) {
	seen := map[string]bool{}
	for _, id := range ranking {
		switch {
		case !listed[id]:
			rejected = append(rejected, Rejection{Entry: showEntry(id), Reason: RejectUnknown})
		case seen[id]:
			rejected = append(rejected, Rejection{Entry: id, Reason: RejectDuplicate})
		default:
			seen[id] = true
			valid = append(valid, id)
		}
	}
	return valid, rejected
}

// showEntry is an untrusted entry as it may be shown: at most 64 runes,
// control characters escaped.
func showEntry(s string) string {
	var b bytes.Buffer
	n := 0
	for _, r := range s {
		if n == 64 {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
		} else {
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}
