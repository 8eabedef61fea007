package coordination

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// sliceClock is a Clock of a type without ==: its settings cannot key the
// table of shared settings.
type sliceClock struct{ ticks []int64 }

func (c sliceClock) NowMillis() int64                     { return 0 }
func (c sliceClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }
func resetSharedSettings(t *testing.T) {
	t.Helper()
	sharedSettings.mu.Lock()
	saved := sharedSettings.byValue
	sharedSettings.byValue = nil
	sharedSettings.mu.Unlock()
	t.Cleanup(func() {
		sharedSettings.mu.Lock()
		sharedSettings.byValue = saved
		sharedSettings.mu.Unlock()
	})
}

// TestSettingsAreSharedByEqualOptions: campaigns with equal options share
// one copy of their settings, with the same values as their own copy would
// have; different options, a clock without ==, and options past the
// table's bound each keep their own.
func TestSettingsAreSharedByEqualOptions(t *testing.T) {
	resetSharedSettings(t)
	build := func(options ...Option) *settings {
		t.Helper()
		s, err := newSettings(options)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := build(WithTopic("coord-a"), WithPartitions(16))
	b := build(WithTopic("coord-a"), WithPartitions(16))
	if a != b {
		t.Error("equal options built two copies of their settings")
	}
	if own, _ := buildSettings([]Option{WithTopic("coord-a"), WithPartitions(16)}, true, LeaseConfig{}); *own != *a {
		t.Errorf("the shared settings %+v differ from the options' own %+v", *a, *own)
	}
	if c := build(WithTopic("coord-a"), WithPartitions(8)); c == a || c.partitions != 8 {
		t.Errorf("other options got the shared settings of the first (partitions %d)", c.partitions)
	}
	if x, y := build(WithClock(sliceClock{})), build(WithClock(sliceClock{})); x == y {
		t.Error("settings with a clock without == were shared")
	}

	// The table holds settings that a campaign still uses: these stay in
	// use until the end of the test.
	var fill []*settings
	for i := range maxSharedSettings {
		fill = append(fill, build(WithTopic(fmt.Sprintf("coord-fill-%d", i))))
	}
	defer runtime.KeepAlive(fill)
	if x, y := build(WithTopic("coord-past-the-bound")), build(WithTopic("coord-past-the-bound")); x == y || x.topic != "coord-past-the-bound" {
		t.Error("settings past the bound were shared: the table grows without end")
	}
	if a2 := build(WithTopic("coord-a"), WithPartitions(16)); a2 != a {
		t.Error("settings shared before the table filled are no longer shared")
	}
}

// TestSharedSettingsAreForgottenWithTheirLastUser: the table keeps settings
// only while a campaign or a leadership uses them (a weak pointer under
// their unique.Handle), so settings built once and dropped leave it, and
// do not count against its bound (before unique, an entry stayed for the
// life of the process).
func TestSharedSettingsAreForgottenWithTheirLastUser(t *testing.T) {
	resetSharedSettings(t)
	for i := range 2 * maxSharedSettings {
		if _, err := newSettings([]Option{WithTopic(fmt.Sprintf("coord-dropped-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	entries := func() int {
		sharedSettings.mu.Lock()
		defer sharedSettings.mu.Unlock()
		return len(sharedSettings.byValue)
	}
	// The collector runs the cleanups on a goroutine of its own: give it
	// a few cycles.
	for range 100 {
		runtime.GC()
		if entries() == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries of dropped settings are still in the table; want none", n)
	}
	a, err := newSettings([]Option{WithTopic("coord-kept")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSettings([]Option{WithTopic("coord-kept")})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("settings built after dropped ones filled the table were not shared: the dropped ones still count against the bound")
	}
}
