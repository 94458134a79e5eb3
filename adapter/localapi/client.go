// Package localapi is the adapter's client of the consumer agent's local API
// (reference §7.1): the policy-masked node-group view, reservations and the
// projected virtual nodes. The agent listens on loopback without
// authentication; every call is plain HTTP/JSON, bodies sent as
// application/json with the dialled address as Host, which is what the
// agent's guard against web pages requires (docs/agents.md).
package localapi

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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Routes of the local API.
const (
	PathNodeGroups   = "/local/nodegroups"
	PathReservations = "/local/reservations"
	PathVirtualNodes = "/local/virtual-nodes"
)

// Phase is a VirtualNodeState phase.
type Phase string

// VirtualNodeState phases (reference §8.1).
const (
	PhaseCreating Phase = "Creating"
	PhaseRunning  Phase = "Running"
	PhaseDeleting Phase = "Deleting"
	PhaseFailed   Phase = "Failed"
)

// VirtualNode is one entry of GET /local/virtual-nodes: a VirtualNodeState
// projected for the adapter (reference §7.1).
type VirtualNode struct {
	// Name is the real node name, or the VirtualNodeState name until the
	// node exists.
	Name                  string              `json:"name"`
	VirtualNodeName       string              `json:"virtualNodeName,omitempty"`
	ProviderID            string              `json:"providerID,omitempty"`
	ReservationID         string              `json:"reservationId"`
	NodeGroupID           string              `json:"nodeGroupId,omitempty"`
	ProviderClusterID     string              `json:"providerClusterId,omitempty"`
	ProviderLiqoClusterID string              `json:"providerLiqoClusterId,omitempty"`
	Phase                 Phase               `json:"phase,omitempty"`
	Allocatable           corev1.ResourceList `json:"allocatable,omitempty"`
	LastTransitionTime    *metav1.Time        `json:"lastTransitionTime,omitempty"`
	// Message is the last transition text, when the agent sends it.
	Message string `json:"message,omitempty"`
}

// VirtualNodeList is the body of GET /local/virtual-nodes.
type VirtualNodeList struct {
	VirtualNodes []VirtualNode `json:"virtualNodes"`
}

// Error is an HTTP error answered by the local API; Status is the HTTP
// status (the broker's status, passed through by the agent), Code and
// Message come from its api.ErrorResponse body.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("consumer agent answered HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("consumer agent answered HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// StatusOf returns the HTTP status of the *Error in err's chain, or 0 when
// err is not an HTTP answer (transport failure, timeout).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// maxBody caps what is read from one answer; a view of thousands of groups
// is far below it.
const maxBody = 16 << 20

// Client calls one consumer agent's local API. It is safe for concurrent use.
type Client struct {
	base *url.URL
	hc   *http.Client
}

// NewClient returns a client for the agent at baseURL (e.g.
// http://127.0.0.1:9090). hc may be nil: a client with a 5 s timeout and
// enough idle loopback connections for IncreaseSize fan-outs is used.
func NewClient(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing agent URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("agent URL %q: want http://host:port", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// IncreaseSize fans out up to a few dozen reservations at once;
		// keep those connections for the next loop.
		tr.MaxIdleConnsPerHost = 64
		tr.Proxy = nil // the agent is on loopback; never go through a proxy
		hc = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	return &Client{base: u, hc: hc}, nil
}

// NodeGroups returns the consumer's policy-masked node-group view.
func (c *Client) NodeGroups(ctx context.Context) (*api.NodeGroupListResponse, error) {
	var out api.NodeGroupListResponse
	if err := c.do(ctx, http.MethodGet, PathNodeGroups, nil, nil, &out); err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	return &out, nil
}

// Reserve creates (or replays) the one-chunk reservation id.
func (c *Client) Reserve(ctx context.Context, id string, req api.ReservationRequest) (*api.ReservationResponse, error) {
	var out api.ReservationResponse
	h := http.Header{api.HeaderReservationID: []string{id}}
	if err := c.do(ctx, http.MethodPost, PathReservations, h, req, &out); err != nil {
		return nil, fmt.Errorf("reserving %s on %s: %w", id, req.ProviderClusterID, err)
	}
	return &out, nil
}

// Release releases reservation id.
func (c *Client) Release(ctx context.Context, id string) (*api.ReleaseResponse, error) {
	var out api.ReleaseResponse
	if err := c.do(ctx, http.MethodDelete, PathReservations+"/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("releasing %s: %w", id, err)
	}
	return &out, nil
}

// VirtualNodes lists the consumer's VirtualNodeStates.
func (c *Client) VirtualNodes(ctx context.Context) ([]VirtualNode, error) {
	var out VirtualNodeList
	if err := c.do(ctx, http.MethodGet, PathVirtualNodes, nil, nil, &out); err != nil {
		return nil, fmt.Errorf("listing virtual nodes: %w", err)
	}
	return out.VirtualNodes, nil
}

func (c *Client) do(ctx context.Context, method, path string, h http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	// path is escaped already (ids go through url.PathEscape): keep it as
	// the raw path so that it is escaped exactly once on the wire.
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return fmt.Errorf("building %s %s: %w", method, path, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("reading %s %s answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{Status: resp.StatusCode}
		var er api.ErrorResponse
		if json.Unmarshal(raw, &er) == nil && er.Code != "" {
			e.Code, e.Message = er.Code, er.Message
		} else {
			e.Message = strings.TrimSpace(string(raw))
			if len(e.Message) > 200 {
				e.Message = e.Message[:200] + "…"
			}
		}
		return e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding %s %s answer: %w", method, path, err)
	}
	return nil
}
