package rest

import (
	"encoding/json"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Every decoder either rejects its input with 400 InvalidRequest or returns
// a value that passes its own validation again after a JSON round trip.

func checkDecoder[T any](t *testing.T, data []byte, decode func([]byte) (T, error)) {
	v, err := decode(data)
	if err != nil {
		if api.CodeOf(err) != api.CodeInvalidRequest {
			t.Fatalf("error %v has code %s, want InvalidRequest", err, api.CodeOf(err))
		}
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted value does not encode: %v", err)
	}
	if _, err := decode(b); err != nil {
		t.Fatalf("accepted %q but rejects its re-encoding %q: %v", data, b, err)
	}
}

func FuzzDecodeAdvertisement(f *testing.F) {
	f.Add([]byte(goodAd))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, decodeAdvertisement) })
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(goodHB))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, decodeHeartbeat) })
}

func FuzzDecodeReservation(f *testing.F) {
	f.Add([]byte(goodRes))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, decodeReservation) })
}

func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"status":"Succeeded","payload":{"kind":"KubeconfigPayload","kubeconfig":"apiVersion: v1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, decodeResult) })
}

func FuzzParseQuery(f *testing.F) {
	f.Add("30s", "1", "true")
	f.Fuzz(func(t *testing.T, wait, chunks, all string) {
		if d, err := parseWait(wait); err == nil && (d < 0 || d > MaxWait) {
			t.Fatalf("parseWait(%q) = %v outside [0, %v]", wait, d, MaxWait)
		} else if err != nil && api.CodeOf(err) != api.CodeInvalidRequest {
			t.Fatalf("parseWait(%q): %v", wait, err)
		}
		if n, err := parseChunks(chunks); err == nil && n < 0 {
			t.Fatalf("parseChunks(%q) = %d", chunks, n)
		} else if err != nil && api.CodeOf(err) != api.CodeInvalidRequest {
			t.Fatalf("parseChunks(%q): %v", chunks, err)
		}
		if _, err := parseAll(all); err != nil && api.CodeOf(err) != api.CodeInvalidRequest {
			t.Fatalf("parseAll(%q): %v", all, err)
		}
	})
}

func FuzzReservationID(f *testing.F) {
	f.Add("res-1")
	f.Fuzz(func(t *testing.T, header string) {
		id, err := reservationID(header, func() string { return "00000000-0000-4000-8000-000000000000" })
		if err != nil {
			if api.CodeOf(err) != api.CodeInvalidRequest {
				t.Fatalf("reservationID(%q): %v", header, err)
			}
			return
		}
		if header != "" && id != header {
			t.Fatalf("reservationID(%q) = %q", header, id)
		}
		if len(id) == 0 || len(id) > 253 {
			t.Fatalf("reservationID(%q) = %q: not a usable name", header, id)
		}
	})
}
