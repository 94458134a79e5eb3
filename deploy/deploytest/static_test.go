package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
)

// TestShellcheck runs Debian's shellcheck on every script. Under CI=true a
// missing shellcheck fails (the CI installs it); locally it skips.
func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		testbin.MissingTool(t, "shellcheck is not installed (apt-get install shellcheck)")
	}
	root := testbin.RepoRoot()
	scripts, err := filepath.Glob(filepath.Join(root, "deploy", "standalone", "*.sh"))
	if err != nil || len(scripts) < 9 {
		t.Fatalf("found %d scripts in deploy/standalone (%v), want the 8 up/down scripts and lib.sh", len(scripts), err)
	}
	scripts = append(scripts,
		filepath.Join(root, "deploy", "deploytest", "build-kubectl.sh"),
		filepath.Join(root, "deploy", "liqotest", "build-liqoctl.sh"),
		filepath.Join(root, "deploy", "testcluster", "build.sh"),
		filepath.Join(root, "deploy", "testcluster", "kube-version.sh"))
	// Sourced libraries set no shell options of their own: their callers do.
	sourced := map[string]bool{"lib.sh": true, "kube-version.sh": true}
	for _, s := range scripts {
		t.Run(filepath.Base(s), func(t *testing.T) {
			cmd := exec.Command(sc, "--external-sources", "--severity=style", filepath.Base(s))
			cmd.Dir = filepath.Dir(s)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", s, err, out)
			}
			raw, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			if !sourced[filepath.Base(s)] && !bytes.Contains(raw, []byte("\nset -euo pipefail\n")) {
				t.Errorf("%s: no `set -euo pipefail`", s)
			}
		})
	}
}

// TestDockerfile lints the Dockerfile statically (no Docker engine here).
func TestDockerfile(t *testing.T) {
	root := testbin.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, drop comments.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var froms, users []string
	secretish := regexp.MustCompile(`(?i)(key|token|password|passwd|secret|credential)`)
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			users = append(users, f[1])
		case "ADD":
			if strings.Contains(l, "http://") || strings.Contains(l, "https://") {
				t.Errorf("ADD from a URL (use a pinned build step instead): %s", l)
			}
		case "ENV", "ARG":
			for _, kv := range f[1:] {
				if secretish.MatchString(strings.SplitN(kv, "=", 2)[0]) {
					t.Errorf("%s with a secret-looking name (secrets never go into an image): %s", f[0], l)
				}
			}
		}
		if strings.Contains(l, ":latest") {
			t.Errorf("a :latest reference: %s", l)
		}
	}
	if len(froms) != 2 {
		t.Fatalf("FROM lines %v: want a builder stage and a runtime stage", froms)
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$`)
	for _, f := range froms {
		if !pinned.MatchString(f) || (!strings.Contains(f, "@sha256:") && !strings.Contains(f[strings.LastIndex(f, "/")+1:], ":")) {
			t.Errorf("base image %q is not pinned by tag or digest", f)
		}
		if strings.Contains(f, "$") {
			t.Errorf("base image %q comes from a build argument: pin it in the Dockerfile", f)
		}
	}
	if !strings.HasPrefix(froms[0], "golang:1.26") {
		t.Errorf("builder %q: want golang:1.26 (go.mod's Go)", froms[0])
	}
	if !strings.HasPrefix(froms[1], "gcr.io/distroless/static") || !strings.Contains(froms[1], ":nonroot") {
		t.Errorf("runtime base %q: want gcr.io/distroless/static…:nonroot (CA certificates, no shell, non-root)", froms[1])
	}
	if len(users) == 0 {
		t.Fatal("no USER: the image would run as root")
	}
	if u := users[len(users)-1]; !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(u) {
		t.Errorf("final USER %q: want a numeric non-root uid (65532) so runAsNonRoot can verify it", u)
	}
	text := string(raw)
	for _, want := range []string{"CGO_ENABLED=0", "ENTRYPOINT [\"/usr/local/bin/federation-autoscaler\"]",
		`if [ "${WITH_LIQOCTL}" = "true" ]`, "FA_LIQOCTL_DIR=/out/opt bash deploy/liqotest/build-liqoctl.sh", "ARG WITH_LIQOCTL=false"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	di, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "**/*.key", "*.tar.gz", "federation-pki/"} {
		if !strings.Contains(string(di), want+"\n") {
			t.Errorf(".dockerignore does not exclude %s (key material and bundles must never reach the build context)", want)
		}
	}
}

// decodeAll decodes a multi-document YAML stream.
func decodeAll(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(u); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// kustomize renders a folder of deploy/manifests.
func kustomize(t *testing.T, folder string) []*unstructured.Unstructured {
	t.Helper()
	out, err := kubectl(t, "kustomize", filepath.Join(testbin.RepoRoot(), "deploy", "manifests", folder))
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, []byte(out))
}

var folders = []string{"central", "central/ha", "provider", "provider/liqoctl", "consumer", "consumer/liqo-sim", "mocks", "crds"}

// TestManifestsStatic checks what the folders render to: labels,
// hardening, probes, resources and pinned images on every workload; copies
// in step with their sources.
func TestManifestsStatic(t *testing.T) {
	for _, folder := range folders {
		t.Run(folder, func(t *testing.T) {
			objs := kustomize(t, folder)
			if len(objs) == 0 {
				t.Fatal("renders nothing")
			}
			for _, o := range objs {
				id := o.GetKind() + "/" + o.GetName()
				if folder != "crds" {
					l := o.GetLabels()
					if l["app.kubernetes.io/part-of"] != "federation-autoscaler" || l["app.kubernetes.io/component"] != strings.Split(folder, "/")[0] {
						t.Errorf("%s: labels %v lack part-of=federation-autoscaler and component=%s", id, l, strings.Split(folder, "/")[0])
					}
				}
				if o.GetKind() == "Deployment" {
					checkDeployment(t, id, o)
				}
				if o.GetKind() == "Service" && folder == "central" {
					ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
					var got []int64
					for _, p := range ports {
						got = append(got, p.(map[string]any)["nodePort"].(int64))
					}
					if !reflect.DeepEqual(got, []int64{30443, 30444}) {
						t.Errorf("broker node ports %v, want [30443 30444]", got)
					}
				}
			}
		})
	}
}

func checkDeployment(t *testing.T, id string, o *unstructured.Unstructured) {
	t.Helper()
	pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	psc, _ := pod["securityContext"].(map[string]any)
	if psc["runAsNonRoot"] != true {
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", id)
	}
	if sp, _ := psc["seccompProfile"].(map[string]any); sp["type"] != "RuntimeDefault" {
		t.Errorf("%s: seccompProfile is not RuntimeDefault", id)
	}
	containers, _ := pod["containers"].([]any)
	for _, c := range containers {
		c := c.(map[string]any)
		cid := id + "/" + c["name"].(string)
		sc, _ := c["securityContext"].(map[string]any)
		if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
			t.Errorf("%s: want readOnlyRootFilesystem true and allowPrivilegeEscalation false, got %v", cid, sc)
		}
		if caps, _ := sc["capabilities"].(map[string]any); !reflect.DeepEqual(caps["drop"], []any{"ALL"}) {
			t.Errorf("%s: capabilities do not drop ALL: %v", cid, caps)
		}
		if c["livenessProbe"] == nil || c["readinessProbe"] == nil {
			t.Errorf("%s: lacks a liveness or readiness probe", cid)
		}
		res, _ := c["resources"].(map[string]any)
		if res["requests"] == nil || res["limits"] == nil {
			t.Errorf("%s: lacks resource requests or limits", cid)
		}
		img := c["image"].(string)
		switch {
		case img == "federation-autoscaler": // replaced by the scripts' --image
		case strings.HasPrefix(img, "registry.k8s.io/autoscaling/cluster-autoscaler:v1."):
			if minor := strings.Split(strings.TrimPrefix(img, "registry.k8s.io/autoscaling/cluster-autoscaler:v1."), ".")[0]; minor < "32" {
				t.Errorf("%s: Cluster Autoscaler %s is older than v1.32", cid, img)
			}
		default:
			t.Errorf("%s: unexpected image %q", cid, img)
		}
		if strings.HasSuffix(img, ":latest") {
			t.Errorf("%s: image %q is not pinned", cid, img)
		}
	}
}

// TestManifestCopies keeps the kustomize copies in step with their sources
// (kustomize refuses files outside a folder, so CRDs are copied).
func TestManifestCopies(t *testing.T) {
	root := testbin.RepoRoot()
	pairs := map[string]string{}
	for _, src := range glob(t, filepath.Join(root, "deploy", "crds", "*.yaml")) {
		pairs[src] = filepath.Join(root, "deploy", "manifests", "crds", filepath.Base(src))
	}
	for _, src := range glob(t, filepath.Join(root, "mocks", "liqo", "crds", "*.yaml")) {
		pairs[src] = filepath.Join(root, "deploy", "manifests", "consumer", "liqo-sim", filepath.Base(src))
	}
	for _, src := range glob(t, filepath.Join(root, "deploy", "crds", "broker", "*.yaml")) {
		pairs[src] = filepath.Join(root, "deploy", "manifests", "central", "ha", "crds", filepath.Base(src))
	}
	if len(pairs) != 9 {
		t.Fatalf("found %d CRD sources, want 2 of ours (ConsumerPolicy, VirtualNodeState), 4 of the broker's store and 3 simulated Liqo ones", len(pairs))
	}
	for src, dst := range pairs {
		a, _ := os.ReadFile(src)
		b, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s (%v): refresh it with cp %s %s", dst, src, err, src, dst)
		}
	}
	// RBAC: every Role/ClusterRole in deploy/rbac (the agents' reviewed
	// rules; deploy/rbac/optional holds grants an operator adds by choice,
	// never part of the manifests) has the same rules here, except the CRD installer the
	// manifests do not need (they apply the CRDs; agents run with
	// --install-crds=false).
	ours := map[string]any{}
	for _, f := range []string{"provider", "provider/liqoctl", "consumer", "consumer/liqo-sim"} {
		for _, o := range kustomize(t, f) {
			if k := o.GetKind(); k == "Role" || k == "ClusterRole" {
				ours[k+"/"+o.GetName()] = o.Object["rules"]
			}
		}
	}
	for _, f := range glob(t, filepath.Join(root, "deploy", "rbac", "*.yaml")) {
		raw, _ := os.ReadFile(f)
		for _, o := range decodeAll(t, raw) {
			k := o.GetKind()
			if (k != "Role" && k != "ClusterRole") || o.GetName() == "federation-autoscaler:crd-installer" {
				continue
			}
			got, ok := ours[k+"/"+o.GetName()]
			if !ok {
				t.Errorf("%s %s of %s is missing from deploy/manifests", k, o.GetName(), f)
			} else if !reflect.DeepEqual(got, o.Object["rules"]) {
				t.Errorf("%s %s: rules differ from %s", k, o.GetName(), f)
			}
		}
	}
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
