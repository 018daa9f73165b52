package sqlstore_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
)

// spyConnector wraps a driver.Connector to count the statements that its
// connections execute and, on demand, to lose a statement's reply: the
// statement runs and commits, but its caller gets errLostReply.
type spyConnector struct {
	driver.Connector
	stmts    atomic.Int64 // statements executed, prepared or not
	prepares atomic.Int64 // server-side statements prepared
	loseNext atomic.Bool  // lose the reply of the next statement
}

var errLostReply = errors.New("spy: reply lost on the way back")

func (c *spyConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &spyConn{Conn: conn, spy: c}, nil
}

// executed counts a statement that ran and reports whether its reply is to
// be lost.
func (c *spyConnector) executed() (lose bool) {
	c.stmts.Add(1)
	return c.loseNext.CompareAndSwap(true, false)
}

// spyConn forwards every optional interface that the three drivers
// implement, so that database/sql behaves as it would without the spy.
type spyConn struct {
	driver.Conn
	spy *spyConnector
}

func (c *spyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) { // database/sql will prepare instead
		return nil, err
	}
	if c.spy.executed() && err == nil {
		return nil, errLostReply
	}
	return res, err
}

func (c *spyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	if c.spy.executed() && err == nil {
		return nil, drain(rows)
	}
	return rows, err
}

// drain reads rows to the end, as a client does before the reply is lost,
// so that the statement completes on the server.
func drain(rows driver.Rows) error {
	dest := make([]driver.Value, len(rows.Columns()))
	for rows.Next(dest) == nil {
	}
	rows.Close()
	return errLostReply
}

func (c *spyConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.spy.prepares.Add(1)
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &spyStmt{Stmt: st, spy: c.spy}, nil
}

func (c *spyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *spyConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *spyConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *spyConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *spyConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip // database/sql's default conversion
}

type spyStmt struct {
	driver.Stmt
	spy *spyConnector
}

func (s *spyStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if s.spy.executed() && err == nil {
		return nil, errLostReply
	}
	return res, err
}

func (s *spyStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if s.spy.executed() && err == nil {
		return nil, drain(rows)
	}
	return rows, err
}

func (s *spyStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
