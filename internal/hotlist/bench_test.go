package hotlist

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

func benchList(b *testing.B, o Options, parts, groups int) (*HotList, string, []string) {
	b.Helper()
	o.Logger = quietLogger()
	o.EmptyGrace = -1
	h := New(o)
	key := queuekey.Make("t", "bench")
	names := make([]string, parts)
	for i := range names {
		names[i] = fmt.Sprintf("p%05d", i)
	}
	for g := 0; g < groups; g++ {
		co, err := h.Checkout(b.Context(), Request{Key: key, Group: fmt.Sprint("g", g), Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		co.Release()
	}
	for _, n := range names { // intern every partition once
		h.Mark(key, PartRef{ID: NoID, Name: n}, SourceReseed)
	}
	for g := 0; g < groups; g++ {
		drainAll(b, h, key, fmt.Sprint("g", g))
	}
	return h, key, names
}

func drainAll(b *testing.B, h *HotList, key, group string) {
	for {
		co, err := h.Checkout(b.Context(), Request{Key: key, Group: group, Batch: 1 << 20, Partitions: 1 << 10})
		if err != nil {
			b.Fatal(err)
		}
		cs := co.Candidates()
		vs := make([]Verdict, len(cs))
		for i, c := range cs {
			vs[i] = Verdict{PartitionID: NoID, Partition: c.Name, Kind: VerdictEmpty}
		}
		co.CheckIn(vs)
		if len(cs) == 0 {
			return
		}
	}
}

// BenchmarkMark: one push mark on a queue of 10,000 partitions with 3
// consumer groups (a mark updates every ring of the queue).
func BenchmarkMark(b *testing.B) {
	h, key, names := benchList(b, Options{}, 10000, 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Mark(key, PartRef{ID: NoID, Name: names[i%len(names)]}, SourcePush)
	}
}

func BenchmarkMarkParallel(b *testing.B) {
	h, key, names := benchList(b, Options{}, 10000, 3)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h.Mark(key, PartRef{ID: NoID, Name: names[i%len(names)]}, SourcePush)
			i += 7
		}
	})
}

// BenchmarkCheckoutCheckin: 10 hot partitions out of 100 / 10,000: one
// mark each, then check-out + check-in (took, auto-ack, drained). The cost
// should not depend on the number of idle partitions.
func BenchmarkCheckoutCheckin(b *testing.B) {
	for _, w := range []struct {
		name string
		w    Width
	}{{"narrow", WidthNarrow}, {"wide", WidthWide}} {
		for _, parts := range []int{100, 10000} {
			b.Run(fmt.Sprintf("%s/%d", w.name, parts), func(b *testing.B) {
				h, key, names := benchList(b, Options{Width: w.w}, parts, 1)
				hot := names[:10]
				vs := make([]Verdict, 0, 256)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, n := range hot {
						h.Mark(key, PartRef{ID: NoID, Name: n}, SourcePush)
					}
					co, err := h.Checkout(b.Context(), Request{Key: key, Group: "g0", Batch: 10, Partitions: 10, AutoAck: true})
					if err != nil {
						b.Fatal(err)
					}
					vs = vs[:0]
					for _, c := range co.Candidates() {
						vs = append(vs, Verdict{PartitionID: c.ID, Partition: c.Name, Kind: VerdictTook, Drained: true})
					}
					co.CheckIn(vs)
				}
			})
		}
	}
}

// BenchmarkCheckoutParallel: concurrent pops on one ring where every
// partition stays hot (verdict took, not drained, lease parks it).
func BenchmarkCheckoutParallel(b *testing.B) {
	h, key, names := benchList(b, Options{}, 1000, 1)
	for _, n := range names {
		h.Mark(key, PartRef{ID: NoID, Name: n}, SourcePush)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		vs := make([]Verdict, 0, 64)
		for pb.Next() {
			co, err := h.Checkout(b.Context(), Request{Key: key, Group: "g0", Batch: 10, Partitions: 1, AutoAck: true})
			if err != nil {
				b.Error(err)
				return
			}
			vs = vs[:0]
			for _, c := range co.Candidates() {
				vs = append(vs, Verdict{PartitionID: c.ID, Partition: c.Name, Kind: VerdictTook, Until: time.Time{}})
			}
			co.CheckIn(vs)
		}
	})
}
