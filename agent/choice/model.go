package choice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// API is the wire protocol of a model endpoint.
type API string

// Model APIs.
const (
	// APIOllama is Ollama's POST /api/generate with "format": "json".
	APIOllama API = "Ollama"
	// APIOpenAI is the OpenAI-compatible POST /v1/chat/completions
	// (llama.cpp server, vLLM, LM Studio) with a JSON response format.
	APIOpenAI API = "OpenAI"
)

// Defaults of an Endpoint.
const (
	DefaultTimeout = 20 * time.Second
	// MaxTimeout is the longest model timeout accepted.
	MaxTimeout = 2 * time.Minute
	// MaxURLLength bounds an endpoint URL.
	MaxURLLength = 2048
	// MaxModelNameLength bounds a model name.
	MaxModelNameLength = 256
)

// Endpoint is a model endpoint: the protocol, the base URL (for example
// http://127.0.0.1:11434 for Ollama, http://127.0.0.1:8080 for llama.cpp;
// the API's path is appended), the model name, the timeout of one call and
// an optional API key (sent as a Bearer token, never logged or shown).
type Endpoint struct {
	API     API
	URL     string
	Model   string
	Timeout time.Duration
	APIKey  string
}

// Configured reports whether a model endpoint is set at all (no URL: the
// agent uses the fallback without asking anything).
func (e Endpoint) Configured() bool { return e.URL != "" }

// Validate checks an endpoint: the API is Ollama or OpenAI, the URL an
// absolute http(s) URL of at most MaxURLLength bytes without user
// information (an API key belongs in a Secret), the model name set and at
// most MaxModelNameLength bytes, the timeout from 0 (the default) to
// MaxTimeout. An endpoint without a URL is valid (not configured).
func (e Endpoint) Validate() error {
	if !e.Configured() {
		return nil
	}
	switch e.API {
	case APIOllama, APIOpenAI:
	default:
		return fmt.Errorf("model API %q: use %q (POST /api/generate) or %q (POST /v1/chat/completions)", e.API, APIOllama, APIOpenAI)
	}
	if len(e.URL) > MaxURLLength {
		return fmt.Errorf("model URL is %d bytes long, at most %d", len(e.URL), MaxURLLength)
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("model URL %q: want an absolute http:// or https:// URL such as http://127.0.0.1:11434", e.URL)
	}
	if u.User != nil {
		return errors.New("model URL carries user information; put an API key in a Secret (apiKeySecretRef) instead")
	}
	switch {
	case e.Model == "":
		return errors.New("no model name: set the model (for example llama3.2:3b)")
	case len(e.Model) > MaxModelNameLength:
		return fmt.Errorf("model name is %d bytes long, at most %d", len(e.Model), MaxModelNameLength)
	case e.Timeout < 0 || e.Timeout > MaxTimeout:
		return fmt.Errorf("model timeout %s: want from 1s to %s (0 = %s)", e.Timeout, MaxTimeout, DefaultTimeout)
	}
	return nil
}

// timeout is the call's timeout.
func (e Endpoint) timeout() time.Duration {
	if e.Timeout <= 0 {
		return DefaultTimeout
	}
	return e.Timeout
}

// Doer sends HTTP requests (*http.Client).
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// systemPrompt is the instruction the OpenAI API sends as the system
// message (Ollama gets it at the top of the prompt).
const systemPrompt = "You rank infrastructure providers for a Kubernetes cluster. You answer with one JSON object and nothing else."

// ask sends prompt to the endpoint and returns the model's text (the JSON
// the model wrote, unparsed). Errors name what failed; none carries the API
// key.
func ask(ctx context.Context, hc Doer, e Endpoint, prompt string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	var (
		path string
		body any
	)
	switch e.API {
	case APIOllama:
		path = "/api/generate"
		body = map[string]any{
			"model": e.Model, "prompt": systemPrompt + "\n\n" + prompt, "format": "json", "stream": false,
			"options": map[string]any{"temperature": 0},
		}
	case APIOpenAI:
		path = "/v1/chat/completions"
		body = map[string]any{
			"model": e.Model, "temperature": 0, "stream": false,
			"response_format": map[string]string{"type": "json_object"},
			"messages": []map[string]string{
				{"role": "system", "content": systemPrompt},
				{"role": "user", "content": prompt},
			},
		}
	default:
		return "", fmt.Errorf("model API %q is not supported", e.API)
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("encoding the model request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.URL, "/")+path, bytes.NewReader(buf))
	if err != nil {
		return "", fmt.Errorf("building the model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w: no answer within %s", errTimeout, e.timeout())
		}
		return "", fmt.Errorf("calling the model at %s: %w", req.URL.Redacted(), stripURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w: no complete answer within %s", errTimeout, e.timeout())
		}
		return "", fmt.Errorf("reading the model's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the model endpoint answered %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), head(string(raw)))
	}
	if len(raw) > MaxAnswerBytes {
		return "", fmt.Errorf("%w: the response is over %d bytes", ErrInvalidAnswer, MaxAnswerBytes)
	}
	return modelText(e.API, raw)
}

// errTimeout marks a call that ran out of time.
var errTimeout = errors.New("model timed out")

// stripURL drops the URL a *url.Error repeats (it is already named).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// modelText extracts the model's text from the API's envelope.
func modelText(a API, raw []byte) (string, error) {
	switch a {
	case APIOllama:
		var r struct {
			Response *string `json:"response"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || r.Response == nil {
			return "", fmt.Errorf("%w: not an Ollama /api/generate response (no \"response\" text): %s", ErrInvalidAnswer, head(string(raw)))
		}
		return *r.Response, nil
	default:
		var r struct {
			Choices []struct {
				Message struct {
					Content *string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) == 0 || r.Choices[0].Message.Content == nil {
			return "", fmt.Errorf("%w: not a /v1/chat/completions response (no choices[0].message.content): %s", ErrInvalidAnswer, head(string(raw)))
		}
		return *r.Choices[0].Message.Content, nil
	}
}
