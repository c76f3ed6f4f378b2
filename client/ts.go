package client

import "time"

// A timestamp from the TSO is physical<<physicalShift | logical, where
// physical is the TSO leader's wall clock in milliseconds. Lock TTLs are
// measured in milliseconds from the physical part of the lock's start
// timestamp (kvpb.LockInfo.lock_ttl).
const physicalShift = 18

// physicalMillis extracts the wall-clock part of a timestamp.
func physicalMillis(ts uint64) int64 { return int64(ts >> physicalShift) }

// lockExpiresIn reports how long until a lock taken at lockTS with ttlMillis
// expires, judged against currentTS; zero or negative means expired.
func lockExpiresIn(lockTS, ttlMillis, currentTS uint64) time.Duration {
	ms := physicalMillis(lockTS) + int64(ttlMillis) - physicalMillis(currentTS)
	return time.Duration(ms) * time.Millisecond
}
