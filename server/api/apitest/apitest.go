// Package apitest checks values against the Broker API's limits for tests
// and fuzz targets: independently of the Check functions of server/api, it
// walks a decoded value and reports the first number JSON could not carry or
// quantity beyond api.MaxQuantity.
package apitest

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

var quantityType = reflect.TypeOf(resource.Quantity{})

// WithinLimits returns an error naming the first violation found in v (at
// any depth of exported struct fields, pointers, slices, arrays and maps):
// a float64 that is NaN or infinite, a resource.Quantity that is negative or
// above api.MaxQuantity, or a string (or map key) that is not valid UTF-8.
// It also requires v to encode as JSON.
func WithinLimits(v any) error {
	if err := walk(reflect.ValueOf(v), "value"); err != nil {
		return err
	}
	if _, err := json.Marshal(v); err != nil {
		return fmt.Errorf("does not encode as JSON: %w", err)
	}
	return nil
}

func walk(v reflect.Value, path string) error {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == quantityType {
		q := v.Interface().(resource.Quantity)
		if q.Sign() < 0 || q.Cmp(api.MaxQuantityValue()) > 0 {
			return fmt.Errorf("%s = %s: outside [0, %d]", path, q.String(), int64(api.MaxQuantity))
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s = %v: not finite", path, f)
		}
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return fmt.Errorf("%s = %q: not valid UTF-8", path, v.String())
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return walk(v.Elem(), path)
		}
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Struct:
		return walkElements(v, path)
	}
	return nil
}

// walkElements walks the elements of a list, the keys and values of a map
// or the exported fields of a struct.
func walkElements(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			if err := walk(it.Key(), path+" key"); err != nil {
				return err
			}
			if err := walk(it.Value(), path+"["+k+"]"); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if err := walk(v.Field(i), path+"."+f.Name); err != nil {
					return err
				}
			}
		}
	default:
		for i := range v.Len() {
			if err := walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
