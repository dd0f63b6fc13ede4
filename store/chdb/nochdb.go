//go:build !chdb

package chdb

// Built reports whether this binary carries the chDB engine.
const Built = false

// Conn is a connection to the embedded engine; without the chdb tag none can be opened.
type Conn struct{}

// Version returns "" without chDB.
func Version() string { return "" }

// Open returns ErrNotBuilt: this binary was built without the chdb tag.
func Open(path string, args ...string) (*Conn, error) { return nil, ErrNotBuilt }

// Path returns "".
func (c *Conn) Path() string { return "" }

// Query returns ErrNotBuilt.
func (c *Conn) Query(sql, format string) ([]byte, error) { return nil, ErrNotBuilt }

// Exec returns ErrNotBuilt.
func (c *Conn) Exec(sql string) error { return ErrNotBuilt }

// QueryResult returns ErrNotBuilt.
func (c *Conn) QueryResult(sql, format string) (Result, error) { return Result{}, ErrNotBuilt }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// QueryBytes returns ErrNotBuilt.
func (c *Conn) QueryBytes(stmt []byte, format string) (Result, error) { return Result{}, ErrNotBuilt }

// Insert returns ErrNotBuilt.
func (c *Conn) Insert(query, format string, chunks ...[]byte) (Result, error) {
	return Result{}, ErrNotBuilt
}
