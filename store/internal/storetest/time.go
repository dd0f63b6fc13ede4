package storetest

import (
	"time"

	"flowzero/internal/testutil"
)

// BaseTime is the Unix time the test flows are received from (they span at most two hours
// after it), derived from the test clock: about 06:00 local time on the day that started
// 12 to 36 hours ago, rounded down to a whole hour of the epoch. The flows never cross
// midnight: the tables' daily partitions (toYYYYMMDD, in the engine's time zone, which reads
// TZ or /etc/localtime as Go does) and monthly ones hold a test's flows in one partition, so
// that an INSERT writes one part per table whatever the date and time zone. The tables keep
// them whatever their age (tests set no TTL unless they are about retention): Go's test
// clock may be moved (FLOWZERO_TEST_CLOCK_OFFSET), the engine's cannot be (EngineNow).
var BaseTime = base(testutil.Now())

// CaptureTime is when the flows of the captures are received (CaptureMessages): within the
// tests' two hours, after the synthetic flows' first minutes.
var CaptureTime = BaseTime + 1800

func base(now time.Time) uint64 {
	day := now.Add(-12 * time.Hour)
	midnight := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, day.Location())
	return uint64(midnight.Add(6*time.Hour).Unix() / 3600 * 3600)
}
