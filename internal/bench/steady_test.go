package bench

import (
	"context"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeSeries returns a series whose samples take the durations of ds, one
// per call, then the last one for ever.
func fakeSeries(name string, window, n int, converge bool, ds ...time.Duration) *Series {
	i := 0
	return &Series{Name: name, Window: window, N: n, Converge: converge, Next: func(context.Context) (Sample, error) {
		d := ds[min(i, len(ds)-1)]
		i++
		return Sample{D: d}, nil
	}}
}

func TestRunSteadyConverges(t *testing.T) {
	ms := time.Millisecond
	// A Kafka series that warms from 10 ms to 5 ms over its first 3
	// windows of 2 samples, and an etcd series that is noisy but does not
	// count.
	kafka := fakeSeries("kafka", 2, 4, true, 10*ms, 10*ms, 8*ms, 8*ms, 5*ms)
	etcd := fakeSeries("etcd", 4, 8, false, 1*ms, 3*ms, 1*ms, 9*ms)
	w, err := RunSteady(context.Background(), []*Series{kafka, etcd}, 0.05, 2, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Converged || w.Windows != 4 {
		t.Errorf("got converged %v after %d windows, want true after 4 (10, 8, 5, 5 ms)", w.Converged, w.Windows)
	}
	if got := len(kafka.Cold); got != 2 || kafka.Cold[0].D != 10*ms {
		t.Errorf("cold window: %d samples, first %v; want 2, 10ms", got, kafka.Cold[0].D)
	}
	if len(kafka.Steady) != 4 || len(etcd.Steady) != 8 {
		t.Errorf("steady: %d and %d samples, want 4 and 8", len(kafka.Steady), len(etcd.Steady))
	}
	if len(etcd.Cold) != 4 {
		t.Errorf("etcd's cold window: %d samples, want 4", len(etcd.Cold))
	}
}

func TestRunSteadyGivesUp(t *testing.T) {
	ms := time.Millisecond
	// Alternating windows of 10 and 20 ms never converge; a zero maxWarm
	// stops after the minimum of two windows.
	i := 0
	s := &Series{Name: "noisy", Window: 1, N: 1, Converge: true, Next: func(context.Context) (Sample, error) {
		i++
		return Sample{D: time.Duration(10+10*(i%2)) * ms}, nil
	}}
	w, err := RunSteady(context.Background(), []*Series{s}, 0.05, 2, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.Converged || w.Windows != 2 || w.LastChange < 0.4 {
		t.Errorf("got converged %v after %d windows, change %.2f; want false after 2, change ≥ 0.4", w.Converged, w.Windows, w.LastChange)
	}
}

func TestFloorBatchDecodes(t *testing.T) {
	raw := floorBatch(7, 3, 11, []byte("k"), []byte("value"))
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if batch.ProducerID != 7 || batch.ProducerEpoch != 3 || batch.FirstSequence != 11 || batch.NumRecords != 1 || batch.Attributes != 0x10 {
		t.Errorf("got %+v", batch)
	}
	if got, want := uint32(batch.CRC), crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Errorf("CRC %x, want %x", got, want)
	}
	if int(batch.Length) != len(raw)-12 {
		t.Errorf("length %d, want %d", batch.Length, len(raw)-12)
	}
}
