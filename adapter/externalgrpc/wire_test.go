package externalgrpc_test

// Raw-bytes assertions: requests are encoded by hand the way CA 1.32 (k8s
// message types, meta/v1 Time and Duration) and CA 1.35+ (bytes,
// google.protobuf Timestamp and Duration) encode them, and answers are
// decoded with a hand-rolled reader, field number by field number, so the
// test does not trust our own generated code.

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
)

// rawCodec passes bytes through untouched.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// invokeRaw calls method with a hand-encoded request and returns the raw
// answer bytes.
func (h *harness) invokeRaw(t *testing.T, method string, req []byte) []byte {
	t.Helper()
	var resp []byte
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.conn.Invoke(c, method, &req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// field is one decoded wire field.
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // varint / fixed64 / fixed32
	b   []byte // bytes
}

// parse decodes one message level; it fails the test on malformed input.
func parse(t *testing.T, b []byte) []field {
	t.Helper()
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.u = uint64(v)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			t.Fatalf("unexpected wire type %v for field %d", typ, num)
		}
		if n < 0 {
			t.Fatalf("field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, f)
	}
	return out
}

// only returns the fields with number num.
func only(fs []field, num protowire.Number) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

// one returns the single field num, failing when it is absent or repeated.
func one(t *testing.T, fs []field, num protowire.Number, typ protowire.Type) field {
	t.Helper()
	got := only(fs, num)
	if len(got) != 1 {
		t.Fatalf("field %d present %d times, want once (fields: %v)", num, len(got), nums(fs))
	}
	if got[0].typ != typ {
		t.Fatalf("field %d has wire type %v, want %v", num, got[0].typ, typ)
	}
	return got[0]
}

func nums(fs []field) []protowire.Number {
	out := make([]protowire.Number, len(fs))
	for i, f := range fs {
		out[i] = f.num
	}
	return out
}

// enc builds messages by hand.
type enc []byte

func (e enc) str(num protowire.Number, s string) enc {
	e = protowire.AppendTag(e, num, protowire.BytesType)
	return protowire.AppendString(e, s)
}

func (e enc) msg(num protowire.Number, m []byte) enc {
	e = protowire.AppendTag(e, num, protowire.BytesType)
	return protowire.AppendBytes(e, m)
}

func (e enc) varint(num protowire.Number, v uint64) enc {
	e = protowire.AppendTag(e, num, protowire.VarintType)
	return protowire.AppendVarint(e, v)
}

func (e enc) double(num protowire.Number, v float64) enc {
	e = protowire.AppendTag(e, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(e, math.Float64bits(v))
}

// metaTime encodes meta/v1 Time the way the k8s marshaller does: seconds,
// then nanos written even when 0.
func metaTime(t time.Time) []byte {
	return enc(nil).varint(1, uint64(t.Unix())).varint(2, 0)
}

// metaDuration encodes meta/v1 Duration: nanoseconds in field 1.
func metaDuration(d time.Duration) []byte { return enc(nil).varint(1, uint64(d)) }

// googleDuration encodes google.protobuf.Duration.
func googleDuration(d time.Duration) []byte {
	return enc(nil).varint(1, uint64(d/time.Second)).varint(2, uint64(d%time.Second))
}

func wireHarness(t *testing.T) *harness {
	gv := gpuGroup("p2", 2)
	fake := localapitest.New(stdGroup("p1", 4, 0), gv)
	return newHarness(t, fake)
}

func TestWireTemplateNodeInfoBothGenerations(t *testing.T) {
	h := wireHarness(t)
	resp := h.invokeRaw(t, protos.CloudProvider_NodeGroupTemplateNodeInfo_FullMethodName, enc(nil).str(1, g1))
	fs := parse(t, resp)
	if len(fs) != 2 {
		t.Fatalf("answer has fields %v, want exactly 1 and 2", nums(fs))
	}
	f1 := one(t, fs, 1, protowire.BytesType) // CA ≤ 1.34: k8s.io.api.core.v1.Node
	f2 := one(t, fs, 2, protowire.BytesType) // CA ≥ 1.35: nodeBytes
	for gen, b := range map[string][]byte{"CA 1.32 (field 1, core/v1 Node message)": f1.b, "CA 1.35 (field 2, Node.Marshal bytes)": f2.b} {
		t.Run(gen, func(t *testing.T) {
			// CA ≤ 1.34's generated *v1.Node decodes field 1 through the
			// gogo Unmarshal; CA ≥ 1.35 calls Node.Unmarshal on field 2.
			var n corev1.Node
			if err := n.Unmarshal(b); err != nil {
				t.Fatalf("does not decode as a Node: %v", err)
			}
			checkTemplate(t, &n, "2", false, "eu-west")
			// The Node message's own layout: metadata=1, spec=2, status=3.
			inner := parse(t, b)
			for _, num := range []protowire.Number{1, 2, 3} {
				one(t, inner, num, protowire.BytesType)
			}
		})
	}
}

func TestWireGetOptionsBothGenerations(t *testing.T) {
	h := wireHarness(t)
	unneeded, unready, provision := 7*time.Minute, 21*time.Minute+500*time.Millisecond, 12*time.Minute
	defaults132 := enc(nil).double(1, 0.5).double(2, 0.5).
		msg(3, metaDuration(unneeded)).msg(4, metaDuration(unready)).msg(5, metaDuration(provision))
	defaults135 := enc(nil).double(1, 0.5).double(2, 0.5).varint(6, 1).varint(7, 1).
		msg(8, googleDuration(unneeded)).msg(9, googleDuration(unready)).msg(10, googleDuration(provision))
	for gen, d := range map[string][]byte{"CA 1.32 request": defaults132, "CA 1.35 request": defaults135} {
		t.Run(gen, func(t *testing.T) {
			resp := h.invokeRaw(t, protos.CloudProvider_NodeGroupGetOptions_FullMethodName, enc(nil).str(1, g1).msg(2, d))
			opts := parse(t, one(t, parse(t, resp), 1, protowire.BytesType).b)
			if v := math.Float64frombits(one(t, opts, 1, protowire.Fixed64Type).u); v != 0.5 {
				t.Errorf("scaleDownUtilizationThreshold = %v", v)
			}
			// CA 1.32–1.34 dereference fields 3/4/5 (meta/v1 Duration, ns).
			for num, want := range map[protowire.Number]time.Duration{3: unneeded, 4: unready, 5: provision} {
				d := parse(t, one(t, opts, num, protowire.BytesType).b)
				if got := time.Duration(one(t, d, 1, protowire.VarintType).u); got != want {
					t.Errorf("field %d = %v, want %v", num, got, want)
				}
			}
			// CA 1.35+ reads 8/9/10 (google.protobuf.Duration).
			for num, want := range map[protowire.Number]time.Duration{8: unneeded, 9: unready, 10: provision} {
				d := parse(t, one(t, opts, num, protowire.BytesType).b)
				secs := time.Duration(one(t, d, 1, protowire.VarintType).u) * time.Second
				var nanos time.Duration
				if n := only(d, 2); len(n) == 1 {
					nanos = time.Duration(n[0].u)
				}
				if secs+nanos != want {
					t.Errorf("field %d = %v, want %v", num, secs+nanos, want)
				}
			}
		})
	}
}

func TestWirePricingBothGenerations(t *testing.T) {
	h := wireHarness(t)
	start, end := epoch, epoch.Add(3*time.Hour)
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	podBytes, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	podReqs := map[string][]byte{
		"CA 1.32 pod (core/v1 Pod in field 1, meta Time 2/3)": enc(nil).msg(1, podBytes).msg(2, metaTime(start)).msg(3, metaTime(end)),
		"CA 1.35 pod (bytes in field 4, Timestamp 5/6)":       enc(nil).msg(4, podBytes).msg(5, metaTime(start)).msg(6, metaTime(end)),
	}
	for gen, req := range podReqs {
		t.Run(gen, func(t *testing.T) {
			resp := h.invokeRaw(t, protos.CloudProvider_PricingPodPrice_FullMethodName, req)
			if fs := parse(t, resp); len(fs) != 0 { // price 0 is the empty message in proto3
				t.Fatalf("pod price answer has fields %v", nums(fs))
			}
		})
	}
	// A node of the group, named as CA names a template node, carrying the
	// Liqo remote-cluster-id label (map entry: key=1, value=2).
	label := enc(nil).str(1, "liqo.io/remote-cluster-id").str(2, "liqo-p1")
	node := enc(nil).str(2, "template-node-for-"+g1).msg(3, label)
	nodeReqs := map[string][]byte{
		"CA 1.32 node price (meta Time 2/3)": enc(nil).msg(1, node).msg(2, metaTime(start)).msg(3, metaTime(end)),
		"CA 1.35 node price (Timestamp 4/5)": enc(nil).msg(1, node).msg(4, metaTime(start)).msg(5, metaTime(end)),
	}
	for gen, req := range nodeReqs {
		t.Run(gen, func(t *testing.T) {
			resp := h.invokeRaw(t, protos.CloudProvider_PricingNodePrice_FullMethodName, req)
			price := math.Float64frombits(one(t, parse(t, resp), 1, protowire.Fixed64Type).u)
			if math.Abs(price-0.156) > 1e-9 {
				t.Fatalf("price = %v, want 0.052 × 3 h", price)
			}
		})
	}
}

func TestWireNodeGroupsAndInstances(t *testing.T) {
	h := wireHarness(t)
	if err := h.increase(t, g1, 2); err != nil {
		t.Fatal(err)
	}
	res := h.fake.Reservations()
	h.fake.Peer(res[0].ID, localapi.PhaseRunning)
	h.fake.FailPeering(res[1].ID, "no route to provider")
	h.expire()

	groups := only(parse(t, h.invokeRaw(t, protos.CloudProvider_NodeGroups_FullMethodName, nil)), 1)
	if len(groups) != 2 {
		t.Fatalf("%d node groups", len(groups))
	}
	g := parse(t, groups[0].b)
	if id := string(one(t, g, 1, protowire.BytesType).b); id != g1 {
		t.Fatalf("first group id %q", id)
	}
	if len(only(g, 2)) != 0 {
		t.Fatal("minSize 0 must be omitted (proto3 scalar)")
	}
	if maxSize := one(t, g, 3, protowire.VarintType).u; maxSize != 4 {
		t.Fatalf("maxSize = %d", maxSize)
	}

	insts := only(parse(t, h.invokeRaw(t, protos.CloudProvider_NodeGroupNodes_FullMethodName, enc(nil).str(1, g1))), 1)
	if len(insts) != 2 {
		t.Fatalf("%d instances", len(insts))
	}
	states := map[string][]field{}
	for _, in := range insts {
		fs := parse(t, in.b)
		id := string(one(t, fs, 1, protowire.BytesType).b)
		states[id] = parse(t, one(t, fs, 2, protowire.BytesType).b)
	}
	running := states[localapitest.ProviderID("p1", res[0].ID)]
	if st := one(t, running, 1, protowire.VarintType).u; st != 1 {
		t.Fatalf("running instance state = %d, want 1 (instanceRunning)", st)
	}
	failed := states[localapitest.ProviderID("p1", res[1].ID)]
	if st := one(t, failed, 1, protowire.VarintType).u; st != 2 {
		t.Fatalf("failed instance state = %d, want 2 (instanceCreating)", st)
	}
	ei := parse(t, one(t, failed, 2, protowire.BytesType).b)
	if code := string(one(t, ei, 1, protowire.BytesType).b); code == "" {
		t.Fatal("failed instance has an empty errorCode")
	}
	if msg := string(one(t, ei, 2, protowire.BytesType).b); msg != "no route to provider" {
		t.Fatalf("errorMessage = %q", msg)
	}
	if class := one(t, ei, 3, protowire.VarintType).u; class != 99 {
		t.Fatalf("instanceErrorClass = %d, want 99", class)
	}

	// NodeGroupForNode for a node that is not ours: OK with an empty group.
	foreign := enc(nil).msg(1, enc(nil).str(1, "aws:///eu-west-1a/i-123").str(2, "cp-1"))
	fs := parse(t, h.invokeRaw(t, protos.CloudProvider_NodeGroupForNode_FullMethodName, foreign))
	if ng := only(fs, 1); len(ng) == 1 && len(only(parse(t, ng[0].b), 1)) != 0 {
		t.Fatal("a foreign node got a group id")
	}
	// For one of ours, the complete group.
	ours := enc(nil).msg(1, enc(nil).str(1, localapitest.ProviderID("p1", res[0].ID)))
	ng := parse(t, one(t, parse(t, h.invokeRaw(t, protos.CloudProvider_NodeGroupForNode_FullMethodName, ours)), 1, protowire.BytesType).b)
	if string(one(t, ng, 1, protowire.BytesType).b) != g1 || one(t, ng, 3, protowire.VarintType).u != 4 {
		t.Fatal("our node's group is incomplete")
	}
}

func TestWireGPUTypesAreMapKeys(t *testing.T) {
	h := wireHarness(t)
	entries := only(parse(t, h.invokeRaw(t, protos.CloudProvider_GetAvailableGPUTypes_FullMethodName, nil)), 1)
	if len(entries) != 1 {
		t.Fatalf("%d GPU types", len(entries))
	}
	if k := string(one(t, parse(t, entries[0].b), 1, protowire.BytesType).b); k == "" {
		t.Fatal("empty GPU type key")
	}
	label := one(t, parse(t, h.invokeRaw(t, protos.CloudProvider_GPULabel_FullMethodName, nil)), 1, protowire.BytesType)
	if string(label.b) != "nvidia.com/gpu" {
		t.Fatalf("GPU label %q", label.b)
	}
}
