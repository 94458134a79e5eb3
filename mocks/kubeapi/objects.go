package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// create stores a new object.
func (s *Server) create(res Resource, namespace string, obj object) (object, error) {
	gr := res.GVR().GroupResource()
	md := metadata(obj)
	namespace, err := placeObject(res, namespace, md)
	if err != nil {
		return nil, err
	}
	name, err := nameObject(res, md)
	if err != nil {
		return nil, err
	}
	crdResources, err := s.defaultObject(gr, name, obj)
	if err != nil {
		return nil, err
	}

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if res.Namespaced && (gr.Group != "" || gr.Resource != "namespaces") {
		if _, ok := s.store.objects[schema.GroupResource{Resource: "namespaces"}][key("", namespace)]; !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, namespace)
		}
	}
	if s.store.objects[gr] == nil {
		s.store.objects[gr] = map[string]object{}
	}
	k := key(namespace, name)
	if _, exists := s.store.objects[gr][k]; exists {
		return nil, apierrors.NewAlreadyExists(gr, name)
	}
	rv := s.store.nextRV()
	md["uid"] = newUID()
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	md["creationTimestamp"] = timestamp(s.opts.Now())
	md["generation"] = 1
	delete(md, "deletionTimestamp")
	obj["apiVersion"], obj["kind"] = res.APIVersion(), res.Kind
	s.store.objects[gr][k] = deepCopy(obj)
	s.store.record(gr, "ADDED", rv, obj)
	if crdResources != nil {
		s.mu.Lock()
		for _, r := range crdResources {
			s.reg.add(r)
		}
		s.mu.Unlock()
	}
	return obj, nil
}

// placeObject settles a new object's namespace from the request's and its
// metadata's, as the apiserver does: they must agree, a namespaced object
// needs one, a cluster-scoped object has none.
func placeObject(res Resource, namespace string, md map[string]any) (string, error) {
	if ns, _ := md["namespace"].(string); ns != "" && namespace != "" && ns != namespace {
		return "", apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", ns, namespace))
	}
	if !res.Namespaced {
		delete(md, "namespace")
		return "", nil
	}
	if namespace == "" {
		namespace, _ = md["namespace"].(string)
	}
	if namespace == "" {
		return "", apierrors.NewBadRequest("a namespaced object needs a namespace")
	}
	md["namespace"] = namespace
	return namespace, nil
}

// nameObject returns a new object's name (generated from generateName when
// it has none) after checking it is a DNS subdomain (nodes excepted).
func nameObject(res Resource, md map[string]any) (string, error) {
	name, _ := md["name"].(string)
	if name == "" {
		if gen, _ := md["generateName"].(string); gen != "" {
			name = gen + strings.ToLower(newUID()[:5])
			md["name"] = name
		}
	}
	if name == "" {
		return "", apierrors.NewInvalid(schema.GroupKind{Group: res.Group, Kind: res.Kind}, "", nil)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 && res.Resource != "nodes" {
		return "", apierrors.NewBadRequest(fmt.Sprintf("metadata.name %q is invalid: %s", name, strings.Join(errs, "; ")))
	}
	return name, nil
}

// defaultObject applies what the apiserver sets on kinds the simulation
// serves specially: a CRD is established at once (its resources are
// returned, to be served once it is stored), a pod starts Pending.
func (s *Server) defaultObject(gr schema.GroupResource, name string, obj object) ([]Resource, error) {
	switch {
	case gr.Group == "apiextensions.k8s.io" && gr.Resource == "customresourcedefinitions":
		crdResources, err := resourcesFromCRD(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest("CustomResourceDefinition " + name + ": " + err.Error())
		}
		markCRDEstablished(obj, s.opts.Now())
		return crdResources, nil
	case gr.Group == "" && gr.Resource == "pods":
		status, _ := obj["status"].(map[string]any)
		if status == nil {
			status = map[string]any{}
			obj["status"] = status
		}
		if _, ok := status["phase"]; !ok {
			status["phase"] = "Pending"
		}
	}
	return nil, nil
}

// markCRDEstablished sets the conditions a real apiserver sets once a CRD
// is served.
func markCRDEstablished(obj object, now time.Time) {
	status, _ := obj["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		obj["status"] = status
	}
	ts := timestamp(now)
	status["conditions"] = []any{
		map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "lastTransitionTime": ts},
		map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "lastTransitionTime": ts},
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		status["acceptedNames"] = spec["names"]
		var stored []any
		if vs, ok := spec["versions"].([]any); ok {
			for _, v := range vs {
				if vm, ok := v.(map[string]any); ok && vm["storage"] == true {
					stored = append(stored, vm["name"])
				}
			}
		}
		status["storedVersions"] = stored
	}
}

// update replaces an object (or its status) with optimistic concurrency.
func (s *Server) update(req request, obj object) (object, error) {
	gr := req.res.GVR().GroupResource()
	md := metadata(obj)
	if name, _ := md["name"].(string); name != "" && name != req.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, req.name))
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	k := key(req.namespace, req.name)
	cur, ok := s.store.objects[gr][k]
	if !ok {
		return nil, apierrors.NewNotFound(gr, req.name)
	}
	if rv, _ := md["resourceVersion"].(string); rv != "" && rv != metadata(cur)["resourceVersion"] {
		return nil, apierrors.NewConflict(gr, req.name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return s.commitUpdate(req, cur, obj)
}

// commitUpdate applies next over cur; store.mu must be held.
func (s *Server) commitUpdate(req request, cur, next object) (object, error) {
	gr := req.res.GVR().GroupResource()
	next = deepCopy(next)
	if req.subresource == "status" {
		// Only the status changes through the status subresource.
		merged := deepCopy(cur)
		merged["status"] = next["status"]
		next = merged
	} else if req.res.hasSub("status") {
		// The main resource ignores status changes when a status
		// subresource exists, as a real apiserver does.
		if st, ok := cur["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
	}
	curMD, md := metadata(cur), metadata(next)
	for _, f := range []string{"uid", "creationTimestamp", "namespace", "name", "deletionTimestamp"} {
		if v, ok := curMD[f]; ok {
			md[f] = v
		} else {
			delete(md, f)
		}
	}
	gen, _ := curMD["generation"].(float64)
	if gi, ok := curMD["generation"].(int); ok {
		gen = float64(gi)
	}
	if specChanged(cur, next) {
		gen++
	}
	md["generation"] = gen
	next["apiVersion"], next["kind"] = req.res.APIVersion(), req.res.Kind
	k := key(req.namespace, req.name)
	// An object being deleted goes away once its last finalizer is removed.
	if _, deleting := md["deletionTimestamp"]; deleting && len(finalizers(next)) == 0 {
		s.remove(gr, k, next)
		return next, nil
	}
	if reflect.DeepEqual(withoutRV(cur), withoutRV(next)) {
		return deepCopy(cur), nil // no-op updates keep the resourceVersion
	}
	rv := s.store.nextRV()
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	s.store.objects[gr][k] = deepCopy(next)
	s.store.record(gr, "MODIFIED", rv, next)
	return next, nil
}

func withoutRV(o object) object {
	c := deepCopy(o)
	delete(metadata(c), "resourceVersion")
	delete(metadata(c), "generation")
	return c
}

func specChanged(a, b object) bool {
	strip := func(o object) object {
		c := deepCopy(o)
		delete(c, "metadata")
		delete(c, "status")
		return c
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}

func finalizers(o object) []any {
	f, _ := metadata(o)["finalizers"].([]any)
	return f
}

// patch applies a JSON, merge, strategic-merge or apply patch.
func (s *Server) patch(req request, contentType string, body []byte) (object, error) {
	gr := req.res.GVR().GroupResource()
	ct := strings.TrimSpace(strings.Split(contentType, ";")[0])
	for {
		cur, ok := s.store.get(gr, req.namespace, req.name)
		if !ok {
			if ct == "application/apply-patch+yaml" {
				obj, err := yamlObject(body)
				if err != nil {
					return nil, err
				}
				return s.create(req.res, req.namespace, obj)
			}
			return nil, apierrors.NewNotFound(gr, req.name)
		}
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		var out []byte
		switch ct {
		case "application/json-patch+json":
			p, perr := jsonpatch.DecodePatch(body)
			if perr != nil {
				return nil, apierrors.NewBadRequest("decoding JSON patch: " + perr.Error())
			}
			out, err = p.Apply(curJSON)
		case "application/merge-patch+json":
			out, err = jsonpatch.MergePatch(curJSON, body)
		case "application/strategic-merge-patch+json":
			gvk := schema.GroupVersionKind{Group: req.res.Group, Version: req.res.Version, Kind: req.res.Kind}
			typed, terr := scheme.Scheme.New(gvk)
			if !req.res.Typed || terr != nil {
				return nil, unsupportedMediaType("strategic merge patch is not supported for custom resources; use a merge patch")
			}
			out, err = strategicpatch.StrategicMergePatch(curJSON, body, typed)
		case "application/apply-patch+yaml":
			// Server-side apply is modelled as a merge of the applied
			// configuration: enough for create-or-update callers.
			obj, yerr := yamlObject(body)
			if yerr != nil {
				return nil, yerr
			}
			delete(metadata(obj), "resourceVersion")
			b, _ := json.Marshal(obj)
			out, err = jsonpatch.MergePatch(curJSON, b)
		default:
			return nil, unsupportedMediaType(contentType)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest("applying patch: " + err.Error())
		}
		var next object
		if err := json.Unmarshal(out, &next); err != nil {
			return nil, apierrors.NewBadRequest("patched object is not JSON: " + err.Error())
		}
		s.store.mu.Lock()
		latest, ok := s.store.objects[gr][key(req.namespace, req.name)]
		if !ok || metadata(latest)["resourceVersion"] != metadata(cur)["resourceVersion"] {
			s.store.mu.Unlock()
			continue // raced with a writer: re-apply on the latest version
		}
		if rv, _ := metadata(next)["resourceVersion"].(string); rv != "" && rv != metadata(cur)["resourceVersion"] {
			s.store.mu.Unlock()
			return nil, apierrors.NewConflict(gr, req.name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		res, err := s.commitUpdate(req, latest, next)
		s.store.mu.Unlock()
		return res, err
	}
}

func yamlObject(body []byte) (object, error) {
	j, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest("decoding apply patch: " + err.Error())
	}
	var obj object
	if err := json.Unmarshal(j, &obj); err != nil {
		return nil, apierrors.NewBadRequest("decoding apply patch: " + err.Error())
	}
	return obj, nil
}

// delete removes an object, or marks it for deletion while it has
// finalizers.
func (s *Server) delete(res Resource, namespace, name string) (object, error) {
	gr := res.GVR().GroupResource()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	k := key(namespace, name)
	cur, ok := s.store.objects[gr][k]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	obj := deepCopy(cur)
	md := metadata(obj)
	obj["apiVersion"], obj["kind"] = res.APIVersion(), res.Kind
	if len(finalizers(obj)) > 0 {
		if _, already := md["deletionTimestamp"]; already {
			return obj, nil
		}
		md["deletionTimestamp"] = timestamp(s.opts.Now())
		rv := s.store.nextRV()
		md["resourceVersion"] = strconv.FormatUint(rv, 10)
		s.store.objects[gr][k] = deepCopy(obj)
		s.store.record(gr, "MODIFIED", rv, obj)
		return obj, nil
	}
	s.remove(gr, k, obj)
	return obj, nil
}

// remove takes the object under key k out of the store (s.store.mu held):
// obj, its last state, gets a new resourceVersion and is the DELETED
// event's object.
func (s *Server) remove(gr schema.GroupResource, k string, obj object) {
	rv := s.store.nextRV()
	metadata(obj)["resourceVersion"] = strconv.FormatUint(rv, 10)
	delete(s.store.objects[gr], k)
	s.store.record(gr, "DELETED", rv, obj)
	s.afterDelete(gr, obj)
}

// afterDelete cascades: a namespace takes its objects with it and a CRD
// stops serving its resource. store.mu must be held.
func (s *Server) afterDelete(gr schema.GroupResource, obj object) {
	switch {
	case gr.Group == "" && gr.Resource == "namespaces":
		ns := nameOf(obj)
		for ogr, objs := range s.store.objects {
			for k, o := range objs {
				if namespaceOf(o) == ns {
					rv := s.store.nextRV()
					metadata(o)["resourceVersion"] = strconv.FormatUint(rv, 10)
					delete(objs, k)
					s.store.record(ogr, "DELETED", rv, o)
				}
			}
		}
	case gr.Group == "apiextensions.k8s.io" && gr.Resource == "customresourcedefinitions":
		resources, err := resourcesFromCRD(obj)
		if err != nil {
			return
		}
		s.mu.Lock()
		for _, r := range resources {
			s.reg.remove(r.GVR())
		}
		s.mu.Unlock()
		delete(s.store.objects, resources[0].GVR().GroupResource())
	}
}

// handleBinding implements pods/binding: it sets spec.nodeName once.
func (s *Server) handleBinding(w http.ResponseWriter, r *http.Request, req request) {
	obj, err := s.readObject(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	target, _ := obj["target"].(map[string]any)
	targetName, _ := target["name"].(string)
	if targetName == "" {
		writeStatus(w, apierrors.NewBadRequest("Binding.target.name is required"))
		return
	}
	gr := req.res.GVR().GroupResource()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	cur, ok := s.store.objects[gr][key(req.namespace, req.name)]
	if !ok {
		writeStatus(w, apierrors.NewNotFound(gr, req.name))
		return
	}
	next := deepCopy(cur)
	spec, _ := next["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		next["spec"] = spec
	}
	if n, _ := spec["nodeName"].(string); n != "" {
		writeStatus(w, apierrors.NewConflict(gr, req.name, fmt.Errorf("pod %s is already assigned to node %q", req.name, n)))
		return
	}
	spec["nodeName"] = targetName
	if _, err := s.commitUpdate(request{res: req.res, namespace: req.namespace, name: req.name}, cur, next); err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}
