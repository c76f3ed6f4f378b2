package resp

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/strata-db/strata/internal/kv"
)

// The batcher runs the write commands of all connections of this node in
// shared transactions: it takes every write command waiting, runs them one
// after another in one transaction (each sees the writes of those before
// it), commits once and only then releases their replies.
//
// Why: Redis clients hammer hot keys (redis-benchmark writes one key from
// 50 connections; YCSB's zipfian picks the same records again and again).
// One transaction per command would make those commands conflict and retry
// each other, and pay a Raft round each. A batch pays one commit for all of
// them, and commands on the same key simply run in sequence inside it.
//
// Linearizability: every command of a batch takes effect at the batch's
// commit, in batch order; all of them were waiting when it committed, so
// that order is a valid linearization. Nothing is replied before the
// commit, and a batch whose commit fails is re-run from scratch (no client
// saw any of it).
//
// A command that fails (say WRONGTYPE) must change nothing. Commands check
// their arguments before writing; should one fail after writing, the batch
// is re-run without it and the command runs alone in its own transaction,
// which is rolled back.
//
// Config.BatchesInFlight batches may execute at once, so that one batch
// runs its commands while the one before waits for its Raft commit. The
// default is 1: on the 2-core machines we measure on, a second batch in
// flight slowed the Raft fsync more than it overlapped (redis-benchmark
// SET, 50 clients: 11k-14k rps with 1, 7k-9k with 2, 5k-6k with 8). A
// command whose keys an in-flight batch holds waits for a later batch (as
// does every later command of its connection, to keep the connection's
// order), so commands on one key still run strictly one after another.
type batcher struct {
	srv  *Server
	jobs chan *job
}

const (
	// maxBatch bounds the commands in one transaction.
	maxBatch = 512
)

// job is one command (or one EXEC) submitted by a connection.
type job struct {
	sess *session
	// keys are the Redis keys the job may touch; barrier jobs may touch
	// anything and run with no other batch in flight.
	keys    []string
	barrier bool
	run     func(ks *keyspace, w *Writer) error
	buf     bytes.Buffer
	w       *Writer
	done    chan struct{}
	queued  time.Time
	// alone: run in a transaction of its own (it failed after writing).
	alone bool
}

func newJob(sess *session, keys [][]byte, barrier bool, run func(ks *keyspace, w *Writer) error) *job {
	j := &job{sess: sess, barrier: barrier, run: run, done: make(chan struct{}), queued: time.Now()}
	j.keys = make([]string, len(keys))
	for i, k := range keys {
		j.keys[i] = string(k)
	}
	j.w = newWriterSize(&j.buf, 64)
	j.w.SetProto(sess.w.Proto())
	return j
}

// errIsolate aborts a batch attempt so that it is re-run without a command
// that failed after writing.
var errIsolate = &kv.RetryableError{Reason: "resp: command failed after writing; re-running the batch without it"}

// loop forms batches and starts them. held counts, per key, the in-flight
// batches that may write it; carry holds jobs that had to wait.
func (b *batcher) loop() {
	defer b.srv.wg.Done()
	held := map[string]int{}
	maxInFlight := b.srv.cfg.BatchesInFlight
	inFlight, barrierInFlight := 0, false
	finished := make(chan []*job, maxInFlight)
	var carry []*job
	release := func(batch []*job) {
		inFlight--
		for _, j := range batch {
			if j.barrier {
				barrierInFlight = false
			}
			for _, k := range j.keys {
				if held[k]--; held[k] == 0 {
					delete(held, k)
				}
			}
		}
	}
	// waitFinished releases the next batch to finish; false when stopping.
	waitFinished := func() bool {
		select {
		case done := <-finished:
			release(done)
			return true
		case <-b.srv.stop:
			return false
		}
	}
	for {
		// Wait until there is work and room for another batch.
		for len(carry) == 0 || inFlight == maxInFlight {
			if inFlight == maxInFlight {
				if !waitFinished() {
					return
				}
				continue
			}
			select {
			case j := <-b.jobs:
				carry = append(carry, j)
			case done := <-finished:
				release(done)
			case <-b.srv.stop:
				return
			}
		}
	gather:
		for len(carry) < 4*maxBatch {
			select {
			case j := <-b.jobs:
				carry = append(carry, j)
			default:
				break gather
			}
		}
		// Take every job whose keys are free, in arrival order; a job that
		// must wait holds back the later jobs of its connection.
		var batch []*job
		var blocked map[*session]bool
		rest := carry[:0]
		for _, j := range carry {
			ok := len(batch) < maxBatch && !barrierInFlight && !blocked[j.sess] &&
				!(j.barrier && (inFlight > 0 || len(batch) > 0))
			for _, k := range j.keys {
				if !ok {
					break
				}
				ok = held[k] == 0
			}
			if !ok {
				if blocked == nil {
					blocked = map[*session]bool{}
				}
				blocked[j.sess] = true
				rest = append(rest, j)
				continue
			}
			batch = append(batch, j)
			if j.barrier {
				barrierInFlight = true
			}
		}
		for i := len(rest); i < len(carry); i++ {
			carry[i] = nil
		}
		carry = rest
		if len(batch) == 0 {
			// Everything waits for an in-flight batch.
			if !waitFinished() {
				return
			}
			continue
		}
		for _, j := range batch {
			for _, k := range j.keys {
				held[k]++
			}
		}
		inFlight++
		go func(batch []*job) {
			b.execute(batch)
			finished <- batch
		}(batch)
	}
}

func (b *batcher) execute(batch []*job) {
	s := b.srv
	start := time.Now()
	for _, j := range batch {
		metricBatchWaitSeconds.Observe(start.Sub(j.queued).Seconds())
	}
	metricBatchSize.Observe(float64(len(batch)))
	defer func() { metricBatchSeconds.Observe(time.Since(start).Seconds()) }()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	defer cancel()
	err := s.retry(ctx, func() error {
		return s.attempt(ctx, func(ks *keyspace) (bool, error) {
			for _, j := range batch {
				if j.alone {
					continue
				}
				j.buf.Reset()
				j.w.Reset(&j.buf)
				before := ks.txn.Len()
				wrote := ks.wrote
				err := j.run(ks, j.w)
				if err == nil {
					continue
				}
				re, ok := asReplyError(err)
				if !ok {
					return false, err
				}
				if ks.txn.Len() != before {
					j.alone = true
					return false, errIsolate
				}
				ks.wrote = wrote
				j.buf.Reset()
				j.w.Reset(&j.buf)
				j.w.WriteError(string(re))
			}
			return true, nil
		})
	})
	for _, j := range batch {
		switch {
		case j.alone:
			b.runAlone(j)
		case err != nil:
			j.buf.Reset()
			j.w.Reset(&j.buf)
			writeError(j.w, err)
		}
		j.w.Flush()
		close(j.done)
	}
}

func (b *batcher) runAlone(j *job) {
	s := b.srv
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	defer cancel()
	err := s.retry(ctx, func() error {
		j.buf.Reset()
		j.w.Reset(&j.buf)
		return s.attempt(ctx, func(ks *keyspace) (bool, error) {
			err := j.run(ks, j.w)
			return err == nil, err
		})
	})
	if err != nil {
		j.buf.Reset()
		j.w.Reset(&j.buf)
		writeError(j.w, err)
	}
}

var errShuttingDown = errors.New("server is shutting down")

// enqueue queues a job; its done channel closes when the reply is ready.
func (b *batcher) enqueue(j *job) error {
	select {
	case b.jobs <- j:
		return nil
	case <-b.srv.stop:
		return errShuttingDown
	}
}
