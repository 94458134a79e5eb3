package consumer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestLocalAPIRefusesWhatTheBrokerWould: the local API checks a reservation
// with the broker's rules (api.ReservationRequest.Validate) and answers 400
// naming the field before anything is sent to the broker.
func TestLocalAPIRefusesWhatTheBrokerWould(t *testing.T) {
	ns := make([]string, api.MaxNamespaces+1)
	for i := range ns {
		ns[i] = "default"
	}
	many, _ := json.Marshal(ns)
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		field                    string
	}{
		{name: "provider ../p1", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"../p1","chunkCount":1,"chunkType":"standard"}`, field: "providerClusterId"},
		{name: "too many namespaces", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p1","chunkCount":1,"chunkType":"standard","namespaces":` + string(many) + `}`, field: "namespaces"},
		{name: "namespace with NUL", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p1","chunkCount":1,"chunkType":"standard","namespaces":["a\u0000b"]}`, field: "namespaces[0]"},
		{name: "chunk type", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p1","chunkCount":1,"chunkType":"tpu"}`, field: "chunkType"},
		{name: "two chunks", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p1","chunkCount":2,"chunkType":"standard"}`, field: "chunkCount"},
		{name: "reservation id", method: "POST", path: "/local/reservations", body: `{"providerClusterId":"p1","chunkCount":1,"chunkType":"standard"}`,
			hdr: map[string]string{api.HeaderReservationID: "Res_1"}, field: api.HeaderReservationID},
		{name: "not JSON", method: "POST", path: "/local/reservations", body: `{"providerClusterId":`},
		{name: "release of ../x", method: "DELETE", path: "/local/reservations/..%2Fx", field: "reservation id"},
		{name: "release of an upper-case id", method: "DELETE", path: "/local/reservations/RES", field: "reservation id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &stubBroker{reserveStatus: []int{201}}
			rec := do(t, newTestAgent(t, b).LocalAPI(), tc.method, tc.path, tc.body, tc.hdr)
			if rec.Code != 400 {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			var e api.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != api.CodeInvalidRequest {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if tc.field != "" && (e.Details["field"] != tc.field || !strings.HasPrefix(e.Message, tc.field+" = ")) {
				t.Errorf("error %+v does not name the field %q", e, tc.field)
			}
			if len(b.reserveIDs) != 0 {
				t.Errorf("the broker was called: %v", b.reserveIDs)
			}
		})
	}
}
