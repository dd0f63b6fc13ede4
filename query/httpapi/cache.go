package httpapi

import (
	"container/list"
	"sync"
	"time"
)

// answer is an encoded 200 answer and its headers.
type answer struct {
	body   []byte
	sql    string
	table  string
	tables []string
}

// cache keeps answers by request for a short time, bounded in bytes: the oldest go first.
type cache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	size    int
	order   *list.List // of *cacheEntry, oldest first
	entries map[string]*list.Element
}

type cacheEntry struct {
	key     string
	a       *answer
	expires time.Time
}

func newCache(ttl time.Duration, maxBytes int) *cache {
	return &cache{ttl: ttl, max: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

func (e *cacheEntry) bytes() int {
	return len(e.key) + len(e.a.body) + len(e.a.sql) + len(e.a.table) + 16*len(e.a.tables) + 64
}

func (c *cache) get(key string, now time.Time) *answer {
	if c.ttl <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		return nil
	}
	return e.a
}

func (c *cache) put(key string, a *answer, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	e := &cacheEntry{key: key, a: a, expires: now.Add(c.ttl)}
	if e.bytes() > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	// Expired entries first, then the oldest until the new one fits.
	for el := c.order.Front(); el != nil && (c.size+e.bytes() > c.max || !now.Before(el.Value.(*cacheEntry).expires)); el = c.order.Front() {
		c.remove(el)
	}
	c.entries[key] = c.order.PushBack(e)
	c.size += e.bytes()
}

func (c *cache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.size -= e.bytes()
}
