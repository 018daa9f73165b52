package sqlstore

import (
	"regexp"
	"strconv"
	"strings"
)

// query is one statement of a store. It is written once with numbered
// placeholders ($1, $2, …), which PostgreSQL and SQLite take as they are,
// and rendered with positional '?' placeholders for MySQL, whose driver
// binds arguments in order of appearance.
type query struct {
	text string
	// order lists, for positional placeholders, which argument (1-based)
	// each '?' takes. nil for numbered placeholders.
	order []int
}

var placeholderRE = regexp.MustCompile(`\$([1-9][0-9]*)`)

// numbered returns text as a query with numbered placeholders.
func numbered(text string) query { return query{text: text} }

// positional rewrites the numbered placeholders of text to '?' and records
// which argument each one takes, so that "$1 … $2 … $1" binds a, b, a.
func positional(text string) query {
	q := query{order: []int{}}
	q.text = placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		n, _ := strconv.Atoi(m[1:]) // the pattern admits only digits
		q.order = append(q.order, n)
		return "?"
	})
	return q
}

// args lays out the statement's arguments, given in the order of their
// numbers, as the rendered text wants them.
func (q query) args(a ...any) []any {
	if q.order == nil {
		return a
	}
	out := make([]any, len(q.order))
	for i, n := range q.order {
		out[i] = a[n-1]
	}
	return out
}

// expand replaces each {NAME} in tmpl by vars["NAME"]. Values are
// expanded once, in the order given, so a value may itself hold names
// that a later pair replaces.
func expand(tmpl string, vars ...string) string {
	for i := 0; i+1 < len(vars); i += 2 {
		tmpl = strings.ReplaceAll(tmpl, "{"+vars[i]+"}", vars[i+1])
	}
	return tmpl
}
