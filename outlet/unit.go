package outlet

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// ReplaySink is a UnitSink that checks a unit cut at a range recorded before (which an
// earlier insert may have stored, in part or not at all) against what it holds:
// store.Sink.InsertReplayedUnit.
type ReplaySink interface {
	InsertReplayedUnit(ctx context.Context, token string, partition int32, first, end int64, data []byte, flows int) error
}

// A unit is the flows of one partition's datagrams at offsets [first, end), in offset order
// except for the data sets that waited for a template.
//
// Units must come out the same when the datagrams are decoded again from the committed
// offset, or the tokens would differ and the flows be stored twice. So a partition's committed
// offset is always the start of a unit, and before a unit is inserted its end is recorded in
// the metadata of an offset commit at its start ("flowzero-unit <first> <end>"): whichever
// outlet consumes the partition next from that offset, this one after a rewind or another
// after a crash, reads the metadata and cuts its first unit at that end. At each commit the
// open unit is closed; closed units wait until none of their data sets waits for a template
// (their flows go into them when released, so a unit's rows are all there before it is
// inserted); then the ready ones at the head are merged, unless their range is recorded
// already, and inserted.
type unit struct {
	first int64
	end   int64 // 0 while open
	data  []byte
	flows int
	// recorded: the range is in the commit metadata (cut at a planned end), it cannot change.
	recorded bool
}

// closeOpen closes the open unit at end; a new one starts there.
func (ps *partition) closeOpen(end int64, recorded bool) {
	u := ps.open
	u.end, u.recorded = end, recorded
	ps.closed = append(ps.closed, &u)
	ps.open = unit{first: end}
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
	for _, u := range ps.closed {
		if off < u.end {
			return u
		}
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

// closeUnitsLocked closes the open units, inserts the units that are ready into every unit
// sink, and returns, per partition, the offset up to which its datagrams are stored (o.mu
// held). A partition's units wait while one of their data sets is held; its open unit stays
// open while a planned end is not reached yet.
func (o *Outlet) closeUnitsLocked(ctx context.Context) (map[int32]int64, error) {
	ready := map[int32]*unit{}
	record := map[int32]plan{}
	for p, ps := range o.parts {
		if ps.next > ps.open.first && (ps.planned <= ps.open.first || ps.next >= ps.planned) {
			ps.closeOpen(ps.next, ps.next == ps.planned)
		}
		// The ready units at the head, merged unless the first one's range is recorded.
		n := 0
		for n < len(ps.closed) && !o.heldIn(p, ps.closed[n].first, ps.closed[n].end) &&
			(n == 0 || !ps.closed[0].recorded) {
			n++
		}
		if n == 0 {
			continue
		}
		u := ps.closed[0]
		for _, v := range ps.closed[1:n] {
			u.data = append(u.data, v.data...)
			u.flows += v.flows
			u.end = v.end
		}
		ps.closed = slices.Delete(ps.closed, 0, n)
		ready[p] = u
		if u.flows > 0 && !u.recorded {
			record[p] = plan{u.first, u.end}
		}
	}
	if err := o.recordPlans(ctx, record); err != nil {
		return nil, err
	}
	upTo := map[int32]int64{}
	for p, u := range ready {
		ps := o.parts[p]
		if pl, ok := record[p]; ok {
			ps.committed, ps.planned = pl.first, pl.end
		}
		if err := o.insertUnit(ctx, p, u, u.end); err != nil {
			return nil, err
		}
		ps.inserted = u.end
	}
	for p, ps := range o.parts {
		if ps.inserted > ps.committed {
			upTo[p] = ps.inserted
		}
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
		var err error
		if rs, ok := s.(ReplaySink); ok && u.recorded {
			err = rs.InsertReplayedUnit(ctx, token, p, u.first, end, u.data, u.flows)
		} else {
			err = s.InsertUnit(ctx, token, u.data, u.flows)
		}
		if err != nil {
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
