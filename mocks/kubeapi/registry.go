// Package kubeapi is a simulated Kubernetes API server: an in-memory object
// store that speaks the real Kubernetes REST protocol (discovery, get, list,
// watch, create, update, patch, delete, status subresources, CRDs) over
// HTTP on loopback. Every client that works against a real kube-apiserver —
// client-go typed clients, dynamic clients, informers, controller-runtime —
// works against it unchanged: a simulated cluster differs from a real one
// only in the *rest.Config handed to the code.
//
// It models what the federation's components rely on, not all of
// Kubernetes: there is no admission, no defaulting beyond creation metadata,
// no RBAC and no garbage collector. Unsupported requests get a Status error
// that says what is not supported.
package kubeapi

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served resource.
type Resource struct {
	Group      string
	Version    string
	Resource   string // plural, lower case
	Kind       string
	ListKind   string
	Namespaced bool
	// Subresources lists served subresources ("status", "binding").
	Subresources []string
	ShortNames   []string
	// Typed marks built-in resources whose Go type is in the scheme, so
	// strategic merge patches can be applied.
	Typed bool
}

// GVR returns the resource's GroupVersionResource.
func (r Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// APIVersion returns the apiVersion string of the resource's objects.
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

func (r Resource) hasSub(name string) bool {
	for _, s := range r.Subresources {
		if s == name {
			return true
		}
	}
	return false
}

// builtinResources are the resources a simulated cluster serves before any
// CRD is installed: what the agents, the simulated Liqo, the scheduler and
// the demo workload use.
func builtinResources() []Resource {
	core := func(res, kind string, namespaced bool, subs ...string) Resource {
		return Resource{Version: "v1", Resource: res, Kind: kind, ListKind: kind + "List", Namespaced: namespaced, Subresources: subs, Typed: true}
	}
	return []Resource{
		core("namespaces", "Namespace", false, "status"),
		core("nodes", "Node", false, "status"),
		core("pods", "Pod", true, "status", "binding"),
		core("services", "Service", true, "status"),
		core("endpoints", "Endpoints", true),
		core("configmaps", "ConfigMap", true),
		core("secrets", "Secret", true),
		core("serviceaccounts", "ServiceAccount", true),
		core("events", "Event", true),
		{Group: "events.k8s.io", Version: "v1", Resource: "events", Kind: "Event", ListKind: "EventList", Namespaced: true, Typed: true},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Kind: "Lease", ListKind: "LeaseList", Namespaced: true, Typed: true},
		{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Kind: "PriorityClass", ListKind: "PriorityClassList", ShortNames: []string{"pc"}, Typed: true},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets", Kind: "PodDisruptionBudget", ListKind: "PodDisruptionBudgetList", Namespaced: true, Subresources: []string{"status"}, ShortNames: []string{"pdb"}, Typed: true},
		{Group: "apps", Version: "v1", Resource: "replicasets", Kind: "ReplicaSet", ListKind: "ReplicaSetList", Namespaced: true, Subresources: []string{"status"}, ShortNames: []string{"rs"}, Typed: true},
		{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", ListKind: "DeploymentList", Namespaced: true, Subresources: []string{"status"}, Typed: true},
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions", Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList", Subresources: []string{"status"}, ShortNames: []string{"crd", "crds"}, Typed: true},
	}
}

// registry indexes resources by group/version/resource.
type registry struct {
	byGVR map[schema.GroupVersionResource]Resource
}

func newRegistry() *registry {
	r := &registry{byGVR: map[schema.GroupVersionResource]Resource{}}
	for _, res := range builtinResources() {
		r.add(res)
	}
	return r
}

func (r *registry) add(res Resource) { r.byGVR[res.GVR()] = res }

func (r *registry) remove(gvr schema.GroupVersionResource) { delete(r.byGVR, gvr) }

func (r *registry) lookup(group, version, resource string) (Resource, bool) {
	res, ok := r.byGVR[schema.GroupVersionResource{Group: group, Version: version, Resource: resource}]
	return res, ok
}

// groups returns the served API groups (excluding the legacy core group),
// sorted by name, each with its versions.
func (r *registry) groups() []metav1.APIGroup {
	versions := map[string]map[string]bool{}
	for gvr := range r.byGVR {
		if gvr.Group == "" {
			continue
		}
		if versions[gvr.Group] == nil {
			versions[gvr.Group] = map[string]bool{}
		}
		versions[gvr.Group][gvr.Version] = true
	}
	names := make([]string, 0, len(versions))
	for g := range versions {
		names = append(names, g)
	}
	sort.Strings(names)
	out := make([]metav1.APIGroup, 0, len(names))
	for _, g := range names {
		vs := make([]string, 0, len(versions[g]))
		for v := range versions[g] {
			vs = append(vs, v)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(vs)))
		grp := metav1.APIGroup{Name: g}
		for _, v := range vs {
			grp.Versions = append(grp.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		grp.PreferredVersion = grp.Versions[0]
		out = append(out, grp)
	}
	return out
}

// resourceList is the discovery document of one group/version.
func (r *registry) resourceList(group, version string) (*metav1.APIResourceList, bool) {
	var list []metav1.APIResource
	for gvr, res := range r.byGVR {
		if gvr.Group != group || gvr.Version != version {
			continue
		}
		verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
		list = append(list, metav1.APIResource{
			Name: res.Resource, SingularName: strings.ToLower(res.Kind), Namespaced: res.Namespaced,
			Kind: res.Kind, Verbs: verbs, ShortNames: res.ShortNames,
		})
		for _, sub := range res.Subresources {
			subVerbs := metav1.Verbs{"get", "patch", "update"}
			kind := res.Kind
			if sub == "binding" {
				subVerbs, kind = metav1.Verbs{"create"}, "Binding"
			}
			list = append(list, metav1.APIResource{Name: res.Resource + "/" + sub, Namespaced: res.Namespaced, Kind: kind, Verbs: subVerbs})
		}
	}
	if len(list) == 0 {
		return nil, false
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv, APIResources: list,
	}, true
}

// resourcesFromCRD turns a CustomResourceDefinition (as unstructured JSON)
// into the resources it serves, one per served version.
func resourcesFromCRD(obj map[string]any) ([]Resource, error) {
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return nil, fmt.Errorf("spec is required")
	}
	group, _ := spec["group"].(string)
	names, _ := spec["names"].(map[string]any)
	scope, _ := spec["scope"].(string)
	if group == "" || names == nil {
		return nil, fmt.Errorf("spec.group and spec.names are required")
	}
	plural, _ := names["plural"].(string)
	kind, _ := names["kind"].(string)
	listKind, _ := names["listKind"].(string)
	if plural == "" || kind == "" {
		return nil, fmt.Errorf("spec.names.plural and spec.names.kind are required")
	}
	if listKind == "" {
		listKind = kind + "List"
	}
	var shorts []string
	if s, ok := names["shortNames"].([]any); ok {
		for _, v := range s {
			if str, ok := v.(string); ok {
				shorts = append(shorts, str)
			}
		}
	}
	versions, _ := spec["versions"].([]any)
	var out []Resource
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		name, _ := vm["name"].(string)
		served, _ := vm["served"].(bool)
		if name == "" || !served {
			continue
		}
		var subs []string
		if sr, ok := vm["subresources"].(map[string]any); ok {
			if _, ok := sr["status"]; ok {
				subs = append(subs, "status")
			}
		}
		out = append(out, Resource{
			Group: group, Version: name, Resource: plural, Kind: kind, ListKind: listKind,
			Namespaced: scope != "Cluster", Subresources: subs, ShortNames: shorts,
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("spec.versions: no served version")
	}
	return out, nil
}
