package sql

import (
	"testing"
	"time"

	"github.com/strata-db/strata/internal/sql/catalog"
)

// settled waits for every live engine whose floor is below the current
// version, counts a lease live until maxClockOffset after its expiry, and
// takes the owner's own state from memory rather than its stored lease.
func TestSettledWaitsForLiveEnginesBehind(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).UnixNano()
	sec := int64(time.Second)
	leases := []*catalog.EngineLease{
		{ID: "self", Loaded: 5, Floor: 3, Expires: now + 5*sec}, // stored, behind the memory below
		{ID: "ok", Loaded: 5, Floor: 5, Expires: now + 5*sec},
		{ID: "behind", Loaded: 5, Floor: 4, Expires: now + 5*sec},
		{ID: "expired-recently", Loaded: 3, Floor: 3, Expires: now - int64(maxClockOffset)/2},
		{ID: "dead", Loaded: 1, Floor: 1, Expires: now - int64(maxClockOffset) - 1},
	}
	self := &catalog.EngineLease{ID: "self", Loaded: 5, Floor: 5, Expires: now + 5*sec}
	var got []string
	for _, l := range settled(leases, self, now, 5) {
		got = append(got, l.ID)
	}
	if len(got) != 2 || got[0] != "behind" || got[1] != "expired-recently" {
		t.Fatalf("waiting for %v, want [behind expired-recently]", got)
	}
	if w := settled(leases, self, now, 3); len(w) != 0 {
		t.Fatalf("version 3: waiting for %d engines", len(w))
	}
	// An engine not registered yet counts through its in-memory state.
	if w := settled(nil, &catalog.EngineLease{ID: "new", Floor: 2, Expires: now + sec}, now, 3); len(w) != 1 {
		t.Fatalf("unregistered self behind: %v", w)
	}
}

// nextIndexStates moves added indexes delete-only -> write-only -> write
// reorganization -> public and dropped (or rolled back) ones toward gone.
func TestNextIndexStates(t *testing.T) {
	tbl := &catalog.TableInfo{ID: 1, Changing: []*catalog.IndexInfo{
		{ID: 2, Name: "a", State: catalog.StateDeleteOnly},
		{ID: 3, Name: "d", State: catalog.StateWriteOnly},
		{ID: 4, Name: "other", State: catalog.StateWriteOnly},
	}}
	job := &catalog.Job{State: catalog.JobRunning, Adding: []int64{2}, Dropping: []int64{3}}
	var trace []string
	for i := 0; i < 4 && len(tbl.Changing) > 1; i++ {
		nt, gone := nextIndexStates(job, tbl)
		line := ""
		for _, ix := range nt.Changing {
			line += ix.Name + ":" + ix.State.String() + " "
		}
		for _, ix := range nt.Indexes {
			line += ix.Name + ":public "
		}
		for _, id := range gone {
			line += "gone:" + string(rune('0'+id)) + " "
		}
		trace = append(trace, line)
		tbl = nt
	}
	want := []string{
		"a:write only d:delete only other:write only ",
		"a:write reorganization other:write only gone:3 ",
		"other:write only a:public ",
	}
	if len(trace) != len(want) {
		t.Fatalf("trace %q", trace)
	}
	for i := range want {
		if trace[i] != want[i] {
			t.Errorf("step %d: %q, want %q", i+1, trace[i], want[i])
		}
	}
	// Rolled back from write reorganization: delete-only, then gone.
	tbl = &catalog.TableInfo{ID: 1, Changing: []*catalog.IndexInfo{{ID: 2, Name: "a", State: catalog.StateWriteReorg}}}
	job.State = catalog.JobRollingBack
	nt, gone := nextIndexStates(job, tbl)
	if nt.Changing[0].State != catalog.StateDeleteOnly || len(gone) != 0 {
		t.Fatalf("rollback step 1: %v %v", nt.Changing[0].State, gone)
	}
	if nt, gone = nextIndexStates(job, nt); len(nt.Changing) != 0 || len(gone) != 1 || len(nt.Indexes) != 0 {
		t.Fatalf("rollback step 2: %v %v", nt.Changing, gone)
	}
}
