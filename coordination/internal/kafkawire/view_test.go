package kafkawire

import (
	"bytes"
	"fmt"
	"testing"
)

// The tests of the View alone: the merge of a walk's older records and the
// prune of a group that no caller keeps.

func viewOf(t *testing.T, records ...Record) *View {
	t.Helper()
	var v View
	for _, r := range records {
		v.Add(r.Offset, r.Key, r.Value, r.Timestamp)
	}
	return &v
}

func rec(offset int64, key, value string) Record {
	var v []byte
	if value != "" {
		v = []byte(value)
	}
	return Record{Offset: offset, Key: []byte(key), Value: v, Timestamp: offset}
}

func viewText(records []Record) string {
	var b bytes.Buffer
	for _, r := range records {
		fmt.Fprintf(&b, "%d:%s=%s ", r.Offset, r.Key, r.Value)
	}
	return b.String()
}

func TestViewMergeKeepsTheNewestOfEveryKeyInOffsetOrder(t *testing.T) {
	// The view kept group b from offset 10 on; the walk brings group b's
	// records below 12, the offset the view had reached when it began.
	v := viewOf(t,
		rec(1, "a/1", "x"),
		rec(5, "a/2", "x"),
		rec(10, "b/2", "new"), // newer than the walk's b/2
		rec(11, "a/1", "y"),
		rec(14, "b/3", ""), // a tombstone, newer than the walk's b/3
	)
	v.Merge([]Record{
		rec(0, "b/1", "old"),
		rec(2, "b/2", "old"),
		rec(3, "b/1", "mid"), // supersedes offset 0
		rec(4, "b/3", "old"),
		rec(6, "b/4", "x"),
		rec(10, "b/2", "new"), // the same record as the view's
		rec(7, "b/5", ""),     // a tombstone stays, as compaction keeps it a while
	})
	want := "3:b/1=mid 5:a/2=x 6:b/4=x 7:b/5= 10:b/2=new 11:a/1=y 14:b/3= "
	if got := viewText(v.Records(0, nil)); got != want {
		t.Fatalf("after the merge the view holds\n%s\nwant\n%s", got, want)
	}
	if got := v.Len(); got != 7 {
		t.Fatalf("Len = %d; want 7", got)
	}
	// The index follows the rebuilt log: a newer record supersedes the
	// merged one, and the next compaction keeps the order.
	v.Add(20, []byte("b/1"), []byte("newest"), 20)
	want = "5:a/2=x 6:b/4=x 7:b/5= 10:b/2=new 11:a/1=y 14:b/3= 20:b/1=newest "
	if got := viewText(v.Records(0, nil)); got != want {
		t.Fatalf("after an Add the view holds\n%s\nwant\n%s", got, want)
	}
	if got := viewText(v.Records(6, func(key []byte) bool { return bytes.HasPrefix(key, []byte("b/")) })); got != "6:b/4=x 7:b/5= 10:b/2=new 14:b/3= 20:b/1=newest " {
		t.Fatalf("Records(6, group b) = %s", got)
	}
}

func TestViewMergeIntoAnEmptyView(t *testing.T) {
	var v View
	v.Merge([]Record{rec(3, "k", "1"), rec(8, "k", "2"), rec(9, "j", "1")})
	if got := viewText(v.Records(0, nil)); got != "8:k=2 9:j=1 " {
		t.Fatalf("view = %s", got)
	}
	if last, ok := v.Last(); !ok || last != 9 {
		t.Fatalf("Last = %d, %v; want 9", last, ok)
	}
}

func TestViewPruneDropsAGroup(t *testing.T) {
	v := viewOf(t, rec(1, "a/1", "x"), rec(2, "b/1", "x"), rec(3, "a/1", "y"), rec(4, "b/2", "x"), rec(5, "c/1", "x"))
	v.Prune(func(key []byte) bool { return bytes.HasPrefix(key, []byte("b/")) })
	if got := viewText(v.Records(0, nil)); got != "3:a/1=y 5:c/1=x " {
		t.Fatalf("after the prune the view holds %s", got)
	}
	v.Add(6, []byte("a/1"), []byte("z"), 6)
	if got := viewText(v.Records(0, nil)); got != "5:c/1=x 6:a/1=z " {
		t.Fatalf("after an Add the view holds %s", got)
	}
}

// TestViewPruneOfMostKeys: a prune that drops most of the keys (the view
// makes its index and log anew, smaller) keeps the records of the others,
// and the view folds later records as before.
func TestViewPruneOfMostKeys(t *testing.T) {
	var v View
	for i := range 1000 {
		v.Add(int64(i), fmt.Appendf(nil, "gone/%d", i), []byte("x"), int64(i))
	}
	v.Add(1000, []byte("kept/1"), []byte("x"), 1000)
	v.Add(1001, []byte("gone/7"), []byte("y"), 1001)
	v.Add(1002, []byte("kept/2"), []byte("x"), 1002)
	v.Prune(func(key []byte) bool { return bytes.HasPrefix(key, []byte("gone/")) })
	if got := viewText(v.Records(0, nil)); got != "1000:kept/1=x 1002:kept/2=x " {
		t.Fatalf("after the prune the view holds %s", got)
	}
	if cap(v.log) > 2*len(v.log) {
		t.Errorf("the log keeps room for %d records after the prune, for %d", cap(v.log), len(v.log))
	}
	v.Add(1003, []byte("kept/1"), []byte("z"), 1003)
	v.Add(1004, []byte("gone/1"), []byte("back"), 1004)
	if got := viewText(v.Records(1001, nil)); got != "1002:kept/2=x 1003:kept/1=z 1004:gone/1=back " {
		t.Fatalf("after later Adds the view holds %s", got)
	}
}
