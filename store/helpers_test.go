package store

import (
	"io"
	"log/slog"

	"flowzero/schema"
)

func quietTestLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestDDLNoT is the default DDL, for fuzz setup.
func newTestDDLNoT() *DDL {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		panic(err)
	}
	return NewDDL(DefaultConfiguration(), s, "/proto")
}
