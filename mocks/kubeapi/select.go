package kubeapi

import (
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorFunc builds the matcher of a list or watch request's
// labelSelector and fieldSelector. Field selectors may name any dotted
// path of the object (metadata.name, spec.nodeName, status.phase, …).
func selectorFunc(q url.Values) (func(object) bool, error) {
	var ls labels.Selector
	if v := q.Get("labelSelector"); v != "" {
		sel, err := labels.Parse(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("labelSelector %q: %v", v, err))
		}
		ls = sel
	}
	var fs fields.Selector
	if v := q.Get("fieldSelector"); v != "" {
		sel, err := fields.ParseSelector(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector %q: %v", v, err))
		}
		fs = sel
	}
	if ls == nil && fs == nil {
		return nil, nil
	}
	return func(o object) bool {
		if ls != nil && !ls.Matches(labels.Set(stringMap(metadata(o)["labels"]))) {
			return false
		}
		if fs != nil && !fs.Matches(fieldGetter{o}) {
			return false
		}
		return true
	}, nil
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, val := range m {
		if s, ok := val.(string); ok {
			out[k] = s
		}
	}
	return out
}

// fieldGetter exposes an object's dotted paths as fields.Fields.
type fieldGetter struct{ o object }

func (f fieldGetter) Has(field string) bool {
	_, ok := lookupPath(f.o, field)
	return ok
}

func (f fieldGetter) Get(field string) string {
	v, _ := lookupPath(f.o, field)
	return v
}

func lookupPath(o object, path string) (string, bool) {
	var cur any = o
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[part]; !ok {
			// A missing field compares as the empty string, as the
			// apiserver's field sets do for spec.nodeName of pending pods.
			return "", true
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true
	case bool, float64:
		return fmt.Sprint(v), true
	default:
		return "", true
	}
}
