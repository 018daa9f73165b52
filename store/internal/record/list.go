package record

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// EncodeCursor makes an opaque list cursor of parts, which must hold no
// NUL byte (keys never do).
func EncodeCursor(parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, "\x00")))
}

// DecodeCursor returns the n parts of a cursor made by EncodeCursor, or an
// error wrapping store.ErrInvalidCursor.
func DecodeCursor(c string, n int) ([]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(b), "\x00")
	if err != nil || len(parts) != n {
		return nil, fmt.Errorf("%w %.40q", store.ErrInvalidCursor, c)
	}
	return parts, nil
}

// Named is a record as a query by name returns it: the entity name or
// document ID, and the record it holds.
type Named struct {
	Name   string
	Record Record
}

// Scan returns at most n records in name order: those whose name is above
// after or, when after is "", not below from ("" for no bound).
type Scan func(ctx context.Context, from, after string, n int) ([]Named, error)

// MaxListReads bounds the records List reads for one page.
const MaxListReads = 1000

// List implements store.Lister for the stores that keep a record under its
// key, or under hashPrefix and the key's hash: it scans the names with the
// listing's prefix, then every hashed name, so keys come in key order and
// hashed ones last. A page ends after o.Limit records or MaxListReads
// records read; the cursor is the range and the last name read.
func (p Rules) List(ctx context.Context, opts store.ListOptions, now func() time.Time, hashPrefix string, scan Scan) (store.ListPage, error) {
	o, err := opts.Check()
	if err != nil {
		return store.ListPage{}, err
	}
	hashed, after := false, ""
	if o.Cursor != "" {
		c, err := DecodeCursor(o.Cursor, 2)
		if err != nil {
			return store.ListPage{}, err
		}
		hashed, after = c[0] == "h", c[1]
	}
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, err
	}
	var (
		page  store.ListPage
		reads int
	)
	cursor := func() string {
		if hashed {
			return EncodeCursor("h", after)
		}
		return EncodeCursor("k", after)
	}
	for {
		from, within := o.Prefix, o.Prefix
		if hashed {
			from, within = hashPrefix, hashPrefix
		}
		if reads >= MaxListReads {
			page.Next = cursor()
			return page, nil
		}
		n := min(max(o.Limit+1, 100), MaxListReads-reads)
		batch, err := scan(ctx, from, after, n)
		if err != nil {
			return store.ListPage{}, err
		}
		t := now()
		end := len(batch) < n
		for _, b := range batch {
			if !strings.HasPrefix(b.Name, within) {
				end = true
				break
			}
			if len(page.Records) == o.Limit {
				page.Next = cursor()
				return page, nil
			}
			reads++
			after = b.Name
			key := b.Name
			if strings.HasPrefix(b.Name, hashPrefix) {
				if !hashed {
					continue // listed with the hashed names
				}
				key = b.Record.Key
			}
			r := b.Record
			if v, ok := p.View(&r, key, t); ok && o.Match(v) {
				page.Records = append(page.Records, v)
			}
		}
		if end {
			if hashed {
				return page, nil
			}
			hashed, after = true, ""
		}
	}
}
