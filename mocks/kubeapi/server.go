package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Options configure a simulated API server.
type Options struct {
	// Name identifies the cluster in logs.
	Name string
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock used for creation and deletion timestamps.
	Now func() time.Time
}

// Server is a simulated Kubernetes API server. The zero value is not
// usable; create one with New.
type Server struct {
	opts  Options
	store *store

	mu  sync.RWMutex // guards reg
	reg *registry

	// codecs decode protobuf request bodies of the built-in types
	// (client-go's default for them) and of CustomResourceDefinitions.
	codecs serializer.CodecFactory

	httpSrv *http.Server
	ln      net.Listener
	done    chan struct{}
	// base is the parent of every request's context; Close cancels it so
	// that handlers still running (watches above all) end at once.
	base       context.Context
	cancelBase context.CancelFunc
	closeOnce  sync.Once
	closeErr   error
}

// shutdownGrace bounds how long Close waits for requests in flight after
// it has refused new ones and ended every watch; what is left after it is
// closed by force.
const shutdownGrace = 250 * time.Millisecond

// New returns a server holding the namespaces default, kube-system and
// kube-public, like a fresh cluster.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, store: newStore(opts.Now), reg: newRegistry(), done: make(chan struct{}), codecs: builtinCodecs()}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		obj := object{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}, "status": map[string]any{"phase": "Active"}}
		if _, err := s.create(Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}, "", obj); err != nil {
			panic("kubeapi: creating namespace " + ns + ": " + err.Error())
		}
	}
	return s
}

// Start serves the API on addr (use "127.0.0.1:0" for an ephemeral port)
// until ctx ends or Close is called, and returns a client configuration for
// it.
func (s *Server) Start(ctx context.Context, addr string) (*rest.Config, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("simulated API server %q: listening on %s: %w", s.opts.Name, addr, err)
	}
	s.ln = ln
	s.httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.base },
	}
	go func() {
		defer close(s.done)
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("simulated API server stopped", "cluster", s.opts.Name, "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s.RESTConfig(), nil
}

// RESTConfig returns a client configuration for the running server.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{Host: "http://" + s.ln.Addr().String(), QPS: 1000, Burst: 2000}
}

// Close stops the server the way a real apiserver shuts down: from its
// first instruction every new request (watches included) is answered 503
// "apiserver is shutting down", every open watch ends, requests in flight
// get a short grace and whatever is still open after it is closed by
// force. Close returns once the server has stopped serving; calling it
// again returns the first result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	// Refuse new watches under the store's lock (a watch registered after
	// this cannot exist), end the open ones and cancel every request.
	s.store.shutDown()
	s.cancelBase()
	if s.httpSrv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := s.httpSrv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A client kept a connection busy past the grace: close it.
		err = s.httpSrv.Close()
	}
	<-s.done
	return err
}

// request is a parsed resource path.
type request struct {
	res         Resource
	namespace   string
	name        string
	subresource string
}

// ServeHTTP implements the Kubernetes REST protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.base.Err() != nil {
		// As a real apiserver answers during its shutdown; no Retry-After,
		// so that clients being stopped too do not wait to retry.
		w.Header().Set("Connection", "close")
		writeStatus(w, apierrors.NewServiceUnavailable("apiserver is shutting down"))
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	switch path {
	case "version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "35", "gitVersion": "v1.35.4-sim", "platform": "linux/amd64"})
		return
	case "healthz", "readyz", "livez":
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ok")
		return
	case "api":
		writeJSON(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case "apis":
		s.mu.RLock()
		groups := s.reg.groups()
		s.mu.RUnlock()
		writeJSON(w, http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: groups})
		return
	}
	parts := strings.Split(path, "/")
	var group, version string
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		version, rest = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, version, rest = parts[1], parts[2], parts[3:]
	case len(parts) == 2 && parts[0] == "apis":
		s.mu.RLock()
		groups := s.reg.groups()
		s.mu.RUnlock()
		for _, g := range groups {
			if g.Name == parts[1] {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeJSON(w, http.StatusOK, g)
				return
			}
		}
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: parts[1]}, ""))
		return
	default:
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, path))
		return
	}
	if len(rest) == 0 {
		s.mu.RLock()
		list, ok := s.reg.resourceList(group, version)
		s.mu.RUnlock()
		if !ok {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: group}, version))
			return
		}
		writeJSON(w, http.StatusOK, list)
		return
	}
	req, err := s.parse(group, version, rest)
	if err != nil {
		writeStatus(w, err)
		return
	}
	s.dispatch(w, r, req)
}

// parse resolves the path segments after /api/v1 or /apis/g/v.
func (s *Server) parse(group, version string, seg []string) (request, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var req request
	// /namespaces/{ns}/{resource}/... is a namespaced path unless {resource}
	// is a namespace subresource.
	if len(seg) >= 3 && seg[0] == "namespaces" && group == "" {
		if res, ok := s.reg.lookup(group, version, seg[2]); ok && res.Namespaced {
			req.res, req.namespace, seg = res, seg[1], seg[3:]
			goto rest
		}
	}
	if len(seg) >= 3 && seg[0] == "namespaces" && group != "" {
		res, ok := s.reg.lookup(group, version, seg[2])
		if !ok {
			return req, apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: seg[2]}, "")
		}
		req.res, req.namespace, seg = res, seg[1], seg[3:]
		goto rest
	}
	{
		res, ok := s.reg.lookup(group, version, seg[0])
		if !ok {
			return req, apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: seg[0]}, "")
		}
		req.res, seg = res, seg[1:]
	}
rest:
	if len(seg) > 0 {
		req.name = seg[0]
	}
	if len(seg) > 1 {
		req.subresource = seg[1]
		if !req.res.hasSub(req.subresource) {
			return req, apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: req.res.Resource + "/" + req.subresource}, req.name)
		}
	}
	if len(seg) > 2 {
		return req, apierrors.NewBadRequest("unsupported path: too many segments")
	}
	return req, nil
}

// dispatch serves one resource request by its method.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, req request) {
	switch r.Method {
	case http.MethodGet:
		s.handleRead(w, r, req)
	case http.MethodPost:
		s.handleCreate(w, r, req)
	case http.MethodPut:
		obj, err := s.readObject(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		answer(w, http.StatusOK)(s.update(req, obj))
	case http.MethodPatch:
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest("reading body: "+err.Error()))
			return
		}
		answer(w, http.StatusOK)(s.patch(req, r.Header.Get("Content-Type"), body))
	case http.MethodDelete:
		if req.name == "" {
			s.handleDeleteCollection(w, r, req)
			return
		}
		answer(w, http.StatusOK)(s.delete(req.res, req.namespace, req.name))
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(req.res.GVR().GroupResource(), r.Method))
	}
}

// answer returns a function writing an operation's result: the object with
// status code, or the error as a Status.
func answer(w http.ResponseWriter, code int) func(object, error) {
	return func(obj object, err error) {
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, code, obj)
	}
}

// handleRead serves a GET: one object (its status subresource reads the
// whole object), a watch, or a list.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request, req request) {
	q := r.URL.Query()
	switch {
	case req.name != "":
		s.handleGet(w, req)
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		s.handleWatch(w, r, req)
	default:
		s.handleList(w, r, req)
	}
}

// handleCreate serves a POST: a pod's binding, or a new object.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, req request) {
	if req.subresource == "binding" {
		s.handleBinding(w, r, req)
		return
	}
	if req.name != "" {
		writeStatus(w, apierrors.NewMethodNotSupported(req.res.GVR().GroupResource(), "POST on a named object"))
		return
	}
	obj, err := s.readObject(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	answer(w, http.StatusCreated)(s.create(req.res, req.namespace, obj))
}

func (s *Server) handleGet(w http.ResponseWriter, req request) {
	obj, ok := s.store.get(req.res.GVR().GroupResource(), req.namespace, req.name)
	if !ok {
		writeStatus(w, apierrors.NewNotFound(req.res.GVR().GroupResource(), req.name))
		return
	}
	writeJSON(w, http.StatusOK, s.present(req.res, obj))
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, req request) {
	match, err := selectorFunc(r.URL.Query())
	if err != nil {
		writeStatus(w, err)
		return
	}
	items, rv := s.store.list(req.res.GVR().GroupResource(), req.namespace, match)
	out := make([]any, 0, len(items))
	for _, o := range items {
		out = append(out, s.present(req.res, o))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": req.res.APIVersion(),
		"kind":       req.res.ListKind,
		"metadata":   map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)},
		"items":      out,
	})
}

func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, req request) {
	match, err := selectorFunc(r.URL.Query())
	if err != nil {
		writeStatus(w, err)
		return
	}
	items, _ := s.store.list(req.res.GVR().GroupResource(), req.namespace, match)
	for _, o := range items {
		if _, err := s.delete(req.res, namespaceOf(o), nameOf(o)); err != nil && !apierrors.IsNotFound(err) {
			writeStatus(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

// present stamps kind and apiVersion of the served version on an object.
func (s *Server) present(res Resource, o object) object {
	o["apiVersion"] = res.APIVersion()
	o["kind"] = res.Kind
	return o
}

func (s *Server) readObject(r *http.Request) (object, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading request body: " + err.Error())
	}
	ct := r.Header.Get("Content-Type")
	if strings.Contains(ct, "protobuf") {
		// client-go sends built-in types as protobuf unless told
		// otherwise: decode with the built-in scheme, store as JSON.
		typed, _, err := s.codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil, apierrors.NewBadRequest("decoding protobuf request body: " + err.Error())
		}
		if body, err = json.Marshal(typed); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	var obj object
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest("decoding request body as JSON: " + err.Error())
	}
	return obj, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, status)
}

// newUID returns a fresh object UID.
func newUID() string { return uuid.NewString() }

// builtinCodecs knows every built-in type client-go may send as protobuf,
// and CustomResourceDefinitions.
func builtinCodecs() serializer.CodecFactory {
	sch := runtime.NewScheme()
	if err := scheme.AddToScheme(sch); err != nil {
		panic("kubeapi: building the scheme: " + err.Error())
	}
	if err := apiextensionsv1.AddToScheme(sch); err != nil {
		panic("kubeapi: building the scheme: " + err.Error())
	}
	return serializer.NewCodecFactory(sch)
}

// unsupportedMediaType is the 415 Status for a content type the simulated
// server does not accept.
func unsupportedMediaType(what string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType, Message: "unsupported media type: " + what,
	}}
}
