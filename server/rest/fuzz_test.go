package rest

import (
	"encoding/json"
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
)

// Every decoder either rejects its input with 400 InvalidRequest (a short,
// valid UTF-8 message) or returns a value that holds only finite numbers and
// quantities within the limits (checked independently by apitest) and that
// passes its own validation again after a JSON round trip.

func checkDecoder[T any](t *testing.T, data []byte, decode func([]byte) (T, error)) (T, bool) {
	v, err := decode(data)
	if err != nil {
		if api.CodeOf(err) != api.CodeInvalidRequest {
			t.Fatalf("error %v has code %s, want InvalidRequest", err, api.CodeOf(err))
		}
		if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 2048 {
			t.Fatalf("error message of %d bytes (valid UTF-8: %v) for %d input bytes", len(msg), utf8.ValidString(msg), len(data))
		}
		return v, false
	}
	if err := apitest.WithinLimits(v); err != nil {
		t.Fatalf("accepted %q: %v", data, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted value does not encode: %v", err)
	}
	if _, err := decode(b); err != nil {
		t.Fatalf("accepted %q but rejects its re-encoding %q: %v", data, b, err)
	}
	return v, true
}

func FuzzDecodeAdvertisement(f *testing.F) {
	f.Add([]byte(goodAd))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := checkDecoder(t, data, decodeAdvertisement)
		if !ok {
			return
		}
		maxPrice := api.MaxUnitPriceValue()
		for name, p := range req.UnitPrices {
			if p.Cmp(maxPrice) > 0 {
				t.Fatalf("accepted price %s = %s above %d", name, p.String(), api.MaxUnitPrice)
			}
		}
		if c := req.CarbonIntensity; c != nil && (*c < 0 || *c > api.MaxCarbonIntensity) {
			t.Fatalf("accepted carbon %v", *c)
		}
		for _, c := range req.CarbonForecast {
			if c < 0 || c > api.MaxCarbonIntensity {
				t.Fatalf("accepted forecast value %v", c)
			}
		}
		for name, pct := range req.CapacityScalePercent {
			if pct < 0 || pct > 100 {
				t.Fatalf("accepted capacityScalePercent %s = %d", name, pct)
			}
		}
		if len(req.LiqoClusterID) > 63 || len(req.ClusterID) > 63 {
			t.Fatalf("accepted ids of %d and %d bytes", len(req.ClusterID), len(req.LiqoClusterID))
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(goodHB))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := checkDecoder(t, data, decodeHeartbeat)
		if !ok || req.Placement == nil || req.Placement.Weights == nil {
			return
		}
		w := req.Placement.Weights
		for _, v := range []float64{w.Price, w.Carbon, w.Distance, w.FreeCapacity} {
			if v < 0 || v > api.MaxWeight {
				t.Fatalf("accepted weight %v", v)
			}
		}
	})
}

func FuzzDecodeReservation(f *testing.F) {
	f.Add([]byte(goodRes))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := checkDecoder(t, data, decodeReservation)
		if ok && (len(req.Namespaces) > api.MaxNamespaces || req.ChunkCount != 1) {
			t.Fatalf("accepted %d namespaces, chunkCount %d", len(req.Namespaces), req.ChunkCount)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"status":"Succeeded","payload":{"kind":"KubeconfigPayload","kubeconfig":"apiVersion: v1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, decodeResult) })
}

// FuzzPathID: a path id is decoded exactly once: escaping the decoded id
// again gives back a segment that decodes to the same id, and a malformed
// escape is 400.
func FuzzPathID(f *testing.F) {
	f.Add("res-1")
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := pathID(raw, "reservation id")
		if err != nil {
			if api.CodeOf(err) != api.CodeInvalidRequest || !utf8.ValidString(err.Error()) {
				t.Fatalf("pathID(%q): %v", raw, err)
			}
			return
		}
		back, err := pathID(url.PathEscape(id), "reservation id")
		if err != nil || back != id {
			t.Fatalf("pathID(PathEscape(%q)) = %q, %v", id, back, err)
		}
	})
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
