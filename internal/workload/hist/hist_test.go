package hist

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func find(t *testing.T, snaps []Snapshot, name string) Snapshot {
	t.Helper()
	for _, s := range snaps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no snapshot %q in %v", name, snaps)
	return Snapshot{}
}

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if math.Abs(float64(got-want)) > 0.01*float64(want)+float64(time.Microsecond) {
		t.Errorf("%s = %v, want %v (+-1%%)", what, got, want)
	}
}

func TestTickPercentilesAcrossRecorders(t *testing.T) {
	g := NewRegistry([]string{"read", "update"})
	a, b := g.NewRecorder(), g.NewRecorder()
	// 1..1000 ms of reads split over two workers; one slow update; errors.
	for i := 1; i <= 1000; i++ {
		r := a
		if i%2 == 0 {
			r = b
		}
		r.Record(0, time.Duration(i)*time.Millisecond)
	}
	b.Record(1, 3*time.Second)
	a.Error(1)
	a.Error(1)

	in, cum := g.Tick()
	read := find(t, in, "read")
	if read.Count != 1000 || read.Errors != 0 {
		t.Fatalf("read count %d errors %d", read.Count, read.Errors)
	}
	near(t, "p50", read.P50, 500*time.Millisecond)
	near(t, "p95", read.P95, 950*time.Millisecond)
	near(t, "p99", read.P99, 990*time.Millisecond)
	if read.Max != time.Second {
		t.Errorf("max %v, want exactly 1s", read.Max)
	}
	if read.Mean != 500500*time.Microsecond {
		t.Errorf("mean %v, want exactly 500.5ms", read.Mean)
	}
	up := find(t, in, "update")
	if up.Count != 1 || up.Errors != 2 || up.Max != 3*time.Second {
		t.Errorf("update: %+v", up)
	}
	total := find(t, cum, "total")
	if total.Count != 1001 || total.Errors != 2 || total.Max != 3*time.Second {
		t.Errorf("total: %+v", total)
	}

	// The next interval starts empty; the cumulative keeps everything.
	a.Record(0, 2*time.Millisecond)
	in, cum = g.Tick()
	if r := find(t, in, "read"); r.Count != 1 || r.Max != 2*time.Millisecond {
		t.Errorf("second interval read: %+v", r)
	}
	if r := find(t, in, "update"); r.Count != 0 || r.Errors != 0 {
		t.Errorf("second interval update: %+v", r)
	}
	if r := find(t, cum, "read"); r.Count != 1001 || r.Max != time.Second {
		t.Errorf("cumulative read: %+v", r)
	}
	if r := find(t, cum, "update"); r.Errors != 2 {
		t.Errorf("cumulative update errors %d, want 2", r.Errors)
	}
}

func TestRecordClampsOutOfRange(t *testing.T) {
	g := NewRegistry([]string{"op"})
	r := g.NewRecorder()
	r.Record(0, 10*time.Nanosecond)
	r.Record(0, 10*time.Minute)
	_, cum := g.Tick()
	s := find(t, cum, "op")
	if s.Count != 2 || s.Max != 10*time.Minute {
		t.Errorf("%+v", s)
	}
}

func TestConcurrentRecordAndTick(t *testing.T) {
	g := NewRegistry([]string{"op"})
	var wg sync.WaitGroup
	const workers, each = 8, 5000
	for w := 0; w < workers; w++ {
		r := g.NewRecorder()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r.Record(0, time.Duration(i)*time.Microsecond)
				if i%100 == 0 {
					r.Error(0)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var count, errs int64
loop:
	for {
		select {
		case <-done:
			break loop
		default:
			in, _ := g.Tick()
			count += in[0].Count
			errs += in[0].Errors
		}
	}
	in, cum := g.Tick()
	count += in[0].Count
	errs += in[0].Errors
	if count != workers*each || cum[0].Count != workers*each {
		t.Errorf("intervals summed to %d, cumulative %d, want %d", count, cum[0].Count, workers*each)
	}
	if errs != workers*each/100 {
		t.Errorf("errors %d, want %d", errs, workers*each/100)
	}
}

func TestReportOutput(t *testing.T) {
	g := NewRegistry([]string{"read", "update", "scan"})
	r := g.NewRecorder()
	for i := 0; i < 100; i++ {
		r.Record(0, time.Millisecond)
	}
	for i := 0; i < 50; i++ {
		r.Record(1, 4*time.Millisecond)
	}
	r.Error(1)
	in, cum := g.Tick()
	var buf bytes.Buffer
	WriteTick(&buf, 2*time.Second, time.Second, in, cum)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// read, update and total; scan never ran.
	if len(lines) != 3 {
		t.Fatalf("tick rows:\n%s", buf.String())
	}
	if f := strings.Fields(lines[0]); f[1] != "read" || f[2] != "0" || f[3] != "100.0" || f[4] != "50.0" || f[5] != "1.00" {
		t.Errorf("read row %q", lines[0])
	}
	if f := strings.Fields(lines[1]); f[1] != "update" || f[2] != "1" || f[3] != "50.0" || f[8] != "4.00" {
		t.Errorf("update row %q", lines[1])
	}
	if strings.Contains(buf.String(), "scan") {
		t.Errorf("a type that never ran is printed:\n%s", buf.String())
	}

	buf.Reset()
	WriteFinal(&buf, 2*time.Second, cum)
	want := FinalHeader + `
    2.0s   read                    0            100           50.0     1.00     1.00     1.00     1.00
    2.0s   update                  1             50           25.0     4.00     4.00     4.00     4.00
    2.0s   total                   1            150           75.0     2.00     4.00     4.00     4.00
`
	if buf.String() != want {
		t.Errorf("final table:\n%s\nwant:\n%s", buf.String(), want)
	}

	got := strings.Join(SummaryFields(2*time.Second, cum), " ")
	for _, kv := range []string{"ops=150", "errors=1", "ops/sec=75.0", "read_ops/sec=50.0",
		"update_ops/sec=25.0", "update_errors=1", "p99_ms=4.000", "max_ms=4.000"} {
		if !strings.Contains(" "+got+" ", " "+kv+" ") {
			t.Errorf("summary %q lacks %q", got, kv)
		}
	}
	if strings.Contains(got, "scan_") {
		t.Errorf("summary mentions a type that never ran: %q", got)
	}
}
