package firestorestore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/idemgate/idemgate/store/internal/layout"
	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"
)

const (
	// maxIDLen is the longest document or collection ID Firestore accepts.
	maxIDLen = 1500
	// hashPrefix starts every hashed ID. Keys starting with it are hashed
	// too, so a hashed ID never equals a key used as an ID.
	hashPrefix = "sha256:"
)

// validID reports whether Firestore accepts s as a document or collection ID.
func validID(s string) bool {
	return s != "" && len(s) <= maxIDLen && utf8.ValidString(s) &&
		!strings.Contains(s, "/") && s != "." && s != ".." &&
		!(len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__"))
}

// docID returns the document ID for key and whether it is a hash.
func docID(key string) (id string, hashed bool) {
	if validID(key) && !strings.HasPrefix(key, hashPrefix) {
		return key, false
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:]), true
}

// docRef returns key's document and whether its ID is hashed.
func (s *Store) docRef(key string) (*firestore.DocumentRef, bool) {
	id, hashed := docID(key)
	return s.coll.Doc(id), hashed
}

// fields returns the document of a new record, in layout.Record.
func fields(r *record.Record) map[string]any { return encode(layout.Record, r, nil) }

// updates returns the changes that turn a stored record into r, deleting
// the optional fields r does not hold; the key never changes.
func updates(r *record.Record) []firestore.Update {
	return changes(layout.Record, r, func(name string) bool { return name != layout.Key }, nil)
}

// parse reads a record. A known field of the wrong type, or an unknown
// state, is an error; unknown fields are ignored.
func parse(data map[string]any) (record.Record, error) {
	var r record.Record
	if err := decode(layout.Record, &r, data, nil); err != nil {
		return record.Record{}, err
	}
	if err := layout.CheckRecord(&r, "field"); err != nil {
		return record.Record{}, err
	}
	return r, nil
}

// encode returns the document of t in layout fs, each value converted by enc if set.
func encode[T any](fs layout.Fields[T], t *T, enc func(name string, v any) any) map[string]any {
	m := map[string]any{}
	fs.Encode(t, func(f *layout.Field[T], v any) {
		if enc != nil {
			v = enc(f.Name, v)
		}
		m[f.Name] = v
	})
	return m
}

// changes returns the updates of the fields of t for which write is true,
// deleting those an encoding would leave out.
func changes[T any](fs layout.Fields[T], t *T, write func(name string) bool, enc func(name string, v any) any) []firestore.Update {
	var us []firestore.Update
	for _, f := range fs {
		if !write(f.Name) {
			continue
		}
		var v any = firestore.Delete
		if f.Omit == nil || !f.Omit(t) {
			v = f.Get(t)
			if enc != nil {
				v = enc(f.Name, v)
			}
		}
		us = append(us, firestore.Update{Path: f.Name, Value: v})
	}
	return us
}

// decode sets t from data in layout fs, each value converted by dec if set.
func decode[T any](fs layout.Fields[T], t *T, data map[string]any, dec func(name string, v any) (any, error)) error {
	for name, v := range data {
		if dec != nil {
			var err error
			if v, err = dec(name, v); err != nil {
				return err
			}
		}
		if err := fs.Decode(t, name, v, "field"); err != nil {
			return err
		}
	}
	return nil
}
