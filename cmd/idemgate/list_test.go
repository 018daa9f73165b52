package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// listJSON runs list -json with args and returns the keys by status and
// the next cursor.
func listJSON(t *testing.T, url string, args ...string) (map[string]string, string) {
	t.Helper()
	r := idemgate(t, "", append([]string{"list", "-store", url, "-json"}, args...)...)
	if r.code != exitOK {
		t.Fatalf("list -json %q = %d, stderr %q", args, r.code, r.stderr)
	}
	got := map[string]string{}
	var next string
	for line := range strings.Lines(r.stdout) {
		var j struct {
			Key, Status, For string
			Next             *string
		}
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("list -json line %q: %v", line, err)
		}
		if j.Next != nil {
			next = *j.Next
			continue
		}
		if _, dup := got[j.Key]; dup || j.For == "" {
			t.Errorf("list -json: %q listed twice, or without its age: %s", j.Key, line)
		}
		got[j.Key] = j.Status
	}
	return got, next
}

func TestList(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url := b.url(t)
			seed(t, url)
			all := map[string]string{"held": "held", "done": "done", "released": "released"}

			// Every record, in text: one line each, and the end.
			r := idemgate(t, "", "list", "-store", url)
			if r.code != exitOK || !strings.Contains(r.stdout, "KEY ") || !strings.HasSuffix(r.stdout, "end of the listing.\n") {
				t.Fatalf("list = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			for key, status := range all {
				if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool {
					f := strings.Fields(l)
					return len(f) > 2 && f[0] == `"`+key+`"` && f[1] == status
				}) {
					t.Errorf("list does not show %q as %s:\n%s", key, status, r.stdout)
				}
			}

			// By state, by prefix, by age.
			for _, tt := range []struct {
				args []string
				want map[string]string
			}{
				{nil, all},
				{[]string{"-state", "done,released"}, map[string]string{"done": "done", "released": "released"}},
				{[]string{"-prefix", "h"}, map[string]string{"held": "held"}},
				{[]string{"-prefix", "el"}, map[string]string{}},
				{[]string{"-older", "1h"}, map[string]string{}},
			} {
				got, next := listJSON(t, url, tt.args...)
				if !sameMap(got, tt.want) || next != "" {
					t.Errorf("list %q = %v, next %q; want %v and no next page", tt.args, got, next, tt.want)
				}
			}

			// Pages of one, each record once.
			got, cursor := map[string]string{}, ""
			for range 10 {
				page, next := listJSON(t, url, "-limit", "1", "-cursor", cursor)
				for k, s := range page {
					if _, dup := got[k]; dup {
						t.Errorf("list in pages of 1 listed %q twice", k)
					}
					got[k] = s
				}
				if cursor = next; cursor == "" {
					break
				}
			}
			if !sameMap(got, all) || cursor != "" {
				t.Errorf("list in pages of 1 = %v, last cursor %q; want %v", got, cursor, all)
			}

			// The next page's command, as printed, runs (with -store).
			r = idemgate(t, "", "list", "-store", url, "-limit", "2", "-state", "held,done,released")
			_, line, ok := strings.Cut(r.stdout, "next page: idemgate ")
			if r.code != exitOK || !ok || !strings.Contains(r.stdout, "2 records on this page") {
				t.Fatalf("list -limit 2 = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r = idemgate(t, "", append(strings.Fields(strings.TrimSpace(line)), "-store", url)...)
			if r.code != exitOK || !strings.Contains(r.stdout, "1 records on this page") || !strings.HasSuffix(r.stdout, "end of the listing.\n") {
				t.Errorf("the next page's command %q = %d:\n%s\n%s", line, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// sameMap reports whether a and b hold the same pairs.
func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestListUsage(t *testing.T) {
	for _, args := range [][]string{
		{"list", "-store", "sqlite:///nowhere.db", "-state", "stuck"},
		{"list", "-store", "sqlite:///nowhere.db", "-limit", "5000"},
		{"list", "-store", "sqlite:///nowhere.db", "-older", "-1m"},
		{"list", "-store", "sqlite:///nowhere.db", "order-1"},
	} {
		r := idemgate(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("%q = %d, want %d (usage)", args, r.code, exitUsage)
		}
		r.oneErrorLine(t, "")
	}
}
