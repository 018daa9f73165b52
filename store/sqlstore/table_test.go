package sqlstore

import "testing"

func TestTableQuoting(t *testing.T) {
	tests := []struct {
		in, pg, mysql, index string
	}{
		{"records", `"records"`, "`records`", `"records_expires_at"`},
		{"app.Records", `"app"."Records"`, "`app`.`Records`", `"app"."Records_expires_at"`},
	}
	for _, tt := range tests {
		tb, err := parseTable(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := tb.ref(doubleQuote); got != tt.pg {
			t.Errorf("%s: PostgreSQL reference %s, want %s", tt.in, got, tt.pg)
		}
		if got := tb.ref(backquote); got != tt.mysql {
			t.Errorf("%s: MySQL reference %s, want %s", tt.in, got, tt.mysql)
		}
		if got := tb.qualify(doubleQuote, tb.index()); got != tt.index {
			t.Errorf("%s: SQLite index %s, want %s", tt.in, got, tt.index)
		}
		if got := tb.String(); got != tt.in {
			t.Errorf("String() = %s, want %s", got, tt.in)
		}
	}
}
