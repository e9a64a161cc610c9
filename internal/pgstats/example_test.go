package pgstats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgstats"
)

// A benchmark samples WAL and dead tuples around its workload.
func Example() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres:///app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)

	from, err := pgstats.ReadWAL(ctx, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	time.Sleep(10 * time.Second) // the workload runs meanwhile
	to, err := pgstats.ReadWAL(ctx, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("WAL: %.0f B/s\n", pgstats.Rate(from, to).BytesPerSec)

	tables, err := pgstats.TableStats(ctx, conn, "pgque")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range pgstats.SumByKind(tables) {
		fmt.Printf("%s: %d dead tuples in %d tables\n", k.Kind, k.DeadTuples, k.Tables)
	}
}
