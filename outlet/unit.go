package outlet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
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

// ReplaySink is a UnitSink that can count the flows it holds of a unit, so that a unit cut at
// a range recorded before (which an earlier insert may have stored in whole, in part or not at
// all) gets the token that stores it once: see Outlet.replayToken.
type ReplaySink interface {
	UnitSink
	// UnitRows returns how many flows of partition's datagrams at offsets [first, end) the
	// sink holds; ok is false when it cannot tell (store.Sink.UnitRows). Every flow of the
	// range has a TimeReceived (Unix seconds) in [minTime, maxTime], which lets a store read
	// only those days and minutes instead of the whole table.
	UnitRows(ctx context.Context, partition int32, first, end int64, minTime, maxTime uint64) (rows int, ok bool, err error)
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
	// minTime and maxTime are the least and greatest TimeReceived of its flows (add).
	minTime, maxTime uint64
	// recorded: the range is in the commit metadata (cut at a planned end), it cannot change;
	// again is the suffix of its token recorded with it for the replay sinks (replayToken).
	recorded bool
	again    string
}

// add counts n more flows, received from minTime to maxTime, widening the unit's range.
func (u *unit) add(n int, minTime, maxTime uint64) {
	switch {
	case n == 0:
		return
	case u.flows == 0:
		u.minTime, u.maxTime = minTime, maxTime
	default:
		u.minTime, u.maxTime = min(u.minTime, minTime), max(u.maxTime, maxTime)
	}
	u.flows += n
}

// closeOpen closes the open unit at end; a new one starts there. A recorded unit is the one
// starting at the committed offset, whose range (and token suffix) the partition planned.
func (ps *partition) closeOpen(end int64, recorded bool) {
	u := ps.open
	u.end, u.recorded = end, recorded
	if recorded {
		u.again = ps.again
	}
	ps.closed = append(ps.closed, &u)
	ps.open = unit{first: end}
}

// unitMetadata is the prefix of the commit metadata recording a unit's range:
// "flowzero-unit <first> <end>", then the replay sinks' token suffix if it has one
// ("again-<base 36>", see replayToken).
const unitMetadata = "flowzero-unit"

func planMetadata(pl plan) string {
	meta := fmt.Sprintf("%s %d %d", unitMetadata, pl.first, pl.end)
	if pl.again != "" {
		meta += " " + pl.again
	}
	return meta
}

func parsePlan(meta string) (plan, bool) {
	f := strings.Fields(meta)
	if (len(f) != 3 && len(f) != 4) || f[0] != unitMetadata {
		return plan{}, false
	}
	first, err1 := strconv.ParseInt(f[1], 10, 64)
	end, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || first < 0 || end <= first {
		return plan{}, false
	}
	pl := plan{first: first, end: end}
	if len(f) == 4 {
		n, ok := strings.CutPrefix(f[3], "again-")
		if _, err := strconv.ParseUint(n, 36, 64); !ok || err != nil {
			return plan{}, false
		}
		pl.again = f[3]
	}
	return pl, true
}

// unitToken is the deduplication token of a unit: topic, partition, first and last offset.
func (o *Outlet) unitToken(p int32, u *unit, end int64) string {
	return fmt.Sprintf("%s-%d-%d-%d", o.topic.Topic, p, u.first, end-1)
}

// plan is a unit's range, and its token suffix for the replay sinks, as in the commit
// metadata of a partition.
type plan struct {
	first, end int64
	again      string
}

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
		if pl, ok := parsePlan(r.Metadata); ok && pl.first == r.At {
			o.plans[p] = pl
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
			u.add(v.flows, v.minTime, v.maxTime)
			u.end = v.end
		}
		ps.closed = slices.Delete(ps.closed, 0, n)
		ready[p] = u
		if u.flows > 0 && !u.recorded {
			record[p] = plan{first: u.first, end: u.end}
		}
	}
	if err := o.recordPlans(ctx, record); err != nil {
		return nil, err
	}
	upTo := map[int32]int64{}
	for p, u := range ready {
		ps := o.parts[p]
		if pl, ok := record[p]; ok {
			ps.committed, ps.planned, ps.again = pl.first, pl.end, ""
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
		t := token
		if u.recorded && o.replay != nil && s == UnitSink(o.replay) {
			var err error
			if t, err = o.replayToken(ctx, o.replay, p, u, end, token); err != nil {
				return fmt.Errorf("unit %s: %w", token, err)
			}
		}
		if err := s.InsertUnit(ctx, t, u.data, u.flows); err != nil {
			return fmt.Errorf("unit %s: %w", t, err)
		}
	}
	o.m.units.Inc()
	return nil
}

// replayToken returns the token with which the replay sink rs inserts u, a unit cut at a
// recorded range, which an earlier insert may have reached. A table that is not replicated
// writes a block's token to its deduplication log before it commits the block's part, so an
// insert killed in between leaves the token without the rows, and the same token would store
// nothing again (docs/scaling.md). So rs counts the unit's flows first:
//   - none: a new token suffix, recorded in the commit metadata before the insert, so that a
//     later replay (after another crash) uses the token of the insert that stored the rows;
//   - all: the recorded token, with which the tables that have the rows store nothing and
//     those an interrupted insert did not reach (the aggregated ones) get theirs;
//   - some (a unit inserted in several blocks, one of them lost): the recorded token, and an
//     error logged: the missing rows cannot be told apart.
func (o *Outlet) replayToken(ctx context.Context, rs ReplaySink, p int32, u *unit, end int64, token string) (string, error) {
	held, ok, err := rs.UnitRows(ctx, p, u.first, end, u.minTime, u.maxTime)
	if err != nil {
		return "", fmt.Errorf("counting the flows stored of a replayed unit: %w", err)
	}
	switch {
	case !ok:
	case held == 0:
		again := "again-" + strconv.FormatUint(rand.Uint64(), 36)
		if err := o.recordPlans(ctx, map[int32]plan{p: {first: u.first, end: end, again: again}}); err != nil {
			return "", err
		}
		u.again = again
		if ps := o.parts[p]; ps != nil {
			ps.again = again
		}
		o.m.replayed.WithLabelValues("none").Inc()
		o.log.Info("outlet: a unit inserted again has none of its flows in the store: inserted with a new token",
			"token", token+"/"+again, "flows", u.flows)
	case held < u.flows:
		o.m.replayed.WithLabelValues("some").Inc()
		o.health.Event(fmt.Sprintf("unit %s inserted again with %d of its %d flows in the store: the others may be missing", token, held, u.flows))
		o.log.Error("outlet: a unit inserted again has some of its flows in the store: the others may be missing",
			"token", token, "flows", u.flows, "held", held)
	default:
		o.m.replayed.WithLabelValues("all").Inc()
	}
	if u.again == "" {
		return token, nil
	}
	return token + "/" + u.again, nil
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
		meta := planMetadata(pl)
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
