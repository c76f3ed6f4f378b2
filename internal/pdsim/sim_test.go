package pdsim

import (
	"reflect"
	"testing"
	"time"
)

func smallScenario() Scenario {
	sc := Default100()
	sc.Stores, sc.InitialStores, sc.Regions = 15, 10, 600
	sc.ReadBytes, sc.WriteBytes = 400<<20, 64<<20
	sc.Events = []Event{
		{At: 0, Kind: "add", Count: 5},
		{At: 10 * time.Minute, Kind: "fail", Count: 1},
		{At: 20 * time.Minute, Kind: "shift"},
		{At: 25 * time.Minute, Kind: "drain", Count: 1},
	}
	sc.Duration = 40 * time.Minute
	return sc
}

// The real schedulers bring a skewed 20-store cluster within 10% of even
// (replicas, leaders, read and write load), replace a failed store's
// replicas after down-after and empty a drained one; the same seed gives
// the same run.
func TestSimSettles(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 40 minutes")
	}
	sc := smallScenario()
	rep := Run(sc, nil)
	for _, s := range rep.Settles {
		if s.Settled < 0 {
			var b []byte
			w := writerFunc(func(p []byte) (int, error) { b = append(b, p...); return len(p), nil })
			rep.Print(w, sc.Tolerance)
			t.Fatalf("%s at %v did not settle:\n%s", s.Event, s.At, b)
		}
	}
	if !rep.Final.Within(sc.Tolerance) || rep.Final.LostQuorum != 0 {
		t.Fatalf("final state: %+v", rep.Final)
	}
	again := Run(sc, nil)
	if !reflect.DeepEqual(rep.Operators, again.Operators) || rep.Final != again.Final {
		t.Fatalf("two runs with one seed differ: %v %+v / %v %+v", rep.Operators, rep.Final, again.Operators, again.Final)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
