package datastorestore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store/internal/layout"
	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/datastore"
)

const (
	// maxNameLen is the longest entity name (and kind) Datastore accepts.
	maxNameLen = 1500
	// hashPrefix starts every hashed name. Keys starting with it are hashed
	// too, so a hashed name never equals a key used as a name.
	hashPrefix = "sha256:"
)

// entityName returns the entity name for key and whether it is a hash.
func entityName(key string) (name string, hashed bool) {
	if len(key) <= maxNameLen && !reserved(key) && !strings.HasPrefix(key, hashPrefix) {
		return key, false
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:]), true
}

// entityKey returns the Datastore key of key's record and whether it is hashed.
func (s *Store) entityKey(key string) (*datastore.Key, bool) {
	name, hashed := entityName(key)
	return s.nameKey("", name), hashed
}

// nameKey returns the key of the entity named name, of the records' kind
// plus suffix, in the store's namespace.
func (s *Store) nameKey(suffix, name string) *datastore.Key {
	k := datastore.NameKey(s.kind+suffix, name, nil)
	k.Namespace = s.namespace
	return k
}

// entity is a record as Datastore loads and saves it, in layout.Record.
type entity record.Record

// Save implements datastore.PropertyLoadSaver.
func (r *entity) Save() ([]datastore.Property, error) {
	return save(layout.Record, (*record.Record)(r), nil)
}

// Load implements datastore.PropertyLoadSaver. A known property of the
// wrong type, or an unknown state, is an error; unknown properties are ignored.
func (r *entity) Load(ps []datastore.Property) error {
	*r = entity{}
	if err := load(layout.Record, (*record.Record)(r), ps, nil); err != nil {
		return err
	}
	return layout.CheckRecord((*record.Record)(r), "property")
}

// save returns the properties of t in layout fs, each converted by enc if set.
func save[T any](fs layout.Fields[T], t *T, enc func(name string, v any) (any, error)) ([]datastore.Property, error) {
	var ps []datastore.Property
	var err error
	fs.Encode(t, func(f *layout.Field[T], v any) {
		if enc != nil && err == nil {
			v, err = enc(f.Name, v)
		}
		ps = append(ps, datastore.Property{Name: f.Name, Value: v, NoIndex: !f.Indexed})
	})
	return ps, err
}

// load sets t from ps in layout fs, each converted by dec if set.
func load[T any](fs layout.Fields[T], t *T, ps []datastore.Property, dec func(name string, v any) (any, error)) error {
	for _, p := range ps {
		v := p.Value
		if dec != nil {
			var err error
			if v, err = dec(p.Name, v); err != nil {
				return fmt.Errorf("property %q: %w", p.Name, err)
			}
		}
		if err := fs.Decode(t, p.Name, v, "property"); err != nil {
			return err
		}
	}
	return nil
}
