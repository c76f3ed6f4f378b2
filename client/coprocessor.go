package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"

	"github.com/strata-db/strata/internal/coprocessor"
	ikv "github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/kvpb"
)

// Coprocessor requests (TiDB's distsql / TiKV client-go's copIterator).
//
// A request's ranges are cut into tasks. Fewer ranges than twice the
// request's concurrency make a task each, each cut again (unless NoSplit)
// into sub-ranges of about equal key space between its first and last
// key, so that every worker has work even when the range is one region.
// More ranges (an index join's lookups) are dealt out in runs of
// consecutive ranges, about twice as many tasks as workers. Up to
// Concurrency tasks run at once, each in its own goroutine, walking its
// ranges region by region: one request carries all of the task's ranges
// (their parts) in a region (sendOnce: a region error corrects the cache
// and the region is sent again; a lock is resolved and the region sent
// again; a page that stopped early goes on from its resume key). Its
// responses are queued on the task; the consumer takes them in task order
// (KeepOrder) or as they come. With KeepOrder, a fragment that returns
// rows starts a task only within Concurrency tasks of the one the consumer
// reads, so a consumer that stops reading (a LIMIT) leaves at most that
// many tasks to finish and what waits in memory stays bounded.

// Coprocess implements kv.Coprocessor.
func (t *Txn) Coprocess(ctx context.Context, req *ikv.CopRequest) (ikv.CopIterator, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	for _, r := range req.Ranges {
		if t.buf.hasIn(r.Start, r.End) {
			return nil, nil
		}
	}
	view := t.rangeView()
	conc := max(req.Concurrency, 1)
	ctx, cancel := context.WithCancel(ctx)
	it := &copIterator{c: t.c, view: view, req: req, conc: conc, ctx: ctx, cancel: cancel, notify: make(chan struct{}, 1)}
	var ranges []ikv.KeyRange
	for _, r := range req.Ranges {
		if r.End != nil && bytes.Compare(r.Start, r.End) >= 0 {
			continue
		}
		ranges = append(ranges, r)
	}
	switch {
	case len(ranges) >= 2*conc:
		// Many ranges (an index join's lookups, an IN list): about 2*conc
		// tasks of consecutive ranges, each sending all its ranges of a
		// region in one request.
		per := (len(ranges) + 2*conc - 1) / (2 * conc)
		for len(ranges) > 0 {
			n := min(per, len(ranges))
			it.tasks = append(it.tasks, &copTask{ranges: ranges[:n:n]})
			ranges = ranges[n:]
		}
	default:
		for i := range ranges {
			it.tasks = append(it.tasks, &copTask{ranges: ranges[i : i+1 : i+1]})
		}
		if len(it.tasks) > 0 && !req.NoSplit {
			it.tasks = it.splitTasks(ctx, it.tasks)
		}
	}
	if req.DAG.Reverse {
		for i, j := 0, len(it.tasks)-1; i < j; i, j = i+1, j-1 {
			it.tasks[i], it.tasks[j] = it.tasks[j], it.tasks[i]
		}
	}
	return it, nil
}

type copTask struct {
	// ranges are what the task has left to read: ascending, disjoint,
	// End nil for +infinity.
	ranges   []ikv.KeyRange
	started  bool
	finished bool
	pages    []*kvpb.CopResponse
}

type copIterator struct {
	c      *Client
	view   readView
	req    *ikv.CopRequest
	conc   int
	ctx    context.Context
	cancel context.CancelFunc
	notify chan struct{}

	mu      sync.Mutex
	tasks   []*copTask // in scan order
	head    int        // first task not yet consumed entirely
	running int
	err     error
	closed  bool
}

// splitTasks cuts each task into about 2*conc/len(tasks) sub-ranges
// between its first and last key: twice as many tasks as workers, so that
// uneven ones (three regions on two workers) still end about together.
func (it *copIterator) splitTasks(ctx context.Context, tasks []*copTask) []*copTask {
	per := (2*it.conc + len(tasks) - 1) / len(tasks)
	var out []*copTask
	for _, t := range tasks {
		r := t.ranges[0]
		first, ok := it.c.probeKey(ctx, it.view, r.Start, r.End, false, minSplitKeys)
		if !ok {
			// Fewer keys than are worth a split (a small table), or
			// locks in the way: one task.
			out = append(out, t)
			continue
		}
		last, ok := it.c.probeKey(ctx, it.view, r.Start, r.End, true, 1)
		if !ok || bytes.Compare(first, last) >= 0 {
			out = append(out, t)
			continue
		}
		bounds := splitKeys(first, last, per)
		prev := r.Start
		for _, b := range bounds {
			if bytes.Compare(b, prev) <= 0 || (r.End != nil && bytes.Compare(b, r.End) >= 0) {
				continue
			}
			out = append(out, &copTask{ranges: []ikv.KeyRange{{Start: prev, End: b}}})
			prev = b
		}
		out = append(out, &copTask{ranges: []ikv.KeyRange{{Start: prev, End: r.End}}})
	}
	return out
}

// splitKeys returns n-1 keys cutting (first, last] into n parts of about
// equal size, reading the 8 bytes after the keys' common prefix as a
// number.
func splitKeys(first, last []byte, n int) [][]byte {
	if n <= 1 {
		return nil
	}
	p := 0
	for p < len(first) && p < len(last) && first[p] == last[p] {
		p++
	}
	word := func(k []byte) uint64 {
		var b [8]byte
		if p < len(k) {
			copy(b[:], k[p:])
		}
		return binary.BigEndian.Uint64(b[:])
	}
	a, z := word(first), word(last)
	if z <= a {
		return nil
	}
	var out [][]byte
	step := (z - a) / uint64(n)
	if step == 0 {
		return nil
	}
	for i := 1; i < n; i++ {
		k := make([]byte, p+8)
		copy(k, first[:p])
		binary.BigEndian.PutUint64(k[p:], a+step*uint64(i))
		out = append(out, k)
	}
	return out
}

// minSplitKeys is how many keys a task must hold at least to be cut.
const minSplitKeys = 256

// probeKey returns the first (or, reverse, the last) key with a visible
// value in [start, end), reading up to want keys of the region it is in:
// ok is false when that region has fewer than want keys in the range and
// the range ends with it (a small range), or when it cannot tell cheaply
// (locks, errors). It does not wait for locks.
func (c *Client) probeKey(ctx context.Context, view readView, start, end []byte, reverse bool, want int) ([]byte, bool) {
	bo := newBackoffer(ctx, c.opts.BackoffBudget)
	cursor := start
	if reverse {
		cursor = end
	}
	for range 4 {
		e, req, err := c.regionScanRequest(ctx, start, end, cursor, reverse, want, view.ts)
		if err != nil {
			return nil, false
		}
		req.KeyOnly = true
		resp, outcome, err := sendOnce(c, &bo, e, func(kvc kvpb.KvClient) (*kvpb.ScanResponse, error) {
			return kvc.KvScan(bo.ctx, req)
		})
		if err != nil || resp == nil || outcome != sent || resp.Error != nil {
			return nil, false
		}
		if _, ke := pairLocks(resp.Pairs); ke != nil {
			return nil, false
		}
		for _, p := range resp.Pairs {
			if p.Error != nil {
				return nil, false
			}
		}
		next, done := nextRegionCursor(req, start, end)
		if len(resp.Pairs) < want && done {
			return nil, false
		}
		if len(resp.Pairs) > 0 {
			return bytes.Clone(resp.Pairs[0].Key), true
		}
		cursor = next
	}
	return nil, false
}

// launch starts the tasks that may run now. it.mu is held.
func (it *copIterator) launch() {
	for i := it.head; i < len(it.tasks) && it.running < it.conc; i++ {
		if it.req.KeepOrder && i >= it.head+it.conc && it.rowsOut() {
			break
		}
		t := it.tasks[i]
		if t.started {
			continue
		}
		t.started = true
		it.running++
		go it.run(t)
	}
}

// rowsOut reports whether the fragment returns rows, as many as it reads
// at worst: in key order, a task then starts only within Concurrency of
// the one the consumer reads, which bounds what waits in memory. An
// aggregation's or top-N's answer is small: any task may start.
func (it *copIterator) rowsOut() bool {
	return it.req.DAG.Agg == nil && len(it.req.DAG.TopN) == 0
}

func (it *copIterator) signal() {
	select {
	case it.notify <- struct{}{}:
	default:
	}
}

// Next implements kv.CopIterator.
func (it *copIterator) Next(ctx context.Context) (*kvpb.CopResponse, error) {
	for {
		it.mu.Lock()
		if it.err != nil {
			err := it.err
			it.mu.Unlock()
			return nil, err
		}
		for it.head < len(it.tasks) && it.tasks[it.head].finished && len(it.tasks[it.head].pages) == 0 {
			it.tasks[it.head] = nil
			it.head++
		}
		if it.head == len(it.tasks) {
			it.mu.Unlock()
			return nil, nil
		}
		it.launch()
		for i := it.head; i < len(it.tasks); i++ {
			t := it.tasks[i]
			if len(t.pages) > 0 {
				p := t.pages[0]
				t.pages[0] = nil
				t.pages = t.pages[1:]
				it.mu.Unlock()
				return p, nil
			}
			if it.req.KeepOrder {
				break
			}
		}
		it.mu.Unlock()
		select {
		case <-it.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close implements kv.CopIterator.
func (it *copIterator) Close() {
	it.mu.Lock()
	it.closed = true
	it.mu.Unlock()
	it.cancel()
}

// run walks a task's range region by region.
func (it *copIterator) run(t *copTask) {
	err := it.runTask(t)
	it.mu.Lock()
	it.running--
	t.finished = true
	if err != nil && it.err == nil && !it.closed {
		it.err = err
	}
	it.mu.Unlock()
	it.signal()
}

func (it *copIterator) runTask(t *copTask) error {
	c, reverse := it.c, it.req.DAG.Reverse
	bo := newBackoffer(it.ctx, c.opts.BackoffBudget)
	for len(t.ranges) > 0 {
		it.mu.Lock()
		stop := it.closed || it.err != nil
		it.mu.Unlock()
		if stop {
			return nil
		}
		// The region the next key to read is in, and the task's ranges
		// (their parts) within it.
		var e *regionEntry
		var err error
		var krs []*kvpb.KeyRange
		if reverse {
			last := t.ranges[len(t.ranges)-1]
			if e, err = c.regions.locateEndKey(it.ctx, last.Start, last.End); err != nil {
				return err
			}
			krs = regionRangesReverse(t.ranges, e.startKey())
		} else {
			if e, err = c.regions.locate(it.ctx, t.ranges[0].Start); err != nil {
				return err
			}
			krs = regionRanges(t.ranges, e.endKey())
		}
		req := &kvpb.CopRequest{Context: e.rpcCtx, Ranges: krs, Version: it.view.ts, Dag: it.req.DAG,
			PagingRows: uint32(it.req.PagingRows)}
		resp, outcome, err := sendOnce(c, &bo, e, func(kvc kvpb.KvClient) (*kvpb.CopResponse, error) {
			return kvc.KvCoprocessor(bo.ctx, req)
		})
		if err != nil {
			return err
		}
		if outcome != sent {
			continue
		}
		if ke := resp.Error; ke != nil {
			if ke.Locked != nil {
				if err := c.resolver.waitForLocks(&bo, it.view.ts, it.view.startTS, []*kvpb.LockInfo{ke.Locked}); err != nil {
					return err
				}
				continue
			}
			return keyErrorAsError(ke)
		}
		if resp.EvalError != nil {
			return coprocessor.ErrorFromPB(resp.EvalError)
		}
		it.mu.Lock()
		t.pages = append(t.pages, resp)
		it.mu.Unlock()
		it.signal()
		lo, hi := krs[0].Start, krs[len(krs)-1].End
		if len(resp.ResumeKey) > 0 {
			if !inRange(resp.ResumeKey, lo, hi) && !bytes.Equal(resp.ResumeKey, hi) {
				return errBadResume
			}
			if reverse {
				t.ranges = rangesBelow(t.ranges, resp.ResumeKey)
			} else {
				t.ranges = rangesFrom(t.ranges, resp.ResumeKey)
			}
			continue
		}
		dag := it.req.DAG
		if dag.Agg == nil && len(dag.TopN) == 0 && dag.Limit > 0 && resp.Batch != nil && uint64(resp.Batch.Rows) >= dag.Limit {
			return nil // the task has all the rows the limit takes
		}
		if reverse {
			t.ranges = rangesBelow(t.ranges, lo)
		} else if len(hi) == 0 {
			t.ranges = nil
		} else {
			t.ranges = rangesFrom(t.ranges, hi)
		}
	}
	return nil
}

// regionRanges returns the parts of the ranges, from the first, that are
// below end (the end key of the region the first starts in; empty:
// +infinity), as a request's ranges.
func regionRanges(ranges []ikv.KeyRange, end []byte) []*kvpb.KeyRange {
	var out []*kvpb.KeyRange
	for _, r := range ranges {
		if len(end) > 0 && bytes.Compare(r.Start, end) >= 0 {
			break
		}
		kr := &kvpb.KeyRange{Start: r.Start, End: r.End}
		if len(end) > 0 && (r.End == nil || bytes.Compare(r.End, end) > 0) {
			kr.End = end
		}
		out = append(out, kr)
	}
	return out
}

// regionRangesReverse returns the parts of the ranges, from the last, that
// are at or above start (the start key of the region the last ends in),
// as a request's ranges in ascending order.
func regionRangesReverse(ranges []ikv.KeyRange, start []byte) []*kvpb.KeyRange {
	k := len(ranges)
	for k > 0 && (ranges[k-1].End == nil || bytes.Compare(ranges[k-1].End, start) > 0) {
		k--
		if bytes.Compare(ranges[k].Start, start) < 0 {
			break
		}
	}
	out := make([]*kvpb.KeyRange, 0, len(ranges)-k)
	for _, r := range ranges[k:] {
		kr := &kvpb.KeyRange{Start: r.Start, End: r.End}
		if bytes.Compare(kr.Start, start) < 0 {
			kr.Start = start
		}
		out = append(out, kr)
	}
	return out
}

// rangesFrom returns the parts of the ranges at or above key.
func rangesFrom(ranges []ikv.KeyRange, key []byte) []ikv.KeyRange {
	for len(ranges) > 0 && ranges[0].End != nil && bytes.Compare(ranges[0].End, key) <= 0 {
		ranges = ranges[1:]
	}
	if len(ranges) > 0 && bytes.Compare(ranges[0].Start, key) < 0 {
		ranges = append([]ikv.KeyRange{{Start: key, End: ranges[0].End}}, ranges[1:]...)
	}
	return ranges
}

// rangesBelow returns the parts of the ranges below key.
func rangesBelow(ranges []ikv.KeyRange, key []byte) []ikv.KeyRange {
	n := len(ranges)
	for n > 0 && bytes.Compare(ranges[n-1].Start, key) >= 0 {
		n--
	}
	ranges = ranges[:n:n]
	if n > 0 && (ranges[n-1].End == nil || bytes.Compare(ranges[n-1].End, key) > 0) {
		ranges = append(ranges[:n-1:n-1], ikv.KeyRange{Start: ranges[n-1].Start, End: key})
	}
	return ranges
}

var errBadResume = errorString("client: coprocessor response resumes outside its request")

type errorString string

func (e errorString) Error() string { return string(e) }

func inRange(k, start, end []byte) bool {
	return bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
}
