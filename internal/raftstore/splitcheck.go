package raftstore

import "github.com/strata-db/strata/kvpb"

// ApproximateSize returns Pebble's estimate of the disk space region r's
// data take in the KV engine (EstimateDiskUsage over its spans: the
// sstables overlapping them, pro rata; what is still in the memtable is
// not counted). The split checker and PD's schedulers use it; it costs a
// walk of the LSM's metadata, no read of data.
func (s *Store) ApproximateSize(r *kvpb.Region) (uint64, error) {
	var total uint64
	for _, sp := range s.obs.Spans(r) {
		n, err := s.db.EstimateDiskUsage(sp.Start, sp.End)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
