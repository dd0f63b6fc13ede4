package store

import (
	"io"
	"log/slog"
	"time"

	"flowzero/internal/testutil"
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

// baseTime is the Unix time the test flows are received from (they span at most two hours
// after it), derived from the test clock: about 06:00 local time on the day that started
// 12 to 36 hours ago, rounded down to a whole hour of the epoch. The flows are between 6
// and 32 hours old, well within the default TTLs (7 days at least), and never cross
// midnight: the tables' daily partitions (toYYYYMMDD, in the engine's time zone, which
// reads TZ or /etc/localtime as Go does) and monthly ones hold a test's flows in one
// partition, so that an INSERT writes one part per table whatever the date and time zone.
var baseTime = testBase(testutil.Now())

func testBase(now time.Time) uint64 {
	day := now.Add(-12 * time.Hour)
	midnight := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, day.Location())
	return uint64(midnight.Add(6*time.Hour).Unix() / 3600 * 3600)
}
