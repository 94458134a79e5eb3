package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// The journal: one Secret, the head, holds the last committed batch. Apply
// commits a batch by updating the head with its resourceVersion as the
// precondition (the commit point: one object, atomic in etcd; a second
// writer's commit fails with a conflict), then writes the batch to the
// record objects. Load reads the head, the records and the head again, and
// replays the head's batch over the records: whatever a crash left half
// written is the last batch, and replaying it is idempotent. A batch larger
// than one Secret holds goes to part Secrets first (named after its
// sequence number and batch id); only the head update commits them.
const (
	// HeadName is the journal head Secret.
	HeadName = "federation-autoscaler-store-journal"
	// journalDataKey holds the journal JSON in the head.
	journalDataKey = "journal"
	// partDataKey holds a part's entries.
	partDataKey = "entries"
	// partRecord is LabelRecord's value on a part.
	partRecord = "journal-part"
	// annotationPartOf names the head commit a part belongs to: <seq>.<batch>.
	annotationPartOf = brokercrds.Group + "/part-of"
)

// DefaultPartBytes is the default largest journal payload of one Secret
// (Options.PartBytes): well under the API server's 1 MiB limit of a
// Secret's data.
const DefaultPartBytes = 512 << 10

// entry is one mutation in the journal.
type entry struct {
	Kind   string          `json:"kind"`
	Key    string          `json:"key"`
	Delete bool            `json:"delete,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`
}

// journal is the head's content: the last committed batch.
type journal struct {
	// Seq numbers commits: 0 for the empty head, then one more per commit.
	Seq uint64 `json:"seq"`
	// Batch is a random id of the commit (it tells an in-doubt commit that
	// landed from one that did not, and names the parts).
	Batch string `json:"batch,omitempty"`
	// Parts, when not zero, says the entries are in that many part Secrets
	// rather than in Entries.
	Parts   int     `json:"parts,omitempty"`
	Entries []entry `json:"entries,omitempty"`
}

func (j journal) partOf() string { return strconv.FormatUint(j.Seq, 10) + "." + j.Batch }

func partName(j journal, i int) string { return HeadName + "." + j.partOf() + "." + strconv.Itoa(i) }

// head is the journal head as last read or written.
type head struct {
	ResourceVersion string
	Journal         journal
}

// journalStore reads and writes the head and its parts.
type journalStore struct {
	cs        kubernetes.Interface
	namespace string
}

func (js journalStore) secrets() secretsAPI { return js.cs.CoreV1().Secrets(js.namespace) }

// secretsAPI is the part of client-go's Secrets client the journal uses.
type secretsAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
}

func journalMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRecord: "journal"}}
}

// readHead returns the head, creating an empty one when there is none.
func (js journalStore) readHead(ctx context.Context) (head, error) {
	s, err := js.secrets().Get(ctx, HeadName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, err = js.secrets().Create(ctx, &corev1.Secret{
			ObjectMeta: journalMeta(HeadName), Type: SecretTypeJournal,
			Data: map[string][]byte{journalDataKey: []byte(`{"seq":0}`)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = js.secrets().Get(ctx, HeadName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return head{}, fmt.Errorf("reading the journal head Secret %s/%s: %w", js.namespace, HeadName, err)
	}
	if s.Type != SecretTypeJournal {
		return head{}, fmt.Errorf("the Secret %s/%s has type %q, not the journal's %q: it is not this store's; move it away", js.namespace, HeadName, s.Type, SecretTypeJournal)
	}
	var j journal
	if err := json.Unmarshal(s.Data[journalDataKey], &j); err != nil {
		return head{}, fmt.Errorf("the journal head Secret %s/%s is damaged (%w); restore it from a backup", js.namespace, HeadName, err)
	}
	return head{ResourceVersion: s.ResourceVersion, Journal: j}, nil
}

// entries returns the head's entries, reading its parts.
func (js journalStore) entries(ctx context.Context, j journal) ([]entry, error) {
	if j.Parts == 0 {
		return j.Entries, nil
	}
	var out []entry
	for i := range j.Parts {
		name := partName(j, i)
		s, err := js.secrets().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading journal part %s/%s of commit %d: %w", js.namespace, name, j.Seq, err)
		}
		var part []entry
		if err := json.Unmarshal(s.Data[partDataKey], &part); err != nil {
			return nil, fmt.Errorf("journal part %s/%s is damaged: %w", js.namespace, name, err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// writeParts stores j's entries in part Secrets of at most limit bytes
// each and sets j.Parts (clearing j.Entries); the parts commit only with
// the head.
func (js journalStore) writeParts(ctx context.Context, j *journal, limit int) error {
	var parts [][]entry
	size := 0
	for _, e := range j.Entries {
		n := len(e.Record) + len(e.Key) + 64
		if len(parts) == 0 || size+n > limit {
			parts = append(parts, nil)
			size = 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], e)
		size += n
	}
	j.Parts, j.Entries = len(parts), nil
	for i, p := range parts {
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		m := journalMeta(partName(*j, i))
		m.Labels[LabelRecord] = partRecord
		m.Annotations = map[string]string{annotationPartOf: j.partOf()}
		_, err = js.secrets().Create(ctx, &corev1.Secret{ObjectMeta: m, Type: SecretTypeJournal, Data: map[string][]byte{partDataKey: data}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("writing journal part %d of %d: %w", i+1, len(parts), err)
		}
	}
	return nil
}

// commit replaces the head by j if it is still at resourceVersion rv.
func (js journalStore) commit(ctx context.Context, rv string, j journal) (string, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	m := journalMeta(HeadName)
	m.ResourceVersion = rv
	s, err := js.secrets().Update(ctx, &corev1.Secret{ObjectMeta: m, Type: SecretTypeJournal, Data: map[string][]byte{journalDataKey: data}}, metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	return s.ResourceVersion, nil
}

// staleParts lists the part Secrets that do not belong to commit keep.
func (js journalStore) staleParts(ctx context.Context, keep journal) ([]string, error) {
	l, err := js.secrets().List(ctx, metav1.ListOptions{LabelSelector: LabelRecord + "=" + partRecord})
	if err != nil {
		return nil, fmt.Errorf("listing journal parts: %w", err)
	}
	var out []string
	for _, s := range l.Items {
		if keep.Parts == 0 || s.Annotations[annotationPartOf] != keep.partOf() {
			out = append(out, s.Name)
		}
	}
	return out, nil
}

// encodeBatch validates batch and turns it into journal entries, keeping
// only the last mutation of each record (mutations of one batch apply in
// order: the last one wins).
func encodeBatch(batch []store.Mutation, limit int) ([]entry, error) {
	type rk struct {
		k   store.Kind
		key string
	}
	last := make(map[rk]int, len(batch))
	for i, m := range batch {
		if err := m.Validate(); err != nil {
			return nil, err
		}
		last[rk{m.Kind, m.Key}] = i
	}
	out := make([]entry, 0, len(last))
	for i, m := range batch {
		if last[rk{m.Kind, m.Key}] != i {
			continue
		}
		e := entry{Kind: m.Kind.String(), Key: m.Key, Delete: m.Delete}
		if !m.Delete {
			b, err := store.MarshalRecord(m)
			if err != nil {
				return nil, err
			}
			if len(b) > limit {
				return nil, fmt.Errorf("%s %q is %d bytes encoded; the kubernetes store keeps records of at most %d bytes (Options.PartBytes)", m.Kind, m.Key, len(b), limit)
			}
			e.Record = b
		}
		out = append(out, e)
	}
	return out, nil
}

// decodeEntry turns a journal entry back into a mutation.
func decodeEntry(e entry) (store.Mutation, error) {
	k, err := store.ParseKind(e.Kind)
	if err != nil {
		return store.Mutation{}, err
	}
	if e.Delete {
		return store.Delete(k, e.Key), nil
	}
	m, err := store.UnmarshalRecord(k, e.Record)
	if err != nil {
		return store.Mutation{}, err
	}
	if m.Key != e.Key {
		return store.Mutation{}, fmt.Errorf("journal entry for %s %q holds the record of %q", k, e.Key, m.Key)
	}
	return m, nil
}
