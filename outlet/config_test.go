package outlet

import (
	"strings"
	"testing"
	"time"
)

func TestConfigurationValidate(t *testing.T) {
	if err := DefaultConfiguration().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		change func(*Configuration)
		key    string
	}{
		{func(c *Configuration) { c.Group = "" }, "group"},
		{func(c *Configuration) { c.CommitInterval = time.Millisecond }, "commit-interval"},
		{func(c *Configuration) { c.SessionTimeout = 0 }, "session-timeout"},
		{func(c *Configuration) { c.MaxPollRecords = 0 }, "max-poll-records"},
		{func(c *Configuration) { c.MaxFetchBytes = 1 }, "max-fetch-bytes"},
		{func(c *Configuration) { c.MaxFetchBytes = 200 << 20 }, "max-fetch-bytes"},
		{func(c *Configuration) { c.MaxUnitBytes = 1 }, "max-unit-bytes"},
		{func(c *Configuration) { c.TemplateWait = 0 }, "template-wait"},
		{func(c *Configuration) { c.State.Topic = "" }, "state.topic"},
	} {
		c := DefaultConfiguration()
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: got %v, want an error naming the key", tc.key, err)
		}
	}
}

// TestTags: a datagram's partition and offset go through the tag and back.
func TestTags(t *testing.T) {
	for _, c := range []struct {
		p   int32
		off int64
	}{{0, 0}, {3, 12345}, {65535, 1<<48 - 1}} {
		p, off := splitTag(tagOf(c.p, c.off))
		if p != c.p || off != c.off {
			t.Errorf("tag of (%d, %d) gives (%d, %d)", c.p, c.off, p, off)
		}
	}
}
