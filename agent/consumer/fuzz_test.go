package consumer

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
)

// FuzzDecodeLocalReservation: the local API's request decoding never
// panics; every refusal is 400 InvalidRequest; what it accepts is accepted
// by the broker's rules, carries a usable reservation id and survives a
// JSON round trip unchanged.
func FuzzDecodeLocalReservation(f *testing.F) {
	f.Add([]byte(`{"providerClusterId":"p1","chunkCount":1,"chunkType":"standard"}`), "res-1")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		id, req, err := decodeLocalReservation(bytes.NewReader(body), header, func() string { return "00000000-0000-4000-8000-000000000000" })
		if err != nil {
			if err.Code != api.CodeInvalidRequest || api.Status(err.Code) != 400 {
				t.Fatalf("refusal %+v is not a 400", err)
			}
			return
		}
		if fe := api.CheckReservationID("id", id); fe != nil || header != "" && id != header {
			t.Fatalf("id %q for header %q: %v", id, header, fe)
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("accepted %q, which the broker refuses: %v", body, err)
		}
		if err := apitest.WithinLimits(req); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
		b, merr := json.Marshal(req)
		if merr != nil {
			t.Fatal(merr)
		}
		_, back, err := decodeLocalReservation(bytes.NewReader(b), id, nil)
		if err != nil || !reflect.DeepEqual(back, req) {
			t.Fatalf("round trip of %q: %+v, %v", b, back, err)
		}
	})
}
