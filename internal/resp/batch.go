package resp

import (
	"bytes"
	"context"
	"errors"

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
type batcher struct {
	srv  *Server
	jobs chan *job
}

// maxBatch bounds the commands in one transaction.
const maxBatch = 512

// job is one command (or one EXEC) submitted by a connection.
type job struct {
	run  func(ks *keyspace, w *Writer) error
	buf  bytes.Buffer
	w    *Writer
	done chan struct{}
	// alone: run in a transaction of its own (it failed after writing).
	alone bool
}

func newJob(proto int, run func(ks *keyspace, w *Writer) error) *job {
	j := &job{run: run, done: make(chan struct{})}
	j.w = NewWriter(&j.buf)
	j.w.SetProto(proto)
	return j
}

// errIsolate aborts a batch attempt so that it is re-run without a command
// that failed after writing.
var errIsolate = &kv.RetryableError{Reason: "resp: command failed after writing; re-running the batch without it"}

func (b *batcher) loop() {
	defer b.srv.wg.Done()
	batch := make([]*job, 0, maxBatch)
	for {
		select {
		case <-b.srv.stop:
			return
		case j := <-b.jobs:
			batch = append(batch[:0], j)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case j := <-b.jobs:
				batch = append(batch, j)
			default:
				break drain
			}
		}
		b.execute(batch)
	}
}

func (b *batcher) execute(batch []*job) {
	s := b.srv
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommandTimeout)
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
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommandTimeout)
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
