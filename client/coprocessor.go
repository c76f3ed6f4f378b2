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
// A request's ranges are cut into tasks: each range, and, when there are
// fewer tasks than twice the request's concurrency, each task cut again
// into sub-ranges of about equal key space between its first and last
// key, so that every worker has work even when the range is one region. Up to
// Concurrency tasks run at once, each in its own goroutine, walking its
// range region by region (sendOnce: a region error corrects the cache and
// the region is sent again; a lock is resolved and the region sent again;
// a page that stopped early goes on from its resume key). Its responses
// are queued on the task; the consumer takes them in task order
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
	for _, r := range req.Ranges {
		if r.End != nil && bytes.Compare(r.Start, r.End) >= 0 {
			continue
		}
		it.tasks = append(it.tasks, &copTask{start: r.Start, end: r.End})
	}
	if len(it.tasks) > 0 && len(it.tasks) < 2*conc {
		it.tasks = it.splitTasks(ctx, it.tasks)
	}
	if req.DAG.Reverse {
		for i, j := 0, len(it.tasks)-1; i < j; i, j = i+1, j-1 {
			it.tasks[i], it.tasks[j] = it.tasks[j], it.tasks[i]
		}
	}
	return it, nil
}

type copTask struct {
	start, end []byte // end nil: +infinity
	started    bool
	finished   bool
	pages      []*kvpb.CopResponse
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
		first, ok := it.c.probeKey(ctx, it.view, t.start, t.end, false, minSplitKeys)
		if !ok {
			// Fewer keys than are worth a split (a small table), or
			// locks in the way: one task.
			out = append(out, t)
			continue
		}
		last, ok := it.c.probeKey(ctx, it.view, t.start, t.end, true, 1)
		if !ok || bytes.Compare(first, last) >= 0 {
			out = append(out, t)
			continue
		}
		bounds := splitKeys(first, last, per)
		prev := t.start
		for _, b := range bounds {
			if bytes.Compare(b, prev) <= 0 || (t.end != nil && bytes.Compare(b, t.end) >= 0) {
				continue
			}
			out = append(out, &copTask{start: prev, end: b})
			prev = b
		}
		out = append(out, &copTask{start: prev, end: t.end})
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
	cursor := t.start
	if reverse {
		cursor = t.end
	}
	for {
		it.mu.Lock()
		stop := it.closed || it.err != nil
		it.mu.Unlock()
		if stop {
			return nil
		}
		var e *regionEntry
		var err error
		kr := &kvpb.KeyRange{Start: t.start, End: t.end}
		if reverse {
			if e, err = c.regions.locateEndKey(it.ctx, t.start, cursor); err != nil {
				return err
			}
			kr.End = cursor
			if bytes.Compare(e.startKey(), kr.Start) > 0 {
				kr.Start = e.startKey()
			}
		} else {
			if e, err = c.regions.locate(it.ctx, cursor); err != nil {
				return err
			}
			kr.Start = cursor
			if re := e.endKey(); len(re) > 0 && (kr.End == nil || bytes.Compare(re, kr.End) < 0) {
				kr.End = re
			}
		}
		req := &kvpb.CopRequest{Context: e.rpcCtx, Ranges: []*kvpb.KeyRange{kr}, Version: it.view.ts, Dag: it.req.DAG,
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
		if len(resp.ResumeKey) > 0 {
			if !inRange(resp.ResumeKey, kr.Start, kr.End) && !bytes.Equal(resp.ResumeKey, kr.End) {
				return errBadResume
			}
			cursor = resp.ResumeKey
			continue
		}
		dag := it.req.DAG
		if dag.Agg == nil && len(dag.TopN) == 0 && dag.Limit > 0 && resp.Batch != nil && uint64(resp.Batch.Rows) >= dag.Limit {
			return nil // the task has all the rows the limit takes
		}
		if reverse {
			cursor = kr.Start
			if bytes.Compare(cursor, t.start) <= 0 {
				return nil
			}
		} else {
			cursor = kr.End
			if len(cursor) == 0 || (t.end != nil && bytes.Compare(cursor, t.end) >= 0) {
				return nil
			}
		}
	}
}

var errBadResume = errorString("client: coprocessor response resumes outside its request")

type errorString string

func (e errorString) Error() string { return string(e) }

func inRange(k, start, end []byte) bool {
	return bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
}
