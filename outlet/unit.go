package outlet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UnitSink is a sink that stores each unit of the outlet's work once: a partition's flows of a
// range of offsets, inserted in one call with a token naming the range
// (<topic>-<partition>-<first>-<last>). Inserting the same unit again with the same token
// stores nothing (store.Sink.InsertUnit and its deduplication tokens), so the datagrams the
// outlet decodes again after a crash or a rebalance are not stored twice, provided the units
// are cut the same way: see unit and Outlet.closeUnitsLocked.
type UnitSink interface {
	InsertUnit(ctx context.Context, token string, data []byte, flows int) error
}

// A unit is the flows of one partition's datagrams at offsets [first, end), in offset order
// except for the data sets that waited for a template.
//
// Units must come out the same when the datagrams are decoded again from the committed
// offset, or the tokens would differ and the flows be stored twice. So a partition's committed
// offset is always the start of a unit, and before a unit is inserted its end is recorded in
// the metadata of an offset commit at its start ("flowzero-unit <first> <end>"): whichever
// outlet consumes the partition next from that offset, this one after a rewind or another
// after a crash, reads the metadata and cuts its first unit at that end. A unit is closed at
// a commit, once none of its data sets waits for a template (their flows go into it when
// released, so the unit's rows are all there before it is inserted).
type unit struct {
	first int64
	end   int64 // set when cut at a planned end; 0 while open
	data  []byte
	flows int
}

// unitMetadata is the prefix of the commit metadata recording a unit's range.
const unitMetadata = "flowzero-unit"

func planMetadata(first, end int64) string { return fmt.Sprintf("%s %d %d", unitMetadata, first, end) }

func parsePlan(meta string) (first, end int64, ok bool) {
	if !strings.HasPrefix(meta, unitMetadata+" ") {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(meta, unitMetadata+" %d %d", &first, &end); err != nil || end <= first {
		return 0, 0, false
	}
	return first, end, true
}

// unitToken is the deduplication token of a unit: topic, partition, first and last offset.
func (o *Outlet) unitToken(p int32, u *unit, end int64) string {
	return fmt.Sprintf("%s-%d-%d-%d", o.topic.Topic, p, u.first, end-1)
}

// plan is a unit's range read from the commit metadata of a partition.
type plan struct{ first, end int64 }

// assigned reads the planned units of the partitions this outlet gets (unit sinks only).
func (o *Outlet) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if len(o.unitSinks) == 0 || len(assigned[o.topic.Topic]) == 0 {
		return
	}
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, o.cfg.Group)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		// Without the plans, a unit decoded again may be cut elsewhere and stored twice.
		o.m.errors.WithLabelValues("plan").Inc()
		o.log.Warn("outlet: cannot read the planned units of the partitions assigned (flows decoded again may be stored twice)", "error", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range assigned[o.topic.Topic] {
		delete(o.plans, p)
		r, ok := offsets.Lookup(o.topic.Topic, p)
		if !ok {
			continue
		}
		if first, end, ok := parsePlan(r.Metadata); ok && first == r.At {
			o.plans[p] = plan{first, end}
		}
	}
}

// unitFor returns the unit that gets the flows of the datagram at offset off of partition ps.
func unitFor(ps *partition, off int64) *unit {
	if ps.cut != nil && off < ps.cut.end {
		return ps.cut
	}
	return &ps.open
}

// heldIn tells whether a data set of partition p's datagrams in [from, to) waits for a
// template.
func (o *Outlet) heldIn(p int32, from, to int64) bool {
	for tag, n := range o.held {
		if n <= 0 {
			continue
		}
		if tp, off := splitTag(tag); tp == p && off >= from && off < to {
			return true
		}
	}
	return false
}

// closeUnitsLocked inserts the units that can be closed into every unit sink and returns, per
// partition, the offset up to which its datagrams are stored (o.mu held). A partition's units
// wait while one of their data sets is held, or while a planned end is not reached yet.
func (o *Outlet) closeUnitsLocked(ctx context.Context) (map[int32]int64, error) {
	upTo := map[int32]int64{}
	// Units cut at a planned end: their range is recorded already.
	for p, ps := range o.parts {
		if ps.cut == nil || o.heldIn(p, ps.cut.first, ps.cut.end) {
			continue
		}
		if err := o.insertUnit(ctx, p, ps.cut, ps.cut.end); err != nil {
			return nil, err
		}
		ps.cut = nil
		upTo[p] = ps.open.first
	}
	// Open units: their end is the next offset to read, recorded before they are inserted
	// (unless it is the planned end).
	plans := map[int32]plan{}
	for p, ps := range o.parts {
		u := &ps.open
		switch {
		case ps.cut != nil, ps.next <= u.first, ps.planned > u.first && ps.next < ps.planned,
			o.heldIn(p, u.first, ps.next):
			continue
		}
		plans[p] = plan{u.first, ps.next}
	}
	record := map[int32]plan{}
	for p, pl := range plans {
		if o.parts[p].open.flows > 0 && o.parts[p].planned != pl.end {
			record[p] = pl
		}
	}
	if err := o.recordPlans(ctx, record); err != nil {
		return nil, err
	}
	for p, pl := range plans {
		ps := o.parts[p]
		if _, ok := record[p]; ok {
			ps.committed, ps.planned = pl.first, pl.end
		}
		if err := o.insertUnit(ctx, p, &ps.open, pl.end); err != nil {
			return nil, err
		}
		ps.open = unit{first: pl.end, data: ps.open.data[:0]}
		upTo[p] = pl.end
	}
	return upTo, nil
}

// insertUnit inserts u, ending at end, into every unit sink.
func (o *Outlet) insertUnit(ctx context.Context, p int32, u *unit, end int64) error {
	if u.flows == 0 {
		return nil
	}
	token := o.unitToken(p, u, end)
	for _, s := range o.unitSinks {
		if err := s.InsertUnit(ctx, token, u.data, u.flows); err != nil {
			return fmt.Errorf("unit %s: %w", token, err)
		}
	}
	o.m.units.Inc()
	return nil
}

// recordPlans commits each partition's offset at the start of its next unit with the unit's
// range as metadata, as a member of the group (the consumer's own commits carry no metadata).
func (o *Outlet) recordPlans(ctx context.Context, plans map[int32]plan) error {
	if len(plans) == 0 {
		return nil
	}
	if o.topicID == ([16]byte{}) {
		// OffsetCommit v10 names topics by ID.
		topics, err := kadm.NewClient(o.client).ListTopics(ctx, o.topic.Topic)
		if err == nil {
			err = topics.Error()
		}
		if err != nil {
			return fmt.Errorf("recording the units' ranges: %w", err)
		}
		o.topicID = topics[o.topic.Topic].ID
	}
	member, generation := o.client.GroupMetadata()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = o.cfg.Group, generation, member
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic, t.TopicID = o.topic.Topic, o.topicID
	for p, pl := range plans {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, pl.first, -1
		meta := planMetadata(pl.first, pl.end)
		rp.Metadata = &meta
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, o.client)
	if err != nil {
		return fmt.Errorf("recording the units' ranges: %w", err)
	}
	var errs []error
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if e := kerrOf(rp.ErrorCode); e != nil {
				errs = append(errs, fmt.Errorf("recording the range of partition %d's unit: %w", rp.Partition, e))
			}
		}
	}
	return errors.Join(errs...)
}
