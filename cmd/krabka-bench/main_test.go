package main

import (
	"strings"
	"testing"
	"time"
)

func TestCheckDurationsRefusesValuesThatMeasureNothing(t *testing.T) {
	ok := func(settle, idle, warm time.Duration, scale, tol float64) error {
		return checkDurations(settle, idle, warm, scale, tol)
	}
	if err := ok(0, time.Second, time.Minute, 1, 0.05); err != nil {
		t.Fatalf("a zero settle wait is valid: %v", err)
	}
	for _, c := range []struct {
		name string
		err  error
		flag string
	}{
		{"negative settle", ok(-time.Second, time.Second, time.Minute, 1, 0.05), "-roles-settle"},
		{"zero idle window", ok(0, 0, time.Minute, 1, 0.05), "-idle-window"},
		{"negative warm-up", ok(0, time.Second, -time.Minute, 1, 0.05), "-warm-max"},
		{"zero scale", ok(0, time.Second, time.Minute, 0, 0.05), "-scale"},
		{"negative tolerance", ok(0, time.Second, time.Minute, 1, -0.1), "-tolerance"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.flag) {
			t.Errorf("%s: got %v, want an error naming %s", c.name, c.err, c.flag)
		}
	}
}

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("1, 100,10000")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 100 || got[2] != 10000 {
		t.Fatalf("parseCounts: got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-3", "x", "1,,2"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q): no error", bad)
		}
	}
}

func TestParsePlacement(t *testing.T) {
	p, err := parsePlacement("1, 2")
	if err != nil || p.Coordinator != 1 || p.Leader != 2 {
		t.Fatalf("parsePlacement(1, 2) = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "1", "1,2,3", "a,2", "1,-2"} {
		if _, err := parsePlacement(bad); err == nil {
			t.Errorf("parsePlacement(%q): no error", bad)
		}
	}
}
