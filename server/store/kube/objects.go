package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// Labels and annotations on every object the store writes.
const (
	// LabelManagedBy marks the store's objects (value ManagedBy).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "federation-autoscaler-broker"
	// LabelRecord says which collection an object holds (store.Kind's
	// name), or journal-part for a journal part.
	LabelRecord = brokercrds.Group + "/record"
	// AnnotationKey is the record's store key (the object name is derived
	// from it: objectName).
	AnnotationKey = brokercrds.Group + "/key"
	// AnnotationCommit is the journal sequence number of the commit that
	// last wrote the object: a record is never overwritten by an older
	// commit (see recordWriter).
	AnnotationCommit = brokercrds.Group + "/commit"
	// AnnotationWriter is the random id of the store instance that last
	// wrote the object: a rewrite by another broker always changes the
	// object (and its resourceVersion), which the fencing of re-created
	// records relies on (Store.verifyCreates).
	AnnotationWriter = brokercrds.Group + "/writer"
)

// Secret types and data keys.
const (
	// SecretTypeCredential is the type of a staged peering credential's Secret.
	SecretTypeCredential corev1.SecretType = brokercrds.Group + "/peering-credential"
	// SecretTypeJournal is the type of the journal head and its parts.
	SecretTypeJournal corev1.SecretType = brokercrds.Group + "/store-journal"
	// recordDataKey holds a record's JSON in a credential Secret.
	recordDataKey = "record"
	// credentialPrefix starts a credential Secret's name (Secrets share the
	// namespace with others, e.g. the broker's TLS material).
	credentialPrefix = "fa-credential."
)

// stored is one record object as the store sees it.
type stored struct {
	Name            string
	ResourceVersion string
	Key             string
	Commit          uint64
	// Writer is the store instance writing it (AnnotationWriter).
	Writer string
	Body   []byte // the record's JSON (store.MarshalRecord)
}

// backend reads and writes one collection's objects. update and remove use
// ResourceVersion as a precondition.
type backend interface {
	list(ctx context.Context) ([]stored, error)
	get(ctx context.Context, name string) (stored, error)
	create(ctx context.Context, o stored) (string, error)
	update(ctx context.Context, o stored) (string, error)
	remove(ctx context.Context, name, resourceVersion string) error
	// name is the object name of record key.
	name(key string) string
	// listWatch, object and decodeObject keep a warm copy (Follow).
	listWatch() cache.ListerWatcher
	object() runtime.Object
	decodeObject(obj any) (stored, error)
}

// objectName is the object name of a record key: the key itself when it is
// a DNS-1123 subdomain (every cluster id and generated reservation id is),
// else "h." and a hash (e.g. cleanup-<a 253-character reservation id>).
func objectName(key string) string {
	if len(validation.IsDNS1123Subdomain(key)) == 0 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "h." + hex.EncodeToString(sum[:20])
}

// listPage is how many objects one list request asks for.
const listPage = 500

func meta(o stored, k store.Kind) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            o.Name,
		ResourceVersion: o.ResourceVersion,
		Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelRecord: k.String()},
		Annotations:     map[string]string{AnnotationKey: o.Key, AnnotationCommit: strconv.FormatUint(o.Commit, 10), AnnotationWriter: o.Writer},
	}
}

// fromMeta reads what meta wrote; an object without it was not written by
// this store.
func fromMeta(m metav1.ObjectMeta, body []byte) (stored, error) {
	key, ok := m.Annotations[AnnotationKey]
	if !ok || key == "" {
		return stored{}, fmt.Errorf("object %s has no %s annotation", m.Name, AnnotationKey)
	}
	commit, err := strconv.ParseUint(m.Annotations[AnnotationCommit], 10, 64)
	if err != nil {
		return stored{}, fmt.Errorf("object %s: annotation %s: %w", m.Name, AnnotationCommit, err)
	}
	return stored{Name: m.Name, ResourceVersion: m.ResourceVersion, Key: key, Commit: commit, Body: body}, nil
}

// crObject is a record custom resource: metadata and the record as spec.
type crObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

type crList struct {
	Metadata metav1.ListMeta `json:"metadata"`
	Items    []crObject      `json:"items"`
}

// crBackend keeps one collection as custom resources of the broker's CRDs.
type crBackend struct {
	rc rest.Interface
	// dc watches the collection (Follow).
	dc        dynamic.Interface
	namespace string
	kind      store.Kind
	crdKind   string // e.g. Reservation
	resource  string // e.g. reservations
}

func (b *crBackend) name(key string) string { return objectName(key) }

func (b *crBackend) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: brokercrds.Group, Version: brokercrds.Version, Resource: b.resource}
}

func (b *crBackend) list(ctx context.Context) ([]stored, error) {
	var out []stored
	cont := ""
	for {
		raw, err := b.rc.Get().Namespace(b.namespace).Resource(b.resource).
			Param("limit", strconv.Itoa(listPage)).Param("continue", cont).
			Param("labelSelector", LabelManagedBy+"="+ManagedBy).Do(ctx).Raw()
		if err != nil {
			return nil, err
		}
		var l crList
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("decoding the list of %s: %w", b.resource, err)
		}
		for _, it := range l.Items {
			o, err := fromMeta(it.Metadata, it.Spec)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.resource, err)
			}
			out = append(out, o)
		}
		if cont = l.Metadata.Continue; cont == "" {
			return out, nil
		}
	}
}

func (b *crBackend) get(ctx context.Context, name string) (stored, error) {
	raw, err := b.rc.Get().Namespace(b.namespace).Resource(b.resource).Name(name).Do(ctx).Raw()
	if err != nil {
		return stored{}, err
	}
	return b.decode(raw)
}

func (b *crBackend) decode(raw []byte) (stored, error) {
	var it crObject
	if err := json.Unmarshal(raw, &it); err != nil {
		return stored{}, fmt.Errorf("decoding a %s: %w", b.crdKind, err)
	}
	return fromMeta(it.Metadata, it.Spec)
}

func (b *crBackend) body(o stored) ([]byte, error) {
	return json.Marshal(crObject{
		APIVersion: brokercrds.Group + "/" + brokercrds.Version, Kind: b.crdKind,
		Metadata: meta(o, b.kind), Spec: o.Body,
	})
}

func (b *crBackend) create(ctx context.Context, o stored) (string, error) {
	o.ResourceVersion = ""
	body, err := b.body(o)
	if err != nil {
		return "", err
	}
	raw, err := b.rc.Post().Namespace(b.namespace).Resource(b.resource).Body(body).Do(ctx).Raw()
	return b.resourceVersion(raw, err)
}

func (b *crBackend) update(ctx context.Context, o stored) (string, error) {
	body, err := b.body(o)
	if err != nil {
		return "", err
	}
	raw, err := b.rc.Put().Namespace(b.namespace).Resource(b.resource).Name(o.Name).Body(body).Do(ctx).Raw()
	return b.resourceVersion(raw, err)
}

func (b *crBackend) resourceVersion(raw []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	o, err := b.decode(raw)
	if err != nil {
		return "", err
	}
	return o.ResourceVersion, nil
}

func (b *crBackend) remove(ctx context.Context, name, rv string) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}
	body, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	return b.rc.Delete().Namespace(b.namespace).Resource(b.resource).Name(name).Body(body).Do(ctx).Error()
}

// secretBackend keeps the staged peering credentials as Secrets: a
// credential is never in a custom resource.
type secretBackend struct {
	cs        kubernetes.Interface
	namespace string
}

func (b *secretBackend) name(key string) string { return objectName(credentialPrefix + key) }

func (b *secretBackend) list(ctx context.Context) ([]stored, error) {
	var out []stored
	opts := metav1.ListOptions{Limit: listPage, LabelSelector: LabelRecord + "=" + store.KindCredential.String()}
	for {
		l, err := b.cs.CoreV1().Secrets(b.namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			o, err := b.decode(&l.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func (b *secretBackend) decode(s *corev1.Secret) (stored, error) {
	if s.Type != SecretTypeCredential {
		return stored{}, fmt.Errorf("secret %s has type %q, want %q", s.Name, s.Type, SecretTypeCredential)
	}
	o, err := fromMeta(s.ObjectMeta, s.Data[recordDataKey])
	if err != nil {
		return stored{}, fmt.Errorf("secrets: %w", err)
	}
	return o, nil
}

func (b *secretBackend) get(ctx context.Context, name string) (stored, error) {
	s, err := b.cs.CoreV1().Secrets(b.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return stored{}, err
	}
	return b.decode(s)
}

func (b *secretBackend) secret(o stored) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: meta(o, store.KindCredential),
		Type:       SecretTypeCredential,
		Data:       map[string][]byte{recordDataKey: o.Body},
	}
}

func (b *secretBackend) create(ctx context.Context, o stored) (string, error) {
	o.ResourceVersion = ""
	s, err := b.cs.CoreV1().Secrets(b.namespace).Create(ctx, b.secret(o), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return s.ResourceVersion, nil
}

func (b *secretBackend) update(ctx context.Context, o stored) (string, error) {
	s, err := b.cs.CoreV1().Secrets(b.namespace).Update(ctx, b.secret(o), metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	return s.ResourceVersion, nil
}

func (b *secretBackend) remove(ctx context.Context, name, rv string) error {
	return b.cs.CoreV1().Secrets(b.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
}
