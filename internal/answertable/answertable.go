// Package answertable reads the table of answers per platform in
// docs/design.md, so that each surface's test can hold its column: the
// answer of a cell is the text between its first pair of backquotes (a
// status code, ack or nack), or "" for a cell without one (—).
package answertable

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Heading is the section of docs/design.md that holds the table.
const Heading = "## Answers per platform"

// Table maps each row's outcome (the first cell's answer, e.g. "conflict")
// to the answer in each column, by the column's heading.
type Table map[string]map[string]string

// Read reads the table from the markdown file at path.
func Read(path string) (Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, sec, ok := strings.Cut("\n"+string(b), "\n"+Heading+"\n")
	if !ok {
		return nil, fmt.Errorf("answertable: %s has no section %q", path, Heading)
	}
	var head []string
	t := Table{}
	for line := range strings.SplitSeq(sec, "\n") {
		if strings.HasPrefix(line, "## ") {
			break // the next section
		}
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := split(line)
		switch {
		case head == nil:
			head = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			if len(cells) != len(head) {
				return nil, fmt.Errorf("answertable: row %q has %d cells, want %d", line, len(cells), len(head))
			}
			row := map[string]string{}
			for i, c := range cells[1:] {
				row[head[i+1]] = answer(c)
			}
			t[answer(cells[0])] = row
		}
	}
	if len(t) == 0 {
		return nil, errors.New("answertable: the section holds no table")
	}
	return t, nil
}

// Column returns the answers of the column headed col, by row.
func (t Table) Column(col string) map[string]string {
	out := map[string]string{}
	for row, cells := range t {
		if a, ok := cells[col]; ok {
			out[row] = a
		}
	}
	return out
}

func split(line string) []string {
	cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// answer is the text between the first pair of backquotes in cell.
func answer(cell string) string {
	_, rest, ok := strings.Cut(cell, "`")
	if !ok {
		return ""
	}
	a, _, _ := strings.Cut(rest, "`")
	return a
}
