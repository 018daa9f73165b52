// Package layout describes, once for both Google stores, how a record and
// an outbox message are stored: each field's name, index, omission and Go
// value. It is the stored format, so existing data must still read.
package layout

import (
	"fmt"
	"slices"
)

// Field is one stored field of a T.
type Field[T any] struct {
	Name    string
	Indexed bool               // by Datastore; every other field is NoIndex
	Omit    func(*T) bool      // left out of a write (and deleted by an update) when true; nil: always written
	Get     func(*T) any       // the value stored
	Set     func(*T, any) bool // sets the field from a value read; false for one of the wrong type
}

// Fields is a stored layout: the fields of a T.
type Fields[T any] []Field[T]

func of[T, V any](name string, p func(*T) *V) Field[T] {
	return Field[T]{
		Name: name,
		Get:  func(t *T) any { return *p(t) },
		Set: func(t *T, v any) bool {
			x, ok := v.(V)
			if ok {
				*p(t) = x
			}
			return ok
		},
	}
}

// Encode calls put with each field of t that a write stores.
func (fs Fields[T]) Encode(t *T, put func(f *Field[T], v any)) {
	for i := range fs {
		if f := &fs[i]; f.Omit == nil || !f.Omit(t) {
			put(f, f.Get(t))
		}
	}
}

// Decode sets the field of t named name to v. An unknown name is ignored,
// so operators may annotate what is stored; a wrong type is an error.
func (fs Fields[T]) Decode(t *T, name string, v any, what string) error {
	i := slices.IndexFunc(fs, func(f Field[T]) bool { return f.Name == name })
	if i >= 0 && !fs[i].Set(t, v) {
		return fmt.Errorf("%s %q holds a %T", what, name, v)
	}
	return nil
}
