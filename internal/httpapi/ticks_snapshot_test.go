package httpapi

import "testing"

// sees follows pg_visible_in_snapshot: below xmin visible, at or above
// xmax not, in between visible unless listed as running.
func TestSnapshotSees(t *testing.T) {
	s, err := parseSnapshot("100:110:102,105")
	if err != nil {
		t.Fatal(err)
	}
	for x, want := range map[int64]bool{99: true, 100: true, 101: true, 102: false, 105: false, 109: true, 110: false, 200: false} {
		if got := s.sees(x); got != want {
			t.Errorf("sees(%d) = %v, want %v", x, got, want)
		}
	}
	if !s.seesAll([]int64{99, 101}) || s.seesAll([]int64{99, 102}) || s.seesAll(nil) {
		t.Error("seesAll")
	}
	var none *snapshot
	if none.seesAll([]int64{1}) {
		t.Error("a nil snapshot covers nothing")
	}
	if e, err := parseSnapshot("7:7:"); err != nil || !e.sees(6) || e.sees(7) {
		t.Errorf("empty xip: %v %v", e, err)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:x"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q): no error", bad)
		}
	}
}
