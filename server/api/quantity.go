package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantity text limits. resource.ParseQuantity accepts any decimal exponent
// and rounds to nano units by dividing by 10^(exponent): "1e-999999999"
// (12 bytes) takes minutes of CPU and gigabytes of memory to parse, and
// "1e999999999" as long to compare. Untrusted quantity text is therefore
// checked before it is parsed.
const (
	// MaxQuantityText is the longest quantity text, in bytes.
	MaxQuantityText = 64
	// MaxQuantityExponent is the largest decimal exponent magnitude
	// ("1e999", "5E-12"); the SI suffixes (k … E, Ki … Ei, n … m) are fine.
	MaxQuantityExponent = 999
)

// CheckQuantityText checks untrusted quantity text before parsing: at most
// MaxQuantityText bytes and a decimal exponent of at most
// MaxQuantityExponent. It does not check the syntax otherwise (parsing
// does).
func CheckQuantityText(field, s string) *FieldError {
	if len(s) <= MaxQuantityText {
		// The number is [+-]?[0-9.]+; an exponent is e or E followed by
		// an optional sign and digits (a bare E is the exa suffix).
		rest := strings.TrimLeft(strings.TrimLeft(s, "+-"), "0123456789.")
		if len(rest) < 2 || rest[0] != 'e' && rest[0] != 'E' {
			return nil
		}
		if n, err := strconv.ParseInt(rest[1:], 10, 64); err != nil || n <= MaxQuantityExponent && n >= -MaxQuantityExponent {
			return nil // not an exponent (parsing refuses it) or a small one
		}
	}
	return fieldErr(field, ShowString(s), "a quantity of at most 64 characters with a decimal exponent from -999 to 999, such as 4, 500m, 8Gi or 1e3")
}

// ParseQuantity parses untrusted quantity text: CheckQuantityText, then
// resource.ParseQuantity. The error of a text that does not parse says
// what a quantity looks like.
func ParseQuantity(field, s string) (resource.Quantity, *FieldError) {
	if fe := CheckQuantityText(field, s); fe != nil {
		return resource.Quantity{}, fe
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fieldErr(field, ShowString(s), "a quantity such as 4, 500m, 8Gi or 0.02")
	}
	return q, nil
}

// ScreenQuantities runs ParseQuantity on every quantity of a JSON document
// before it is decoded: the values (strings or numbers) of every object
// that is the value of one of keys, at any depth ("resources",
// "unitPrices", … of an advertisement, also inside a result's payload);
// keys containing "" screens the top-level object's values (a prices file).
// A text too long or with a huge exponent is refused before it is parsed,
// and one that is no quantity ("NaN", "lots") is refused naming its field
// (the decoder's own error names none). A document that is not valid JSON
// is left to the decoder to refuse.
func ScreenQuantities(doc []byte, keys ...string) *FieldError {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	sc := screener{keys: keys}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or not JSON: the decoder refuses it
		}
		top := sc.top()
		if top != nil && top.object && top.wantKey {
			if k, ok := tok.(string); ok {
				top.key, top.wantKey = k, false
				continue
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				sc.open(t == '{')
				continue
			}
			sc.stack = sc.stack[:len(sc.stack)-1]
		case string:
			if fe := sc.check(t); fe != nil {
				return fe
			}
		case json.Number:
			if fe := sc.check(t.String()); fe != nil {
				return fe
			}
		}
		if top := sc.top(); top != nil && top.object {
			top.wantKey = true
		}
	}
}

// screener is ScreenQuantities' walk: the containers open at the current
// token.
type screener struct {
	keys  []string
	stack []screenFrame
}

// screenFrame is one open JSON object or array.
type screenFrame struct {
	object   bool
	screened bool   // its values are quantities
	path     string // JSON path of the container
	key      string // the current key (objects)
	wantKey  bool
}

func (sc *screener) top() *screenFrame {
	if n := len(sc.stack); n > 0 {
		return &sc.stack[n-1]
	}
	return nil
}

// open enters an object (or array): it is screened when it is the value of
// one of the keys ("" for the top level).
func (sc *screener) open(object bool) {
	f := screenFrame{object: object, wantKey: object}
	switch top := sc.top(); {
	case top == nil:
		f.screened = slices.Contains(sc.keys, "")
	case top.object:
		f.path = join(top.path, top.key)
		f.screened = slices.Contains(sc.keys, top.key)
	default:
		f.path = top.path
	}
	sc.stack = append(sc.stack, f)
}

// check checks a scalar value when its object is screened.
func (sc *screener) check(v string) *FieldError {
	top := sc.top()
	if top == nil || !top.object || !top.screened {
		return nil
	}
	field := top.key
	if top.path != "" {
		field = top.path + "[" + top.key + "]"
	}
	// Trimmed as resource.Quantity's UnmarshalJSON trims it; parsed, so
	// that text which is no quantity at all is refused naming its field.
	_, fe := ParseQuantity(field, strings.TrimSpace(v))
	return fe
}

// ScreenAdvertisement is ScreenQuantities for an advertisement's quantity
// fields (resources, unitPrices, capacityFixed), at any depth (a result's
// payload carries one too).
func ScreenAdvertisement(doc []byte) *FieldError {
	return ScreenQuantities(doc, "resources", "unitPrices", "capacityFixed")
}
