package localapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:9090", "ftp://x", "http://", "://bad"} {
		if _, err := localapi.NewClient(u, nil); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
	if _, err := localapi.NewClient("http://127.0.0.1:9090/", nil); err != nil {
		t.Fatal(err)
	}
}

func TestClientRoutesAndErrors(t *testing.T) {
	var gotHeader, gotPath string
	var gotBody api.ReservationRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /base/local/reservations", func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get(api.HeaderReservationID)
		_ = json.NewDecoder(r.Body).Decode(&gotBody)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.ReservationResponse{ReservationID: gotHeader, Status: api.PhasePending, ChunkCount: 1})
	})
	mux.HandleFunc("DELETE /base/local/reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.PathValue("id")
		if gotPath == "res-gone" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Code: api.CodeNotFound, Message: "reservation res-gone not found"})
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(api.ReleaseResponse{ReservationID: gotPath, Status: api.PhaseUnpeering})
	})
	mux.HandleFunc("GET /base/local/nodegroups", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway) // plain text, not an ErrorResponse
	})
	mux.HandleFunc("GET /base/local/virtual-nodes", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"virtualNodes":[{"name":"rs-res-1","reservationId":"res-1","phase":"Running","providerID":"liqo://p1/res-1","allocatable":{"cpu":"2"}}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := localapi.NewClient(srv.URL+"/base", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	res, err := c.Reserve(ctx, "res-1", api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkStandard})
	if err != nil || res.ReservationID != "res-1" || gotHeader != "res-1" || gotBody.ProviderClusterID != "p1" {
		t.Fatalf("Reserve = %+v, %v (header %q, body %+v)", res, err, gotHeader, gotBody)
	}
	if rel, err := c.Release(ctx, "res-1"); err != nil || rel.Status != api.PhaseUnpeering {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	_, err = c.Release(ctx, "res-gone")
	var le *localapi.Error
	if !errors.As(err, &le) || le.Status != 404 || le.Code != api.CodeNotFound || localapi.StatusOf(err) != 404 {
		t.Fatalf("Release of a missing reservation: %v", err)
	}
	_, err = c.NodeGroups(ctx)
	if localapi.StatusOf(err) != 502 || !strings.Contains(err.Error(), "upstream exploded") {
		t.Fatalf("plain-text error: %v", err)
	}
	vns, err := c.VirtualNodes(ctx)
	if err != nil || len(vns) != 1 || vns[0].Phase != localapi.PhaseRunning || vns[0].ProviderID != "liqo://p1/res-1" {
		t.Fatalf("VirtualNodes = %+v, %v", vns, err)
	}
	// A transport failure is not an HTTP status.
	srv.Close()
	_, err = c.VirtualNodes(ctx)
	if err == nil || localapi.StatusOf(err) != 0 {
		t.Fatalf("transport failure: %v", err)
	}
}

// TestIDsAreEscapedOnce: an id travels escaped exactly once (it used to be
// escaped twice by the client, and again by the agent on its way to the
// broker) and the server reads it back unchanged.
func TestIDsAreEscapedOnce(t *testing.T) {
	var rawPath, id string
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /base/local/reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		rawPath, id = r.URL.EscapedPath(), r.PathValue("id")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(api.ReleaseResponse{ReservationID: id, Status: api.PhaseUnpeering})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := localapi.NewClient(srv.URL+"/base", nil)
	if err != nil {
		t.Fatal(err)
	}
	for in, wire := range map[string]string{
		"res-1":      "/base/local/reservations/res-1",
		"a b%":       "/base/local/reservations/a%20b%25",
		"../x":       "/base/local/reservations/..%2Fx",
		"res-%2Fone": "/base/local/reservations/res-%252Fone",
	} {
		if _, err := c.Release(context.Background(), in); err != nil {
			t.Fatalf("Release(%q): %v", in, err)
		}
		if rawPath != wire || id != in {
			t.Errorf("Release(%q): wire path %q read as %q, want %q read as %q", in, rawPath, id, wire, in)
		}
	}
}
