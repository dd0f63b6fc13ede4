package storetest

import (
	"testing"
	"time"
)

// TestBase checks that the tests' two hours from base stay in one day and one month of the
// local time zone, on days around the month's and the year's ends, in zones with offsets of
// whole, half and quarter hours and with daylight saving time.
func TestBase(t *testing.T) {
	for _, zone := range []string{"UTC", "Europe/Paris", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Pacific/Kiritimati", "Pacific/Pago_Pago"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Skipf("no time zone data: %v", err)
		}
		for _, day := range []string{"2026-11-26", "2026-12-31", "2027-01-01", "2027-03-28", "2027-10-31", "2028-02-29"} {
			d, err := time.ParseInLocation(time.DateOnly, day, loc)
			if err != nil {
				t.Fatal(err)
			}
			for h := range 48 {
				now := d.Add(time.Duration(h)*time.Hour + 17*time.Minute)
				b := base(now)
				first, last := time.Unix(int64(b), 0).In(loc), time.Unix(int64(b)+2*3600-1, 0).In(loc)
				if first.YearDay() != last.YearDay() || first.Month() != last.Month() || b%3600 != 0 {
					t.Errorf("%s, now %s: base %s to %s", zone, now, first, last)
				}
				if age := now.Sub(time.Unix(int64(b), 0)); age < 5*time.Hour || age > 38*time.Hour {
					t.Errorf("%s, now %s: base %s is %s old", zone, now, first, age)
				}
			}
		}
	}
}
