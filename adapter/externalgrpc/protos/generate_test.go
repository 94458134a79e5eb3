package protos_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code into a temporary
// folder and requires it to equal the committed files byte for byte.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (apt-get install -y protobuf-compiler libprotobuf-dev): cannot check that the generated code is current")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "generate.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh failed: %v\n%s", err, b)
	}
	for _, f := range []string{"externalgrpc.pb.go", "externalgrpc_grpc.pb.go"} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate` and commit the result", f)
		}
	}
}
