package attacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/preflight"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Issue #11 items 2, 5, 6 and 8 on the agents: the consoles and the
// sharing file refuse hostile values naming the field, the consumer's
// local API cannot be driven by a web page, a login flood from one address
// never locks the owner out, and a consumer agent on a bare cluster
// creates its namespace and completes a Peer.

// federation is a broker, a provider agent (one Ready worker) and a
// consumer agent on a cluster without the agent's namespace.
type federation struct {
	broker             *broker
	provider, consumer *agent
	consumerKube       *testcluster.Env
}

func startFederation(t *testing.T) *federation {
	t.Helper()
	f := &federation{broker: startBroker(t, 1024)}
	provKube := testcluster.StartSimulated(t)
	readyWorker(t, provKube, "worker-1", "16", "32Gi")
	f.provider = startAgentOn(t, f.broker, 1024, provKube, "provider", "provider-1")
	f.consumerKube = testcluster.StartSimulated(t) // bare: no federation-autoscaler namespace
	f.consumer = startAgentOn(t, f.broker, 1024, f.consumerKube, "consumer", "consumer-1", "--sim-peering-delay", "0s")
	return f
}

// readyWorker adds a Ready node with the given allocatable CPU and memory.
func readyWorker(t *testing.T, kube *testcluster.Env, name, cpu, mem string) {
	t.Helper()
	c, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	n.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.23.4.10"}},
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// local calls the consumer's local API as the adapter does (a JSON body);
// header pairs are set after, so they may replace its Content-Type, and a
// "Host" pair sets the Host the request claims.
func (a *agent) local(t *testing.T, method, path string, body any, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, "http://"+a.localAPI+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestBareClusterPeerAndLocalAPIGuard: the consumer agent on a cluster
// without its namespace creates it and completes a Peer for a reservation
// made through its local API; web-page-shaped calls to that API (a
// text/plain POST, a foreign Origin, Sec-Fetch-Site cross-site, a
// rebinding Host) are refused and create nothing.
func TestBareClusterPeerAndLocalAPIGuard(t *testing.T) {
	f := startFederation(t)
	c := f.consumer
	testpoll.UntilNil(t, patience, "the consumer agent creating its namespace", func() error {
		var ns corev1.Namespace
		if err := f.consumerKube.Client.Get(context.Background(), client.ObjectKey{Name: "federation-autoscaler"}, &ns); err != nil {
			return err
		}
		if ns.Labels[preflight.ManagedByLabel] != preflight.ManagedBy {
			return fmt.Errorf("labels %v", ns.Labels)
		}
		return nil
	})
	const group = "ng-provider-1-standard"
	testpoll.UntilNil(t, patience, "a growable node group from provider-1", func() error {
		st, body := c.local(t, "GET", localapi.PathNodeGroups, nil)
		var view api.NodeGroupListResponse
		if st != http.StatusOK || json.Unmarshal(body, &view) != nil {
			return fmt.Errorf("%d %s", st, body)
		}
		for _, g := range view.NodeGroups {
			if g.ID == group && g.MaxSize > g.CurrentReserved {
				return nil
			}
		}
		return fmt.Errorf("no growable %s in %s", group, body)
	})

	reserve := api.ReservationRequest{ProviderClusterID: "provider-1", NodeGroupID: group, ChunkCount: 1, ChunkType: api.ChunkStandard}
	port := c.localAPI[strings.LastIndexByte(c.localAPI, ':'):]
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"text/plain POST (a form a page may send without preflight)", []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"foreign Origin", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, http.StatusForbidden},
		{"Origin of another loopback port", []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
		{"Sec-Fetch-Site cross-site", []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"rebinding Host", []string{"Content-Type", "application/json", "Host", "evil.example" + port}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := append([]string{api.HeaderReservationID, "res-web-page"}, tc.header...)
			if st, body := c.local(t, "POST", localapi.PathReservations, reserve, header...); st != tc.status {
				t.Fatalf("%d %s, want %d", st, body, tc.status)
			}
		})
	}
	if st, body := c.local(t, "GET", localapi.PathNodeGroups, nil, "Host", "evil.example"+port); st != http.StatusForbidden {
		t.Errorf("GET with a rebinding Host: %d %s, want 403", st, body)
	}
	cons := f.broker.caller(t, "consumer-1", api.RoleConsumer)
	expect(t, "the refused web-page reservation", cons.Must(t, "GET", "/api/v1/reservations/res-web-page", nil), http.StatusNotFound, api.CodeNotFound)

	// The adapter's call (JSON, no Origin, a loopback Host) goes through
	// and the Peer completes on the bare cluster.
	if st, body := c.local(t, "POST", localapi.PathReservations, reserve, api.HeaderReservationID, "res-bare-1"); st != http.StatusCreated {
		t.Fatalf("reserve through the local API: %d %s, want 201", st, body)
	}
	testpoll.UntilNil(t, patience, "res-bare-1 Peered at the broker", func() error {
		r := cons.Must(t, "GET", "/api/v1/reservations/res-bare-1", nil)
		var res api.ReservationResponse
		if r.Status != http.StatusOK || r.Decode(&res) != nil {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		if res.Status != api.PhasePeered {
			return fmt.Errorf("phase %s", res.Status)
		}
		return nil
	})
	testpoll.UntilNil(t, patience, "res-bare-1's virtual node Running", func() error {
		st, body := c.local(t, "GET", localapi.PathVirtualNodes, nil)
		var list localapi.VirtualNodeList
		if st != http.StatusOK || json.Unmarshal(body, &list) != nil {
			return fmt.Errorf("%d %s", st, body)
		}
		for _, v := range list.VirtualNodes {
			if v.ReservationID == "res-bare-1" && v.Phase == localapi.PhaseRunning {
				return nil
			}
		}
		return fmt.Errorf("%s", body)
	})
}

// console is a logged-in session on an agent's console (or the broker's
// dashboard).
type console struct {
	base string
	c    *http.Client
	csrf string
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// login logs in with token from the loopback address src and reads the
// session's CSRF token from the page it lands on.
func login(t *testing.T, base, token, src string) *console {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &console{base: base, c: clientFrom(src, jar)}
	resp, err := s.c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login at %s from %s: %d", base, src, resp.StatusCode)
	}
	if m := csrfRE.FindSubmatch(body); m != nil {
		s.csrf = string(m[1])
	}
	return s
}

// clientFrom is an HTTP client dialling from the loopback address src
// (cookies in jar, when set).
func clientFrom(src string, jar http.CookieJar) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	if jar != nil {
		c.Jar = jar
	}
	return c
}

// post submits a console form with the session's CSRF token; redirects are
// not followed (a success is a 303).
func (s *console) post(t *testing.T, path string, form url.Values) (int, string) {
	t.Helper()
	form.Set("_csrf", s.csrf)
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := *s.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestConsolesRefuseHostileValues: both consoles answer a hostile form
// with a 4xx page naming the field (422, the consoles' answer for a form
// with invalid fields, docs/ui.md), never a 5xx, and change nothing; an
// unknown reservation id is a 404.
func TestConsolesRefuseHostileValues(t *testing.T) {
	f := startFederation(t)
	prov := login(t, "http://"+f.provider.console, f.provider.consoleToken, "127.0.0.1")
	cons := login(t, "http://"+f.consumer.console, f.consumer.consoleToken, "127.0.0.1")
	if prov.csrf == "" || cons.csrf == "" {
		t.Fatal("no CSRF token on a console page after the login")
	}
	weighted := func(name, v string) url.Values {
		f := url.Values{"policy": {"Weighted"}, "w_price": {"1"}, "w_carbon": {"1"}, "w_distance": {"1"}, "w_free": {"1"}}
		f.Set(name, v)
		return f
	}
	for _, tc := range []struct {
		name   string
		s      *console
		path   string
		form   url.Values
		status int
		want   string
	}{
		{"NaN weight", cons, "/policy", weighted("w_carbon", "NaN"), http.StatusUnprocessableEntity, "Carbon weight: NaN is not allowed"},
		{"+Inf weight", cons, "/policy", weighted("w_distance", "+Inf"), http.StatusUnprocessableEntity, "Distance weight: +Inf is not allowed"},
		{"weight near float64 max", cons, "/policy", weighted("w_price", "9e307"), http.StatusUnprocessableEntity, "Price weight: 9e+307 is not allowed"},
		{"unknown reservation id", cons, "/reservations/release", url.Values{"id": {"res-nobody-holds"}}, http.StatusNotFound, "res-nobody-holds"},
		{"reservation id ../x", cons, "/reservations/release", url.Values{"id": {"../x"}}, http.StatusUnprocessableEntity, "the reservation id"},
		{"price near float64 max", prov, "/sharing", url.Values{"price_cpu": {"9e307"}}, http.StatusUnprocessableEntity, "9e307"},
		{"NaN price", prov, "/sharing", url.Values{"price_memory": {"NaN"}}, http.StatusUnprocessableEntity, "NaN"},
		{"negative cap", prov, "/sharing", url.Values{"cap_mode_cpu": {"fixed"}, "cap_value_cpu": {"-2"}}, http.StatusUnprocessableEntity, "-2"},
		{"allowed consumer ../p1", prov, "/sharing", url.Values{"allowed": {"../p1"}}, http.StatusUnprocessableEntity, "../p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := tc.s.post(t, tc.path, tc.form)
			if st != tc.status || !strings.Contains(body, tc.want) && !strings.Contains(body, htmlEscape(tc.want)) {
				i := strings.Index(body, "<main")
				t.Fatalf("%d, want %d naming %q; page: %.600s", st, tc.status, tc.want, body[max(0, i):])
			}
		})
	}
	// Nothing reached the broker: provider-1's advertisement carries no
	// price of the refused forms.
	p := f.broker.caller(t, "provider-1", api.RoleProvider)
	r := p.Must(t, "GET", "/api/v1/advertisements/provider-1", nil)
	if strings.Contains(string(r.Body), "9e307") || strings.Contains(string(r.Body), "NaN") {
		t.Errorf("a refused price reached the broker: %s", r.Body)
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer(`"`, "&#34;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestSharingFileRefusesHostileValues: a provider agent whose
// --sharing-file holds a hostile value refuses to start (exit 1) naming
// the file's field, before it touches the cluster.
func TestSharingFileRefusesHostileValues(t *testing.T) {
	b := startBroker(t, 1024)
	bundle := b.join(t, "provider-1", "provider")
	kubeconfig, requests := countingKubeAPI(t)
	for _, tc := range []struct{ name, file, want string }{
		{"price near float64 max", "unitPrices:\n  cpu: \"9e307\"\n", "unitPrices[cpu]"},
		{"NaN price", "unitPrices:\n  memory: NaN\n", "unitPrices[memory]"},
		// Quoted: unquoted, YAML reads it as the float 0.
		{"price exponent of a billion", "unitPrices:\n  cpu: \"1e-999999999\"\n", "unitPrices[cpu]"},
		{"negative percentage cap", "capacity:\n  cpu: {percent: -5}\n", "-5"},
		{"denied consumer ../p1", "deniedConsumers: [\"../p1\"]\n", "../p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sharing.yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			out, code := runToExit(t, "agent", "--role", "provider", "--bundle", bundle, "--kubeconfig", kubeconfig,
				"--liqo-driver", "sim", "--health-listen", "", "--sharing-file", file)
			if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "sharing") {
				t.Fatalf("exit %d, want 1 with a message naming %q and the sharing file:\n%s", code, tc.want, out)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the Kubernetes API got %d requests from agents whose sharing file was refused", n)
	}
}

// TestBadLiqoDriverIsRefusedBeforeAnyIO: `--liqo-driver magic` stops the
// consumer agent with exit 1 and the flag named before it sends anything
// to the cluster (it used to be noticed after the CRDs were installed).
func TestBadLiqoDriverIsRefusedBeforeAnyIO(t *testing.T) {
	b := startBroker(t, 1024)
	kubeconfig, requests := countingKubeAPI(t)
	out, code := runToExit(t, "agent", "--role", "consumer", "--bundle", b.join(t, "consumer-1", "consumer"),
		"--kubeconfig", kubeconfig, "--liqo-driver", "magic", "--health-listen", "", "--local-api-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(out, "--liqo-driver") || !strings.Contains(out, "magic") {
		t.Fatalf("exit %d, want 1 naming --liqo-driver \"magic\":\n%s", code, out)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the Kubernetes API got %d requests before the bad flag was refused", n)
	}
}

// countingKubeAPI is a kubeconfig pointing at a server that counts
// requests and answers none usefully.
func countingKubeAPI(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	kc.AuthInfos["c"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path, &n
}

// runToExit runs the binary until it exits and returns its output and
// exit status.
func runToExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("federation-autoscaler %s did not exit within %s:\n%s", strings.Join(args, " "), patience, out)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}
