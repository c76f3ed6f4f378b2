package kvserver

import (
	"sync"
	"sync/atomic"
	"time"
)

// Traffic per region. The leader counts what it serves (reads: keys and
// bytes returned; writes: the bytes and keys of the batches it proposes
// for transactions) and samples request keys, one in sampleEvery: the
// node reports the counts to PD with each heartbeat (TakeFlow), where
// the hot-region scheduler spreads them, and its load-based split
// checker splits a region whose queries per second stay high at the
// median of the sampled keys (TiKV's load-base split).
//
// Counting costs a map lookup and a few atomic adds per request.

// sampleEvery: one request in this many has its key sampled.
const sampleEvery = 8

// maxSamples bounds the sampled keys kept per region between two takes.
const maxSamples = 256

type regionFlow struct {
	readBytes, readKeys, readQueries    atomic.Uint64
	writeBytes, writeKeys, writeQueries atomic.Uint64
	since                               atomic.Int64 // unix ns of the last take

	mu      sync.Mutex
	n       uint64
	samples [][]byte
}

// Flow is a region's traffic since the previous take.
type Flow struct {
	ReadBytes, ReadKeys, ReadQueries    uint64
	WriteBytes, WriteKeys, WriteQueries uint64
	Interval                            time.Duration
	// Samples are request keys sampled over the interval.
	Samples [][]byte
}

func (s *Server) flowOf(region uint64) *regionFlow {
	if f, ok := s.flows.Load(region); ok {
		return f.(*regionFlow)
	}
	f := &regionFlow{}
	f.since.Store(time.Now().UnixNano())
	actual, _ := s.flows.LoadOrStore(region, f)
	return actual.(*regionFlow)
}

func (f *regionFlow) sample(key []byte, queries uint64) {
	if queries%sampleEvery != 0 || len(key) == 0 {
		return
	}
	f.mu.Lock()
	if len(f.samples) < maxSamples {
		f.samples = append(f.samples, append([]byte(nil), key...))
	} else {
		f.n++
		f.samples[f.n%maxSamples] = append(f.samples[f.n%maxSamples][:0], key...)
	}
	f.mu.Unlock()
}

// noteRead counts a read of region: keys keys and bytes bytes returned;
// key is the request's (first) key.
func (s *Server) noteRead(region uint64, key []byte, keys, bytes int) {
	f := s.flowOf(region)
	f.readBytes.Add(uint64(bytes))
	f.readKeys.Add(uint64(keys))
	f.sample(key, f.readQueries.Add(1))
}

// noteWrite counts a write proposed to region.
func (s *Server) noteWrite(region uint64, key []byte, keys, bytes int) {
	f := s.flowOf(region)
	f.writeBytes.Add(uint64(bytes))
	f.writeKeys.Add(uint64(keys))
	f.sample(key, f.writeQueries.Add(1))
}

// TakeFlow returns region's traffic since the previous take and starts a
// new interval.
func (s *Server) TakeFlow(region uint64) Flow {
	f := s.flowOf(region)
	now := time.Now().UnixNano()
	if f.readQueries.Load() == 0 && f.writeQueries.Load() == 0 {
		// Nothing served since the previous take, the usual case of an
		// idle region: loads instead of swaps, no lock (no request, no
		// sample). A request counted meanwhile waits for the next take.
		return Flow{Interval: time.Duration(now - f.since.Swap(now))}
	}
	out := Flow{
		ReadBytes: f.readBytes.Swap(0), ReadKeys: f.readKeys.Swap(0), ReadQueries: f.readQueries.Swap(0),
		WriteBytes: f.writeBytes.Swap(0), WriteKeys: f.writeKeys.Swap(0), WriteQueries: f.writeQueries.Swap(0),
		Interval: time.Duration(now - f.since.Swap(now)),
	}
	f.mu.Lock()
	out.Samples, f.samples, f.n = f.samples, nil, 0
	f.mu.Unlock()
	return out
}

// ForgetFlow drops the counters of a region this store no longer leads
// or holds.
func (s *Server) ForgetFlow(region uint64) { s.flows.Delete(region) }
