package main

import "regexp"

// statementGroups is the version of statementClasses a run's
// results.json was grouped by (Results.StatementGroups): 0 = before
// the broker's generated push_direct/ack_direct calls and their route
// look-ups were grouped (a run of that time has them under other),
// 1 = with them under push and ack.
const statementGroups = 1

// statementClasses sort the broker's statements by the engine function
// they call (pg_stat_statements tracks top-level statements, whose time
// includes the function's). The broker's fast paths call functions
// generated per queue and rotation table: pgque.push_direct_q<id>_t<n>
// (push, after a pgque.push_route look-up) and pgque.ack_direct_q<id>_t<n>
// (ack, after a pgque.ack_route look-up).
var statementClasses = []struct {
	name string
	re   *regexp.Regexp
}{
	{"pop", regexp.MustCompile(`pgque\.(pop_any|pop_list|pop_partition|pop_by_label)\s*\(`)},
	{"reseed", regexp.MustCompile(`pgque\.group_reseed\s*\(`)},
	{"ack", regexp.MustCompile(`pgque\.(group_ack|ack_route|ack_direct_q\d+_t\d+)\s*\(`)},
	{"push", regexp.MustCompile(`pgque\.(push|push_route|push_direct_q\d+_t\d+)\s*\(`)},
	{"tick", regexp.MustCompile(`pgque\.(ticker|force_next_tick)\s*\(`)},
}

// statementClass is the class of statement text q, "other" for none.
func statementClass(q string) string {
	for _, sc := range statementClasses {
		if sc.re.MatchString(q) {
			return sc.name
		}
	}
	return "other"
}
