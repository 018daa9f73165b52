package sqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqliteError has the Code method of modernc.org/sqlite's *Error, whose
// fields cannot be set from outside that package.
type sqliteError int

func (e sqliteError) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e sqliteError) Code() int     { return int(e) }

// MySQLError mimics the driver's type by name, in the wrong package.
type MySQLError struct{ Number uint16 }

func (e *MySQLError) Error() string { return "lookalike" }

func TestTransient(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	tests := []struct {
		name string
		f    func(error) bool
		err  error
		want bool
	}{
		{"pg serialization failure", pgTransient, &pgconn.PgError{Code: "40001"}, true},
		{"pg deadlock", pgTransient, wrap(&pgconn.PgError{Code: "40P01"}), true},
		{"pg unique violation", pgTransient, &pgconn.PgError{Code: "23505"}, false},
		{"pg other error", pgTransient, driver.ErrBadConn, false},
		{"mysql deadlock", mysqlTransient, &mysql.MySQLError{Number: 1213}, true},
		{"mysql deadlock wrapped", mysqlTransient, wrap(&mysql.MySQLError{Number: 1213}), true},
		{"mariadb record changed", mysqlTransient, &mysql.MySQLError{Number: 1020}, true},
		{"mysql lock wait timeout", mysqlTransient, &mysql.MySQLError{Number: 1205}, false},
		{"mysql duplicate key", mysqlTransient, &mysql.MySQLError{Number: 1062}, false},
		{"mysql lookalike type", mysqlTransient, &MySQLError{Number: 1213}, false},
		{"mysql plain error", mysqlTransient, errors.New("Error 1213"), false},
		{"sqlite busy", sqliteTransient, sqliteError(5), true},
		{"sqlite busy snapshot", sqliteTransient, wrap(sqliteError(5 | 2<<8)), true},
		{"sqlite locked", sqliteTransient, sqliteError(6), true},
		{"sqlite constraint", sqliteTransient, sqliteError(19), false},
		{"sqlite other error", sqliteTransient, errors.New("busy"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f(tt.err); got != tt.want {
				t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
