package kvserver

import (
	"bytes"
	"context"
	"errors"

	"github.com/strata-db/strata/internal/coprocessor"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/kvpb"
)

// KvCoprocessor implements kvpb.KvServer: it evaluates the request's plan
// fragment over its ranges (clipped to the region) at the request's
// version, with the checks of a scan: the region and its leader, the GC
// safe point, max_ts, and locks (a lock of another transaction at or
// below the version is returned as error.locked; the client resolves it
// and sends the request again, so what was evaluated is dropped). An
// evaluation failure (a SQL error such as an overflow) is eval_error.
func (s *Server) KvCoprocessor(ctx context.Context, req *kvpb.CopRequest) (*kvpb.CopResponse, error) {
	resp := &kvpb.CopResponse{}
	_, r, rerr, err := s.routeRead(ctx, req.Context)
	if rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	frag, err := coprocessor.Compile(req.Dag)
	if err != nil {
		resp.EvalError = coprocessor.ErrorToPB(err)
		return resp, nil
	}
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		return resp, nil
	}
	s.cm.UpdateMaxTS(req.Version)
	reverse := req.Dag.Reverse
	run := frag.NewRunner(int(req.PagingRows))
	var stopKey []byte
	add := func(key, value []byte) error {
		err := run.Add(key, value)
		if err == coprocessor.ErrStop {
			stopKey = bytes.Clone(key)
		}
		return err
	}
	n := len(req.Ranges)
	// The request's ranges, clipped to the region. Several (an index
	// join's lookups) are read through one pair of iterators, opened once
	// every range has passed the concurrency manager's check (as a single
	// range's scan opens its iterators after the check).
	ranges := make([][2][]byte, 0, n)
	for _, kr := range req.Ranges {
		start, end := clip(r, kr.Start, kr.End)
		if len(end) > 0 && bytes.Compare(start, end) >= 0 {
			continue
		}
		ranges = append(ranges, [2][]byte{start, end})
	}
	n = len(ranges)
	var multi *mvcc.RangeScan
	if n > 1 {
		for _, rg := range ranges {
			if err := s.cm.CheckReadRange(ctx, rg[0], rg[1], req.Version); err != nil {
				return nil, err
			}
		}
		if multi, err = mvcc.OpenRanges(s.db, ranges); err != nil {
			return nil, err
		}
		defer multi.Close()
	}
	var readBytes int
	for i := 0; i < n && stopKey == nil; i++ {
		ri := i
		if reverse {
			ri = n - 1 - i
		}
		start, end := ranges[ri][0], ranges[ri][1]
		if multi == nil {
			if err := s.cm.CheckReadRange(ctx, start, end, req.Version); err != nil {
				return nil, err
			}
		}
		before := run.Scanned()
		var err error
		if run.CountsOnly() {
			// COUNT(*): the scan counts the visible keys itself (forward
			// whatever the request's order: one group has none).
			var pairs, valueBytes int
			if multi != nil {
				pairs, valueBytes, err = multi.Count(ri, req.Version)
			} else {
				pairs, valueBytes, err = mvcc.Count(s.db, start, end, req.Version)
			}
			readBytes += valueBytes
			if err == nil {
				err = run.AddCount(uint64(pairs))
			}
		} else if run.NeedsKeys() {
			fn := func(key, value []byte) error {
				readBytes += len(key) + len(value)
				return add(key, value)
			}
			if multi != nil {
				err = multi.ScanFunc(ri, req.Version, reverse, fn)
			} else {
				err = mvcc.ScanFunc(s.db, start, end, 0, req.Version, reverse, fn)
			}
		} else {
			// The fragment reads no key column: keys are unescaped only
			// for the resume key of a page that stops.
			vfn := func(k *mvcc.ScanKey, value []byte) error {
				readBytes += len(value)
				err := run.Add(nil, value)
				if err == coprocessor.ErrStop {
					key, kerr := k.Key()
					if kerr != nil {
						return kerr
					}
					stopKey = bytes.Clone(key)
				}
				return err
			}
			if multi != nil {
				err = multi.ScanValues(ri, req.Version, reverse, vfn)
			} else {
				err = mvcc.ScanValues(s.db, start, end, 0, req.Version, reverse, vfn)
			}
		}
		if mvcc.KeyErrorOf(err) != nil {
			// The records the runner kept (it evaluates in batches) came
			// before the lock: their evaluation errors come first, as
			// row at a time. Otherwise the batch carries on over the
			// next range, and Finish evaluates what is left.
			if ferr := run.Flush(); ferr != nil {
				err = ferr
			}
		}
		s.noteRead(r.Id, start, int(run.Scanned()-before), readBytes)
		if err != nil && !errors.Is(err, coprocessor.ErrStop) {
			if ke := mvcc.KeyErrorOf(err); ke != nil {
				resp.Error = ke
				return resp, nil
			}
			resp.EvalError = coprocessor.ErrorToPB(err)
			return resp, nil
		}
	}
	// The read is good only if the safe point has not passed it meanwhile.
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		return resp, nil
	}
	if stopKey != nil && !run.LimitReached() {
		if reverse {
			resp.ResumeKey = stopKey
		} else {
			resp.ResumeKey = append(stopKey, 0)
		}
	}
	if resp.Batch, err = run.Finish(); err != nil {
		resp.EvalError = coprocessor.ErrorToPB(err)
		return resp, nil
	}
	resp.ScannedKeys = run.Scanned()
	limit := int(req.Dag.WarningsLimit)
	for _, w := range run.Warnings() {
		if len(resp.Warnings) >= limit {
			break
		}
		resp.Warnings = append(resp.Warnings, coprocessor.ErrorToPB(w))
	}
	return resp, nil
}
