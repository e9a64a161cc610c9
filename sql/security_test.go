package sql_test

// Security tests (docs/design/engine.md, "Security"): a role that may create in
// public (or that created schema pgque) must never get the engine to run its
// code, and the install must refuse a pgque schema it did not create.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// plantTypes are the concrete types planted signatures use: the argument
// types of the engine's calls and what implicitly casts to them.
// TestSecurityCatalog checks that every type the engine's tables and
// functions use is among them, so the list cannot silently go stale.
var plantTypes = []string{
	"smallint", "integer", "bigint", "numeric", "real", "double precision",
	"text", "character varying", "character", "name", `"char"`, "boolean",
	"timestamp with time zone", "timestamp without time zone", "date",
	"time without time zone", "interval", "jsonb", "json", "xid8", "xid",
	"oid", "regclass", "regnamespace", "regproc", "regprocedure", "regtype",
	"regrole", "bytea", "uuid", "pg_snapshot", "txid_snapshot", "pg_lsn",
}

// anyChoices stand in for a "any" parameter (format, concat, ...).
var anyChoices = []string{"text", "integer", "bigint", "numeric", "jsonb", "name", "regclass", "boolean", "timestamp with time zone", "interval", "oid", "xid8"}

// maxVariants bounds the planted signatures per catalog overload: variants
// differing from the catalog's in fewer positions come first.
const maxVariants = 64

var (
	reIdentCall = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_$]*\s*\(`)
	reOperator  = regexp.MustCompile("[-+*/<>=~!@#%^&|`?]+")
)

// engineNames returns, from the install script, every unqualified name
// followed by "(" and every operator token. The caller keeps those that
// exist in pg_catalog: that filters keywords, variables and types away.
func engineNames(script string) (calls, ops []string) {
	seenC, seenO := map[string]bool{}, map[string]bool{}
	for _, loc := range reIdentCall.FindAllStringIndex(script, -1) {
		if loc[0] > 0 {
			prev := script[loc[0]-1]
			// pg_catalog.x counts too: a call qualified today is still a
			// name to plant, so the test keeps proving it stays qualified.
			qualifiedCatalog := loc[0] >= len("pg_catalog.") && script[loc[0]-len("pg_catalog."):loc[0]] == "pg_catalog."
			if !qualifiedCatalog && (prev == '.' || prev == '_' || prev == '$' || prev == '"' ||
				(prev >= 'a' && prev <= 'z') || (prev >= 'A' && prev <= 'Z') || (prev >= '0' && prev <= '9')) {
				continue // qualified (pgque.x) or part of a longer token
			}
		}
		name := strings.ToLower(strings.TrimRight(strings.TrimSuffix(script[loc[0]:loc[1]], "("), " \t\r\n"))
		if !seenC[name] {
			seenC[name] = true
			calls = append(calls, name)
		}
	}
	for _, tok := range reOperator.FindAllString(script, -1) {
		if tok == "!=" {
			tok = "<>"
		}
		if !seenO[tok] {
			seenO[tok] = true
			ops = append(ops, tok)
		}
	}
	sort.Strings(calls)
	sort.Strings(ops)
	return calls, ops
}

// typeInfo is what planting needs to know about the catalog's types.
type typeInfo struct {
	names    map[uint32]string   // oid -> format_type
	array    map[uint32]uint32   // element oid -> array oid
	elem     map[uint32]uint32   // array oid -> element oid
	implicit map[uint32][]uint32 // target -> planted types that implicitly cast to it
	scalars  []uint32            // plantTypes
	universe map[uint32]bool     // plantTypes and their arrays
	anyOIDs  []uint32
}

func loadTypes(t *testing.T, conn *pgx.Conn) *typeInfo {
	t.Helper()
	ctx := ctxT(t)
	ti := &typeInfo{names: map[uint32]string{}, array: map[uint32]uint32{}, elem: map[uint32]uint32{},
		implicit: map[uint32][]uint32{}, universe: map[uint32]bool{}}
	rows, err := conn.Query(ctx, `SELECT t.oid, pg_catalog.format_type(t.oid, NULL), t.typarray, t.typelem, t.typtype::text, t.typcategory::text
	                                FROM pg_catalog.pg_type t`)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]uint32{}
	for rows.Next() {
		var oid, arr, elem uint32
		var name, typtype, cat string
		if err := rows.Scan(&oid, &name, &arr, &elem, &typtype, &cat); err != nil {
			t.Fatal(err)
		}
		ti.names[oid] = name
		byName[name] = oid
		if arr != 0 {
			ti.array[oid] = arr
		}
		if elem != 0 && cat == "A" {
			ti.elem[oid] = elem
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range plantTypes {
		oid, ok := byName[n]
		if !ok {
			t.Fatalf("type %s not in pg_type", n)
		}
		ti.scalars = append(ti.scalars, oid)
		ti.universe[oid] = true
		if a := ti.array[oid]; a != 0 {
			ti.universe[a] = true
		}
	}
	for _, n := range anyChoices {
		ti.anyOIDs = append(ti.anyOIDs, byName[n])
	}
	rows, err = conn.Query(ctx, `SELECT castsource, casttarget FROM pg_catalog.pg_cast WHERE castcontext OPERATOR(pg_catalog.=) 'i'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var src, dst uint32
		if err := rows.Scan(&src, &dst); err != nil {
			t.Fatal(err)
		}
		if ti.universe[src] {
			ti.implicit[dst] = append(ti.implicit[dst], src)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ti
}

// Pseudo-types a planted signature can stand in for.
var (
	polyElem  = map[string]bool{"anyelement": true, "anynonarray": true, "anycompatible": true, "anycompatiblenonarray": true}
	polyArray = map[string]bool{"anyarray": true, "anycompatiblearray": true}
)

// substitute maps a declared type to a concrete one for polymorphic element
// type el; ok is false for a pseudo-type that cannot be planted.
func (ti *typeInfo) substitute(typ, el uint32) (uint32, bool) {
	name := ti.names[typ]
	switch {
	case polyElem[name]:
		return el, true
	case polyArray[name]:
		a := ti.array[el]
		return a, a != 0
	}
	return typ, true
}

func (ti *typeInfo) isPoly(typ uint32) bool {
	n := ti.names[typ]
	return polyElem[n] || polyArray[n]
}

// choices are the planted types for one declared (concrete or "any") type:
// the type itself first, then what implicitly casts to it.
func (ti *typeInfo) choices(typ uint32) []uint32 {
	if ti.names[typ] == `"any"` {
		return ti.anyOIDs
	}
	out := []uint32{typ}
	for _, s := range ti.implicit[typ] {
		if s != typ {
			out = append(out, s)
		}
	}
	return out
}

// variants returns up to maxVariants argument-type vectors, fewest changed
// positions (against choices[i][0]) first, at most maxChanges changes.
func variants(choices [][]uint32, maxChanges int) [][]uint32 {
	var out [][]uint32
	for changes := 0; changes <= min(len(choices), maxChanges) && len(out) < maxVariants; changes++ {
		var rec func(i, left int, cur []uint32)
		rec = func(i, left int, cur []uint32) {
			if len(out) >= maxVariants {
				return
			}
			if i == len(choices) {
				if left == 0 {
					out = append(out, append([]uint32(nil), cur...))
				}
				return
			}
			rec(i+1, left, append(cur, choices[i][0]))
			if left > 0 {
				for _, c := range choices[i][1:] {
					rec(i+1, left-1, append(cur, c))
				}
			}
		}
		rec(0, changes, nil)
	}
	return out
}

// planter builds the attacker's statements.
type planter struct {
	schema string // where the planted functions and operators go
	ti     *typeInfo
	seen   map[string]bool // public.name(args) already planted
	stmts  []string
	n      int
}

func (p *planter) sig(name string, args []uint32) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = p.ti.names[a]
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

// body is a planted function's body: record the run (and try to escalate).
func body(sig, ret string) string {
	tag := "$planted$"
	return fmt.Sprintf("LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %s BEGIN PERFORM attk.hit(%s); RETURN%s; END %s",
		tag, quoteLit(sig), ret, tag)
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

type catalogProc struct {
	oid        uint32
	name, kind string
	args       []uint32
	variadic   uint32
	ret        uint32
	retset     bool
	argNames   []string
	nDefaults  int
	modes      []string
	allArgs    []uint32
	result     string
	aggKind    string
}

func (p *planter) function(cp catalogProc) {
	for _, m := range cp.modes {
		if m == "b" {
			return // INOUT: none of the engine's calls
		}
	}
	hasTable, hasOut := false, false
	for _, m := range cp.modes {
		hasTable = hasTable || m == "t"
		hasOut = hasOut || m == "o"
	}
	poly := p.ti.isPoly(cp.ret)
	for _, a := range cp.args {
		poly = poly || p.ti.isPoly(a)
	}
	if poly && (hasTable || hasOut) {
		return
	}
	els := []uint32{0}
	if poly {
		els = p.ti.scalars
	}
	// The argument lists: as declared, and a variadic one expanded to 1..3
	// trailing element arguments (VARIADIC "any" exists only that way).
	type form struct {
		args      []uint32
		variadic  bool // keep the last parameter VARIADIC
		defaults  int
		expansion bool
	}
	var forms []form
	anyVariadic := cp.variadic != 0 && p.ti.names[cp.variadic] == `"any"`
	if !anyVariadic {
		forms = append(forms, form{args: cp.args, variadic: cp.variadic != 0, defaults: cp.nDefaults})
	}
	if cp.variadic != 0 && len(cp.args) > 0 {
		fixed := cp.args[:len(cp.args)-1]
		for extra := 1; extra <= 3; extra++ {
			a := append([]uint32(nil), fixed...)
			for i := 0; i < extra; i++ {
				a = append(a, cp.variadic)
			}
			forms = append(forms, form{args: a, expansion: true})
		}
	}
	for _, f := range forms {
		for _, el := range els {
			decl := make([]uint32, len(f.args))
			ok := true
			for i, a := range f.args {
				if decl[i], ok = p.ti.substitute(a, el); !ok {
					break
				}
				if n := p.ti.names[decl[i]]; strings.HasPrefix(n, "any") || n == "internal" || n == "cstring" || n == "record" || n == "trigger" || n == "event_trigger" {
					if n != `"any"` {
						ok = false
						break
					}
				}
			}
			if !ok {
				continue
			}
			ret, ok := p.ti.substitute(cp.ret, el)
			if !ok {
				continue
			}
			retName := p.ti.names[ret]
			if strings.HasPrefix(retName, "any") || retName == "internal" || retName == "cstring" || retName == "trigger" || retName == "event_trigger" || retName == "language_handler" {
				continue
			}
			ch := make([][]uint32, len(decl))
			for i, d := range decl {
				if f.variadic && i == len(decl)-1 {
					ch[i] = []uint32{d}
				} else {
					ch[i] = p.ti.choices(d)
				}
			}
			// With parameter defaults, variants that differ only in omitted
			// parameters would make the engine's call ambiguous (an error,
			// not a run): change one position at a time.
			maxChanges := len(ch)
			if f.defaults > 0 {
				maxChanges = 1
			}
			for _, v := range variants(ch, maxChanges) {
				p.plantFunction(cp, f.variadic, f.defaults, f.expansion, v, ret, hasTable, hasOut)
			}
		}
	}
}

func (p *planter) plantFunction(cp catalogProc, variadic bool, defaults int, expansion bool, args []uint32, ret uint32, hasTable, hasOut bool) {
	key := p.sig(cp.name, args)
	if p.seen[key] {
		return
	}
	p.seen[key] = true
	ident := pgx.Identifier{p.schema, cp.name}.Sanitize()
	if cp.kind == "a" {
		p.aggregate(ident, key, args, ret)
		return
	}
	params := make([]string, len(args))
	for i, a := range args {
		name := fmt.Sprintf("a%d", i)
		if !expansion && i < len(cp.argNames) && cp.argNames[i] != "" {
			name = pgx.Identifier{cp.argNames[i]}.Sanitize()
		}
		prefix := ""
		if variadic && i == len(args)-1 {
			prefix = "VARIADIC "
		}
		params[i] = prefix + name + " " + p.ti.names[a]
		if defaults > 0 && i >= len(args)-defaults {
			params[i] += " DEFAULT NULL"
		}
	}
	var returns, ret0 string
	switch {
	case hasTable:
		returns, ret0 = cp.result, ""
	case hasOut:
		for i, m := range cp.modes {
			if m == "o" {
				name := fmt.Sprintf("o%d", i)
				if i < len(cp.argNames) && cp.argNames[i] != "" {
					name = pgx.Identifier{cp.argNames[i]}.Sanitize()
				}
				params = append(params, "OUT "+name+" "+p.ti.names[cp.allArgs[i]])
			}
		}
		returns, ret0 = cp.result, ""
	default:
		returns = p.ti.names[ret]
		ret0 = " NULL"
		if cp.retset {
			returns, ret0 = "SETOF "+returns, ""
		}
		if p.ti.names[ret] == "void" {
			ret0 = ""
		}
	}
	p.stmts = append(p.stmts, fmt.Sprintf("CREATE FUNCTION %s(%s) RETURNS %s %s", ident, strings.Join(params, ", "), returns, body(key, ret0)))
}

func (p *planter) aggregate(ident, key string, args []uint32, ret uint32) {
	if p.ti.names[ret] == "record" {
		return
	}
	p.n++
	st := p.ti.names[ret]
	sf := fmt.Sprintf("attk.sf_%d", p.n)
	ff := fmt.Sprintf("attk.ff_%d", p.n)
	sfArgs := []string{"s " + st}
	aggArgs := []string{}
	for i, a := range args {
		sfArgs = append(sfArgs, fmt.Sprintf("a%d %s", i, p.ti.names[a]))
		aggArgs = append(aggArgs, p.ti.names[a])
	}
	if len(aggArgs) == 0 {
		aggArgs = []string{"*"}
	}
	p.stmts = append(p.stmts,
		fmt.Sprintf("CREATE FUNCTION %s(%s) RETURNS %s %s", sf, strings.Join(sfArgs, ", "), st, body(key, " s")),
		fmt.Sprintf("CREATE FUNCTION %s(s %s) RETURNS %s %s", ff, st, st, body(key, " s")),
		fmt.Sprintf("CREATE AGGREGATE %s(%s) (SFUNC = %s, STYPE = %s, FINALFUNC = %s)", ident, strings.Join(aggArgs, ", "), sf, st, ff))
}

func (p *planter) operator(name string, left, right, result uint32) {
	var els = []uint32{0}
	if p.ti.isPoly(left) || p.ti.isPoly(right) || p.ti.isPoly(result) {
		els = p.ti.scalars
	}
	for _, el := range els {
		l, ok1 := p.ti.substitute(left, el)
		r, ok2 := p.ti.substitute(right, el)
		res, ok3 := p.ti.substitute(result, el)
		if !ok1 || !ok2 || !ok3 || (l != 0 && !p.ti.universe[l]) || !p.ti.universe[r] {
			continue
		}
		var ch [][]uint32
		if l != 0 {
			ch = append(ch, p.ti.choices(l))
		}
		ch = append(ch, p.ti.choices(r))
		for _, v := range variants(ch, len(ch)) {
			var lt, rt uint32
			if l != 0 {
				lt, rt = v[0], v[1]
			} else {
				rt = v[0]
			}
			key := fmt.Sprintf("operator %s(%s, %s)", name, p.ti.names[lt], p.ti.names[rt])
			if lt == 0 {
				key = fmt.Sprintf("operator %s(NONE, %s)", name, p.ti.names[rt])
			}
			if p.seen[key] {
				continue
			}
			p.seen[key] = true
			p.n++
			fn := fmt.Sprintf("attk.op_%d", p.n)
			if lt != 0 {
				p.stmts = append(p.stmts,
					fmt.Sprintf("CREATE FUNCTION %s(l %s, r %s) RETURNS %s %s", fn, p.ti.names[lt], p.ti.names[rt], p.ti.names[res], body(key, " NULL")),
					fmt.Sprintf("CREATE OPERATOR %s.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)", p.schema, name, p.ti.names[lt], p.ti.names[rt], fn))
			} else {
				p.stmts = append(p.stmts,
					fmt.Sprintf("CREATE FUNCTION %s(r %s) RETURNS %s %s", fn, p.ti.names[rt], p.ti.names[res], body(key, " NULL")),
					fmt.Sprintf("CREATE OPERATOR %s.%s (RIGHTARG = %s, FUNCTION = %s)", p.schema, name, p.ti.names[rt], fn))
			}
		}
	}
}

// attacker is a low-privilege LOGIN role with CREATE on the database and on
// schema public, and the record of its planted code running.
type attacker struct {
	t       *testing.T
	role    string
	dsn     string // the attacker's own DSN
	su      *pgx.Conn
	planted int
	helpers int // attk.sf_/ff_/op_ functions made so far
	calls   []string
	ops     []string
}

func randSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withUser returns dsn connecting as role (the test cluster trusts local
// connections).
func withUser(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("connecting as %s: %v", role, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// newRole creates a LOGIN role dropped (with what it owns in dsn's
// database) at cleanup.
func newRole(t *testing.T, su *pgx.Conn, prefix, options string) string {
	t.Helper()
	role := prefix + "_" + randSuffix()
	login := "LOGIN"
	if strings.Contains(options, "NOLOGIN") {
		login = ""
	}
	if _, err := su.Exec(ctxT(t), fmt.Sprintf(`CREATE ROLE %s %s %s`, role, login, options)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = su.Exec(ctx, fmt.Sprintf(`DROP OWNED BY %s CASCADE`, role))
		if _, err := su.Exec(ctx, fmt.Sprintf(`DROP ROLE %s`, role)); err != nil {
			t.Logf("dropping role %s: %v", role, err)
		}
	})
	return role
}

// newAttacker creates the attacker and its bookkeeping (schema attk: a hit
// counter that survives rollbacks, a log, attk.hit() which planted code
// calls: it records the run and tries to escalate as whoever runs it).
func newAttacker(t *testing.T, dsn string, su *pgx.Conn) *attacker {
	t.Helper()
	var dbname string
	if err := su.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	a := &attacker{t: t, dsn: dsn, su: su}
	a.role = newRole(t, su, "atk", "NOSUPERUSER NOCREATEROLE NOCREATEDB")
	for _, q := range []string{
		fmt.Sprintf(`GRANT CREATE ON DATABASE %s TO %s`, pgx.Identifier{dbname}.Sanitize(), a.role),
		fmt.Sprintf(`GRANT CREATE, USAGE ON SCHEMA public TO %s`, a.role),
	} {
		if _, err := su.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	conn := withUser(t, dsn, a.role)
	setup := fmt.Sprintf(`
CREATE SCHEMA attk;
GRANT USAGE ON SCHEMA attk TO PUBLIC;
CREATE SEQUENCE attk.hits;
GRANT USAGE, UPDATE, SELECT ON SEQUENCE attk.hits TO PUBLIC;
CREATE TABLE attk.log (sig text, by_role text);
GRANT INSERT ON attk.log TO PUBLIC;
CREATE FUNCTION attk.hit(i_sig text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $hit$
BEGIN
    PERFORM pg_catalog.nextval('attk.hits'::pg_catalog.regclass);
    INSERT INTO attk.log VALUES (i_sig, current_user::text);
    RAISE WARNING 'pgque security test: planted %% ran as %%', i_sig, current_user;
    BEGIN EXECUTE 'ALTER ROLE %[1]s SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    BEGIN EXECUTE 'GRANT pgque_admin TO %[1]s'; EXCEPTION WHEN OTHERS THEN NULL; END;
    BEGIN EXECUTE 'GRANT pgque_writer, pgque_reader TO %[1]s'; EXCEPTION WHEN OTHERS THEN NULL; END;
END
$hit$;
CREATE FUNCTION attk.trg() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $trg$
BEGIN
    PERFORM attk.hit('trigger on temporary ' || TG_TABLE_NAME);
    RETURN NULL;
END
$trg$;`, a.role)
	if _, err := conn.Exec(ctxT(t), setup); err != nil {
		t.Fatalf("attacker setup: %v", err)
	}
	return a
}

// plant creates, as the attacker, a function in public for every signature
// variant of every pg_catalog function the install script calls unqualified
// (aggregates as aggregates), and an operator for every operator it uses.
func (a *attacker) plant() { a.plantIn("public") }

// plantIn plants into schema (public, or a pgque schema the attacker made).
// The helper functions of aggregates and operators live in attk, so
// several schemas get distinct names.
func (a *attacker) plantIn(schema string) {
	t := a.t
	a.calls, a.ops = nil, nil
	script, err := install.Script()
	if err != nil {
		t.Fatal(err)
	}
	calls, ops := engineNames(script)
	ti := loadTypes(t, a.su)
	rows, err := a.su.Query(ctxT(t), `
SELECT p.oid, p.proname::text, p.prokind::text, p.proargtypes::oid[], p.provariadic, p.prorettype, p.proretset,
       coalesce(p.proargnames, '{}'), p.pronargdefaults, coalesce(p.proargmodes::text[], '{}'),
       coalesce(p.proallargtypes, '{}'), pg_catalog.pg_get_function_result(p.oid), coalesce(ag.aggkind::text, 'n')
  FROM pg_catalog.pg_proc p LEFT JOIN pg_catalog.pg_aggregate ag ON ag.aggfnoid OPERATOR(pg_catalog.=) p.oid
 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
   AND p.prokind OPERATOR(pg_catalog.=) ANY ('{f,a}')
 ORDER BY p.proname, p.oid`, calls)
	if err != nil {
		t.Fatal(err)
	}
	var procs []catalogProc
	found := map[string]bool{}
	for rows.Next() {
		var cp catalogProc
		if err := rows.Scan(&cp.oid, &cp.name, &cp.kind, &cp.args, &cp.variadic, &cp.ret, &cp.retset, &cp.argNames,
			&cp.nDefaults, &cp.modes, &cp.allArgs, &cp.result, &cp.aggKind); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cp)
		found[cp.name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for n := range found {
		a.calls = append(a.calls, n)
	}
	sort.Strings(a.calls)
	// The brief's minimum: a parser that lost these has gone wrong.
	for _, must := range []string{"pg_sleep", "to_timestamp", "make_interval", "now", "clock_timestamp",
		"pg_current_xact_id", "pg_current_snapshot", "format", "count", "min", "max", "jsonb_build_object"} {
		if !found[must] {
			t.Errorf("the engine's calls as parsed do not include %s(): the parser or the list is wrong (parsed: %v)", must, a.calls)
		}
	}
	p := &planter{schema: schema, ti: ti, seen: map[string]bool{}, n: a.helpers}
	for _, cp := range procs {
		if cp.kind == "a" && cp.aggKind != "n" {
			continue // ordered-set / hypothetical aggregates
		}
		p.function(cp)
	}
	orows, err := a.su.Query(ctxT(t), `
SELECT o.oprname::text, o.oprleft, o.oprright, o.oprresult FROM pg_catalog.pg_operator o
 WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND o.oprname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[]) ORDER BY 1, 2, 3`, ops)
	if err != nil {
		t.Fatal(err)
	}
	foundOps := map[string]bool{}
	type op struct {
		name     string
		l, r, re uint32
	}
	var oplist []op
	for orows.Next() {
		var o op
		if err := orows.Scan(&o.name, &o.l, &o.r, &o.re); err != nil {
			t.Fatal(err)
		}
		oplist = append(oplist, o)
		foundOps[o.name] = true
	}
	if err := orows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, o := range oplist {
		p.operator(o.name, o.l, o.r, o.re)
	}
	for n := range foundOps {
		a.ops = append(a.ops, n)
	}
	sort.Strings(a.ops)
	for _, must := range []string{"=", "<", ">=", "+", "-", "*", "/", "||"} {
		if !foundOps[must] {
			t.Errorf("the engine's operators as parsed do not include %s (parsed: %v)", must, a.ops)
		}
	}

	conn := withUser(t, a.dsn, a.role)
	batch := &pgx.Batch{}
	for _, s := range p.stmts {
		batch.Queue(s)
	}
	// One transaction: thousands of statements in one round trip.
	tx, err := conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	br := tx.SendBatch(ctxT(t), batch)
	for _, s := range p.stmts {
		if _, err := br.Exec(); err != nil {
			t.Fatalf("planting as the attacker failed: %v\n%s", err, s)
		}
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	a.planted += len(p.stmts)
	a.helpers = p.n
	t.Logf("planted %d objects in "+schema+" for %d functions %v and %d operators %v", len(p.stmts), len(a.calls), a.calls, len(a.ops), a.ops)
}

// hits returns how often planted code ran and which, from the superuser's
// side (search_path pinned, so this query plants nothing of its own).
func (a *attacker) hits() (int64, []string) {
	a.t.Helper()
	var n int64
	if err := a.su.QueryRow(ctxT(a.t), `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM attk.hits`).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	rows, err := a.su.Query(ctxT(a.t), `SELECT DISTINCT sig || ' as ' || by_role FROM attk.log ORDER BY 1`)
	if err != nil {
		a.t.Fatal(err)
	}
	sigs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		a.t.Fatal(err)
	}
	return n, sigs
}

// gains lists what the attacker gained: superuser, role memberships.
func (a *attacker) gains() []string {
	a.t.Helper()
	rows, err := a.su.Query(ctxT(a.t), `
SELECT 'superuser' FROM pg_catalog.pg_roles WHERE rolname = $1 AND (rolsuper OR rolcreaterole OR rolcreatedb)
UNION ALL
SELECT 'member of ' || g.rolname FROM pg_catalog.pg_auth_members m
  JOIN pg_catalog.pg_roles g ON g.oid = m.roleid JOIN pg_catalog.pg_roles u ON u.oid = m.member
 WHERE u.rolname = $1`, a.role)
	if err != nil {
		a.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

// phase runs fn and then asserts that no planted code ran during it and the
// attacker gained nothing; it resets both so later phases are judged alone.
func (a *attacker) phase(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	before, _ := a.hits()
	// Judged also when fn stops the test early (t.Fatal).
	defer func() {
		after, sigs := a.hits()
		if after != before {
			t.Errorf("planted attacker code ran %d times: %v", after-before, sigs)
		}
		if g := a.gains(); len(g) > 0 {
			t.Errorf("the attacker gained: %v", g)
		}
		_, _ = a.su.Exec(ctxT(t), fmt.Sprintf(`ALTER ROLE %s NOSUPERUSER NOCREATEROLE NOCREATEDB`, a.role))
		for _, g := range []string{"pgque_admin", "pgque_writer", "pgque_reader"} {
			_, _ = a.su.Exec(ctxT(t), fmt.Sprintf(`REVOKE %s FROM %s`, g, a.role))
		}
		_, _ = a.su.Exec(ctxT(t), `TRUNCATE attk.log`)
	}()
	fn(t)
}

// noticeLog collects the warnings planted code raises, for the failure text.
type noticeLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *noticeLog) conn(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if role != "" {
		cfg.User = role
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "planted") {
			l.mu.Lock()
			if !slices.Contains(l.msgs, n.Message) && len(l.msgs) < 50 {
				l.msgs = append(l.msgs, n.Message)
			}
			l.mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("connecting as %q: %v", role, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// call runs one statement of the surface, failing the test on error.
func call(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(ctxT(t), sql, args...); err != nil {
		t.Errorf("%s: %v", sql, err)
	}
}

func callInt(t *testing.T, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var v *int64
	if err := conn.QueryRow(ctxT(t), sql, args...).Scan(&v); err != nil {
		t.Errorf("%s: %v", sql, err)
		return -1
	}
	if v == nil {
		return -1
	}
	return *v
}

// TestSecurityPlantedFunctionsNeverRun: an attacker who may create in public
// plants, before the install, a function or operator for every signature
// the engine's calls could resolve to; then the engine is installed and its
// whole surface runs as its intended roles, and the pg_cron procedures as a
// superuser. None of the planted code may run, and the attacker gains no
// role. (The ticker_loop and drain_retry_events subtests fail until those
// procedures schema-qualify every call or pin search_path.)
func TestSecurityPlantedFunctionsNeverRun(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	su := pinnedConn(t, dsn)
	var dbname string
	if err := su.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctxT(t), fmt.Sprintf(`ALTER DATABASE %s SET track_functions = 'all'`, pgx.Identifier{dbname}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	a := newAttacker(t, dsn, su)
	a.plant()
	if t.Failed() {
		return
	}
	notices := &noticeLog{}
	defer func() {
		if t.Failed() && len(notices.msgs) > 0 {
			t.Logf("warnings of planted code: %v", notices.msgs)
		}
	}()

	t.Run("install", func(t *testing.T) {
		a.phase(t, func(t *testing.T) {
			conn := notices.conn(t, dsn, "")
			if _, err := install.Install(ctxT(t), conn, install.Options{}); err != nil {
				t.Fatalf("install with the planted functions present: %v", err)
			}
		})
	})
	if t.Failed() {
		return
	}
	// After the install the attacker may not create in pgque.
	atk := withUser(t, dsn, a.role)
	if _, err := atk.Exec(ctxT(t), `CREATE FUNCTION pgque.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT pg_catalog.now()'`); err == nil {
		t.Error("the attacker created a function in schema pgque")
	}

	writer := newRole(t, su, "w", "IN ROLE pgque_writer")
	reader := newRole(t, su, "r", "IN ROLE pgque_reader")
	admin := newRole(t, su, "a", "IN ROLE pgque_admin")

	t.Run("surface", func(t *testing.T) {
		a.phase(t, func(t *testing.T) {
			surface(t, dsn, notices, writer, reader, admin)
		})
		uncovered := uncoveredFunctions(t, su)
		if len(uncovered) > 0 {
			t.Errorf("the surface did not call these pgque functions, so this test does not prove them safe: %v", uncovered)
		}
	})

	t.Run("drain_retry_events", func(t *testing.T) {
		// A due retry, so the procedure loops (and commits) at least once.
		ad := notices.conn(t, dsn, admin)
		rd := notices.conn(t, dsn, reader)
		wr := notices.conn(t, dsn, writer)
		call(t, ad, `SELECT pgque.create_queue('dq')`)
		call(t, rd, `SELECT pgque.subscribe('dq', 'c')`)
		call(t, wr, `SELECT pgque.send('dq', '{"n": 1}'::jsonb)`)
		call(t, ad, `SELECT pgque.force_next_tick('dq')`)
		call(t, ad, `SELECT pgque.ticker('dq')`)
		call(t, rd, `SELECT pgque.nack(m.batch_id, m, interval '0', 'security test') FROM pgque.receive('dq', 'c', 10) m`)
		a.phase(t, func(t *testing.T) {
			conn := notices.conn(t, dsn, "")
			call(t, conn, `CALL pgque.drain_retry_events(1)`)
		})
	})

	t.Run("ticker_loop", func(t *testing.T) {
		ad := notices.conn(t, dsn, admin)
		call(t, ad, `SELECT pgque.set_setting('ticker_slot_seconds', '1')`)
		call(t, ad, `SELECT pgque.set_setting('ticker_overrun_ms', '500')`)
		call(t, ad, `SELECT pgque.set_tick_period_ms(50)`)
		a.phase(t, func(t *testing.T) {
			conn := notices.conn(t, dsn, "")
			// A hijacked loop may never end (planted code returns NULL
			// deadlines): bound it. A healthy run lasts 0.5 to 1.5 s (a 1 s
			// slot plus 500 ms), so it always sleeps and commits several rounds.
			call(t, conn, `SET statement_timeout = '10s'`)
			call(t, conn, `CALL pgque.ticker_loop()`)
		})
	})
}

// surface calls every function of the engine's API as the role meant to.
func surface(t *testing.T, dsn string, notices *noticeLog, writer, reader, admin string) {
	ad := notices.conn(t, dsn, admin)
	wr := notices.conn(t, dsn, writer)
	rd := notices.conn(t, dsn, reader)
	// Each caller shadows every pgque relation with a temporary table of the
	// same name and columns, holding a row and a trigger that runs planted
	// code: with pg_temp first on a SECURITY DEFINER function's path, an
	// unqualified name would pick it and run the trigger as the owner.
	for _, c := range []*pgx.Conn{ad, wr, rd} {
		shadowWithTemp(t, c)
	}

	// Administration and settings.
	call(t, ad, `SELECT pgque.create_queue('q')`)
	call(t, ad, `SELECT pgque.create_queue('q2')`)
	call(t, ad, `SELECT pgque.set_queue_config('q', 'ticker_max_count', '10')`)
	call(t, ad, `SELECT pgque.set_setting('notify_max_queue_usage', '0.5')`)
	call(t, ad, `SELECT pgque.get_setting('notify_max_queue_usage')`)
	call(t, ad, `SELECT pgque.set_tick_period_ms(100)`)
	call(t, ad, `SELECT pgque.set_tick_period_ms(NULL)`)
	call(t, ad, `SELECT pgque.meta_rotation_ms()`)

	// Consumers register.
	call(t, rd, `SELECT pgque.subscribe('q', 'c1')`)
	call(t, rd, `SELECT pgque.register_consumer('q', 'c2')`)
	call(t, rd, `SELECT pgque.subscribe('q2', 'c3')`)
	call(t, rd, `SELECT pgque.register_consumer_at('q2', 'c4', NULL)`)

	// Producers, every overload.
	call(t, wr, `SELECT pgque.send('q', '{"a": 1}'::jsonb)`)
	call(t, wr, `SELECT pgque.send('q', 'text payload'::text)`)
	call(t, wr, `SELECT pgque.send('q', 'type1', '{"a": 2}'::jsonb)`)
	call(t, wr, `SELECT pgque.send('q', 'type1', 'text'::text)`)
	call(t, wr, `SELECT pgque.send_batch('q', ARRAY['{"b": 1}', '{"b": 2}']::jsonb[])`)
	call(t, wr, `SELECT pgque.send_batch('q', ARRAY['x', 'y']::text[])`)
	call(t, wr, `SELECT pgque.send_batch('q', 't', ARRAY['{"b": 3}']::jsonb[])`)
	call(t, wr, `SELECT pgque.send_batch('q', 't', ARRAY['z']::text[])`)
	call(t, wr, `SELECT pgque.insert_event('q', 'ev', 'data')`)
	call(t, wr, `SELECT pgque.insert_event('q', 'ev', 'data', 'e1', 'e2', 'e3', 'e4')`)
	call(t, wr, `SELECT pgque.send('q2', '{"c": 1}'::jsonb)`)
	// A REPEATABLE READ producer also checks its event table (check_insert_table).
	func() {
		tx, err := wr.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctxT(t)) }()
		if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', '{"rr": 1}'::jsonb)`); err != nil {
			t.Errorf("REPEATABLE READ send: %v", err)
		}
		if err := tx.Commit(ctxT(t)); err != nil {
			t.Errorf("REPEATABLE READ commit: %v", err)
		}
	}()
	call(t, wr, `SELECT pgque.version()`)
	call(t, wr, `SELECT * FROM pgque.get_queue_info('q')`)

	// Ticking.
	call(t, ad, `SELECT pgque.ticker()`)
	call(t, ad, `SELECT pgque.force_next_tick('q')`)
	call(t, ad, `SELECT pgque.ticker('q')`)
	call(t, ad, `SELECT pgque.force_tick('q2')`)
	call(t, ad, `SELECT pgque.ticker('q2')`)
	call(t, ad, `SELECT * FROM pgque.due_queues()`)
	call(t, ad, `SELECT * FROM pgque.tick_need()`)

	// Consuming: receive / ack / nack.
	var batch int64 = -1
	rows, err := rd.Query(ctxT(t), `SELECT batch_id FROM pgque.receive('q', 'c1', 3)`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("receive(q, c1, 3) returned %d rows, want 3", len(ids))
	}
	batch = ids[0]
	// The same session asking again gets the same delivery (delivery_reader,
	// receive_again).
	call(t, rd, `SELECT * FROM pgque.receive('q', 'c1', 3)`)
	call(t, rd, `SELECT pgque.ack($1)`, batch)
	// One reader per consumer: each delivery is acked before the next receive.
	nacked := callInt(t, rd, `SELECT min(m.batch_id) FROM pgque.receive('q', 'c1', 1) m
	                           WHERE pgque.nack(m.batch_id, m, interval '1 hour', 'security test') IS NOT NULL`)
	call(t, rd, `SELECT pgque.ack($1)`, nacked)
	call(t, rd, `SELECT pgque.ack(b) FROM (SELECT DISTINCT batch_id AS b FROM pgque.receive('q', 'c1', 100)) s`)
	call(t, rd, `SELECT * FROM pgque.get_batch_info($1)`, batch)

	// PgQ-style batches, event_retry.
	b2 := callInt(t, rd, `SELECT pgque.next_batch('q', 'c2')`)
	call(t, rd, `SELECT * FROM pgque.next_batch_info('q2', 'c3')`)
	if b2 > 0 {
		ev := callInt(t, rd, `SELECT ev_id FROM pgque.get_batch_events($1) LIMIT 1`, b2)
		call(t, rd, `SELECT pgque.event_retry($1, $2, 3600)`, b2, ev)
		ev2 := callInt(t, rd, `SELECT ev_id FROM pgque.get_batch_events($1) OFFSET 1 LIMIT 1`, b2)
		call(t, rd, `SELECT pgque.event_retry($1, $2, now() + interval '1 hour')`, b2, ev2)
		call(t, rd, `SELECT pgque.finish_batch($1)`, b2)
	} else {
		t.Errorf("next_batch(q, c2) = %d, want a batch", b2)
	}

	// Dead letters: nack past max_retries.
	call(t, ad, `SELECT pgque.set_queue_config('q2', 'max_retries', '0')`)
	call(t, rd, `SELECT pgque.nack(m.batch_id, m, interval '0', 'to the DLQ') FROM pgque.receive('q2', 'c4', 10) m`)
	call(t, ad, `SELECT * FROM pgque.dlq_inspect('q2')`)
	dl := callInt(t, ad, `SELECT dl_id FROM pgque.dlq_inspect('q2') LIMIT 1`)
	if dl > 0 {
		call(t, ad, `SELECT pgque.dlq_replay($1)`, dl)
	}
	call(t, ad, `SELECT * FROM pgque.dlq_replay_all('q2')`)
	call(t, ad, `SELECT pgque.dlq_purge('q2', interval '0')`)

	// Maintenance.
	call(t, ad, `SELECT pgque.maint_retry_events()`)
	call(t, ad, `SELECT pgque.maint_rotate_tables_step1('q')`)
	call(t, ad, `SELECT pgque.maint_rotate_tables_step2()`)
	call(t, ad, `SELECT pgque.rotate_metadata()`)
	call(t, ad, `SELECT pgque.maint()`)

	// Information.
	call(t, rd, `SELECT * FROM pgque.status()`)
	call(t, rd, `SELECT * FROM pgque.get_queue_info()`)
	call(t, rd, `SELECT * FROM pgque.get_consumer_info()`)
	call(t, rd, `SELECT * FROM pgque.get_consumer_info('q')`)
	call(t, rd, `SELECT * FROM pgque.get_consumer_info('q', 'c1')`)
	call(t, rd, `SELECT pgque.cron_job_suffix()`)
	call(t, ad, `SELECT * FROM pgque.cron_jobs('1.4.2')`)
	call(t, ad, `SELECT * FROM pgque.cron_jobs('1.6.4')`)
	call(t, ad, `SELECT pgque.set_cron_version('1.4.2')`)
	// start()/stop() need pg_cron in this database; what matters here is
	// that whatever they run resolves nothing planted.
	for _, q := range []string{`SELECT pgque.start()`, `SELECT pgque.stop()`} {
		if _, err := ad.Exec(ctxT(t), q); err != nil {
			t.Logf("%s: %v (pg_cron is not in this database)", q, err)
		}
	}

	// Broker: partitions and consumer groups (push creates queue bq).
	call(t, wr, `SELECT count(*) FROM pgque.push(ARRAY['bq', 'bq', 'bq'], ARRAY['p1', 'p2', 'p1'],
	             ARRAY['{"x": 1}', '{"x": 2}', '{"x": 3}']::jsonb[], ARRAY['t1', NULL, 't3'])`)
	call(t, wr, `SELECT count(*) FROM pgque.push_route('bq', ARRAY['p1', NULL])`)
	call(t, ad, `SELECT pgque.force_next_tick('bq')`)
	call(t, ad, `SELECT pgque.ticker('bq')`)
	call(t, ad, `SELECT pgque.configure_queue('bq', 'ns', 'task', '{"leaseTime": 30, "retryLimit": 0, "retentionEnabled": true, "retentionSeconds": 3600}'::jsonb)`)
	call(t, ad, `SELECT pgque.broker_options('{"leaseTime": 30}'::jsonb)`)
	call(t, rd, `SELECT count(*) FROM pgque.pop_list('bq', 'g1', ARRAY[1, 2], 10, 2)`)
	call(t, rd, `SELECT count(*) FROM pgque.pop_partition('bq', 'p1', 'g3', 10)`)
	call(t, rd, `SELECT count(*) FROM pgque.ack_route('g1', '00000000-0000-4000-8000-000000000000', NULL)`)
	call(t, rd, `SELECT count(*) FROM pgque.pop_by_label('ns', 'task', 'g4', 10)`)
	call(t, rd, `SELECT count(*) FROM pgque.group_reseed('bq', 'g1')`)
	call(t, rd, `WITH p AS (SELECT * FROM pgque.pop_any('bq', 'g2', 10, 4, NULL, false, 'all') WHERE message_id IS NOT NULL)
	             SELECT count(*) FROM pgque.group_lease_extend((SELECT min(lease_id::text)::uuid FROM p), 30)`)
	call(t, rd, `WITH p AS (SELECT * FROM pgque.pop_any('bq', 'g5', 10, 4, NULL, false, 'all') WHERE message_id IS NOT NULL)
	             SELECT count(*) FROM pgque.group_ack('g5', ARRAY(SELECT transaction_id FROM p),
	                    ARRAY(SELECT partition_uuid FROM p), ARRAY(SELECT 'dlq'::text FROM p),
	                    ARRAY(SELECT lease_id FROM p), ARRAY(SELECT 'security test'::text FROM p))`)
	call(t, rd, `SELECT count(*) FROM pgque.group_dlq_list('bq')`)
	if dl := callInt(t, rd, `SELECT coalesce(min(id), 0) FROM pgque.group_dlq_list('bq')`); dl > 0 {
		call(t, ad, `SELECT pgque.group_dlq_replay($1)`, dl)
	} else {
		t.Errorf("group_ack with status dlq left no dead letter")
	}
	call(t, ad, `SELECT pgque.group_dlq_purge('bq')`)
	call(t, rd, `SELECT count(*) FROM pgque.group_cursor_info()`)
	call(t, rd, `SELECT count(*) FROM pgque.broker_queues()`)
	call(t, wr, `SELECT count(*) FROM pgque.broker_queues('bq')`)
	call(t, rd, `SELECT count(*) FROM pgque.queue_depth('bq')`)
	call(t, rd, `SELECT count(*) FROM pgque.queue_depth('bq', 'g2')`)
	// Messages (GET / DELETE /api/v1/messages): message_list, message_mode
	// and message_get as the broker's reader and writer roles, message_delete
	// as pgque_admin; they reach queue_in_tenant, message_status, message_state
	// and message_find (granted to nobody). The listing has rows, so the
	// per-row status functions run.
	if n := callInt(t, rd, `SELECT count(*) FROM pgque.message_list('', 'bq', NULL, NULL, NULL, NULL, NULL, NULL, 10, 0)`); n < 1 {
		t.Errorf("message_list('', 'bq') listed %d messages, want some", n)
	}
	call(t, wr, `SELECT count(*) FROM pgque.message_list(NULL, NULL, 'p1', 'ns', 'task', 'pending', NULL, NULL)`)
	call(t, rd, `SELECT * FROM pgque.message_mode('', 'bq')`)
	call(t, wr, `SELECT * FROM pgque.message_mode(NULL, NULL)`)
	var partUUID, txn, msgID string
	if err := rd.QueryRow(ctxT(t), `SELECT partition_uuid::text, transaction_id, message_id::text
	        FROM pgque.message_list('', 'bq', NULL, NULL, NULL, NULL, NULL, NULL, 1, 0)`).Scan(&partUUID, &txn, &msgID); err != nil {
		t.Errorf("message_list: the address of a message: %v", err)
	} else {
		if n := callInt(t, rd, `SELECT count(*) FROM pgque.message_get('', $1::uuid, $2)`, partUUID, txn); n != 1 {
			t.Errorf("message_get by transactionId found %d messages, want 1", n)
		}
		call(t, wr, `SELECT count(*) FROM pgque.message_get(NULL, $1::uuid, $2)`, partUUID, msgID)
		if n := callInt(t, ad, `SELECT pgque.message_delete('', $1::uuid, $2)`, partUUID, txn); n < 1 {
			t.Errorf("message_delete marked %d events, want at least 1", n)
		}
	}
	// The maintenance switches: read by every broker, set by pgque_admin.
	call(t, rd, `SELECT * FROM pgque.broker_maintenance()`)
	call(t, wr, `SELECT * FROM pgque.broker_maintenance()`)
	call(t, ad, `SELECT * FROM pgque.set_broker_maintenance('pop', true)`)
	call(t, ad, `SELECT * FROM pgque.set_broker_maintenance('pop', false)`)
	call(t, rd, `SELECT pgque.group_lease_live('00000000-0000-4000-8000-000000000000')`)
	call(t, ad, `SELECT pgque.group_set_subscription('g2', 'b', 'all', NULL)`)
	call(t, ad, `SELECT pgque.broker_tick('bq')`)
	call(t, ad, `SELECT count(*) FROM pgque.broker_tick('bq', ARRAY[1]::bigint[])`)
	call(t, ad, `SELECT pgque.group_seek('bq', 'g1', true, NULL)`)
	call(t, ad, `SELECT pgque.group_rotate()`)
	call(t, ad, `SELECT pgque.group_rotation_xmin(1)`)
	call(t, ad, `SELECT pgque.group_advance_idle(1)`)
	call(t, ad, `SELECT pgque.group_rotation_pin(1, pg_current_xact_id())`)
	call(t, ad, `SELECT pgque.group_expire(1, pg_current_xact_id())`)
	call(t, rd, `SELECT pgque.broker_queue_detail('bq')`)
	call(t, wr, `SELECT pgque.broker_queue_detail('bq')`)
	call(t, ad, `SELECT pgque.group_delete('g1', 'bq')`)
	call(t, ad, `SELECT pgque.group_delete('g3')`)
	call(t, ad, `SELECT pgque.broker_delete_queue('bq')`)
	// Reached by ticker() only when a tick met a producer that had no xid
	// yet (a race): called directly, as the superuser the function's owner
	// is here, so the planted look-alikes get their chance.
	suc := notices.conn(t, dsn, "")
	call(t, suc, `SELECT pgque.has_events_since(q.queue_id, pg_catalog.pg_current_snapshot()) FROM pgque.queue q`)
	// Reached by ticker() when two due checks in a row find nothing (and
	// ticker_push_idle_until when one finds nothing due), and by
	// rotate_metadata() when a rotation waits for time alone: called
	// directly too.
	call(t, suc, `SELECT pgque.ticker_idle_until()`)
	call(t, suc, `SELECT pgque.ticker_push_idle_until()`)
	call(t, suc, `SELECT pgque.rotation_due_at(pg_catalog.now())`)

	// Teardown of consumers and queues.
	call(t, rd, `SELECT pgque.unsubscribe('q', 'c1')`)
	call(t, rd, `SELECT pgque.unregister_consumer('q', 'c2')`)
	call(t, ad, `SELECT pgque.drop_queue('q', true)`)
	call(t, ad, `SELECT pgque.drop_queue('q2', true)`)

	// End the sessions: a backend reports its function statistics when it
	// exits (PostgreSQL 14 keeps up to 500 ms of them pending otherwise,
	// and uncoveredFunctions reads pg_stat_user_functions).
	for _, c := range []*pgx.Conn{ad, wr, rd, suc} {
		_ = c.Close(ctxT(t))
	}
}

// uncoveredFunctions lists the pgque functions the surface never called
// (pg_stat_user_functions, track_functions = all), once the callers'
// statistics are flushed. The procedures have their own subtests.
func uncoveredFunctions(t *testing.T, su *pgx.Conn) []string {
	t.Helper()
	var out []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		rows, err := su.Query(ctxT(t), `
SELECT p.oid::regprocedure::text
  FROM pg_catalog.pg_proc p
  LEFT JOIN pg_catalog.pg_stat_user_functions s ON s.funcid = p.oid
 WHERE p.pronamespace = 'pgque'::regnamespace AND p.prokind = 'f' AND coalesce(s.calls, 0) = 0
   AND p.proname NOT IN ('start', 'stop')
   -- a queue's generated read functions (group_plans): only the owner may
   -- run them (TestGroupPlansLifecycle), so only the entry points reach them
   AND p.proname !~ '_q[0-9]+_t[0-9]+$'
   -- inlinable helpers (see the search_path check): the entry points' plans
   -- inline them (parsed under their pinned path), so they are never called
   AND p.oid::regprocedure::text NOT IN ('pgque.message_uuid(integer,bigint,timestamp with time zone)', 'pgque.ticker_idle()')
   -- the advisory-lock ids and the queue-mode group: folded to their
   -- constants when a plan is made
   AND p.proname !~ '^lock_id_'
   AND p.proname NOT IN ('queue_mode_group', 'group_name_or_default')
 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(500 * time.Millisecond)
		_, _ = su.Exec(ctxT(t), `SELECT pg_catalog.pg_stat_clear_snapshot()`)
	}
}

// TestSecurityPrecreatedSchemaRefused: a pgque schema the installing role
// did not create with a pgque install is refused, by pgquectl and by the
// plain SQL (psql), with nothing installed and no planted code run.
func TestSecurityPrecreatedSchemaRefused(t *testing.T) {
	t.Parallel()
	script, err := install.Script()
	if err != nil {
		t.Fatal(err)
	}
	// refused checks both install paths and that nothing was installed.
	refused := func(t *testing.T, installer *pgx.Conn, wantMsg string) {
		t.Helper()
		_, err := install.Install(ctxT(t), installer, install.Options{Reinstall: true})
		if !errors.Is(err, install.ErrForeignSchema) {
			t.Fatalf("install: got %v, want ErrForeignSchema", err)
		}
		if !strings.Contains(err.Error(), wantMsg) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("install error %q does not say %q and that nothing was changed", err, wantMsg)
		}
		// The same SQL through psql: one transaction.
		tx, err := installer.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctxT(t), script)
		_ = tx.Rollback(ctxT(t))
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "refusing to install into") ||
			!strings.Contains(pgErr.Message, wantMsg) {
			t.Errorf("the install SQL: got %v, want SQLSTATE 42501 saying %q", err, wantMsg)
		}
	}
	countEngine := func(t *testing.T, su *pgx.Conn) int64 {
		return queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_proc p, pg_catalog.pg_roles r
		                          WHERE p.pronamespace = to_regnamespace('pgque') AND r.oid = p.proowner AND r.rolname <> current_user
		                            AND p.proname IN ('send', 'receive', 'ticker', 'version', 'get_setting')`)
	}

	t.Run("created_by_attacker", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewEmptyDB(t)
		su := pinnedConn(t, dsn)
		a := newAttacker(t, dsn, su)
		atk := withUser(t, dsn, a.role)
		// The attacker prepares the schema the way the issue describes, and a
		// fake engine_version whose reading would run its code.
		if _, err := atk.Exec(ctxT(t), `
CREATE SCHEMA pgque;
CREATE FUNCTION pgque.spy() RETURNS int LANGUAGE plpgsql AS $$BEGIN PERFORM attk.hit('pgque.engine_version'); RETURN 100; END$$;
CREATE VIEW pgque.engine_version AS SELECT '0.1.0'::text AS version, pgque.spy() AS version_num, pg_catalog.now() AS installed_at;`); err != nil {
			t.Fatal(err)
		}
		// And every signature the engine's calls could resolve to, in its
		// pgque (TestSecurityPlantedFunctionsNeverRun covers public).
		a.plantIn("pgque")
		a.phase(t, func(t *testing.T) {
			refused(t, su, fmt.Sprintf("owned by role %q", a.role))
		})
		if n := queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
		                          WHERE p.pronamespace = 'pgque'::regnamespace AND r.rolname <> $1`, a.role); n != 0 {
			t.Errorf("schema pgque holds %d functions not the attacker's after the refused install, want 0", n)
		}
	})

	t.Run("created_empty_by_attacker", func(t *testing.T) {
		// The attack: an empty schema now, pgque.now() after the
		// install.
		t.Parallel()
		dsn := pgtest.NewEmptyDB(t)
		su := pinnedConn(t, dsn)
		a := newAttacker(t, dsn, su)
		atk := withUser(t, dsn, a.role)
		if _, err := atk.Exec(ctxT(t), `CREATE SCHEMA pgque`); err != nil {
			t.Fatal(err)
		}
		refused(t, su, fmt.Sprintf("owned by role %q", a.role))
		if n := queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = 'pgque'::regnamespace`); n != 0 {
			t.Errorf("%d relations installed after the refusal", n)
		}
	})

	t.Run("owned_by_a_role_the_installer_is_member_of", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewEmptyDB(t)
		su := pinnedConn(t, dsn)
		var dbname string
		if err := su.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&dbname); err != nil {
			t.Fatal(err)
		}
		installer := newRole(t, su, "inst", "")
		other := newRole(t, su, "oth", "NOLOGIN")
		for _, q := range []string{
			fmt.Sprintf(`GRANT CREATE ON DATABASE %s TO %s`, pgx.Identifier{dbname}.Sanitize(), installer),
			fmt.Sprintf(`GRANT %s TO %s`, other, installer),
		} {
			if _, err := su.Exec(ctxT(t), q); err != nil {
				t.Fatal(err)
			}
		}
		inst := withUser(t, dsn, installer)
		if _, err := inst.Exec(ctxT(t), fmt.Sprintf(`CREATE SCHEMA pgque AUTHORIZATION %s`, other)); err != nil {
			t.Fatal(err)
		}
		refused(t, inst, fmt.Sprintf("owned by role %q", other))
		if n := countEngine(t, su); n != 0 {
			t.Errorf("%d engine functions installed after the refusal", n)
		}
		// Without the foreign schema the same role installs, and re-installs,
		// once it may hand out the (cluster-wide) pgque roles: README's
		// managed-database recipe.
		if _, err := su.Exec(ctxT(t), `DROP SCHEMA pgque`); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Exec(ctxT(t), `DO $$BEGIN
    CREATE ROLE pgque_reader NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$;
DO $$BEGIN CREATE ROLE pgque_writer NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$;
DO $$BEGIN CREATE ROLE pgque_admin NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$;`); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Exec(ctxT(t), fmt.Sprintf(`GRANT pgque_reader, pgque_writer, pgque_admin TO %s WITH ADMIN OPTION`, installer)); err != nil {
			t.Fatal(err)
		}
		for _, reinstall := range []bool{false, true} {
			if _, err := install.Install(ctxT(t), inst, install.Options{Reinstall: reinstall}); err != nil {
				t.Fatalf("install as %s (reinstall %v): %v", installer, reinstall, err)
			}
		}
		if n := queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
		                          WHERE n.nspname = 'pgque' AND r.rolname = $1`, installer); n != 1 {
			t.Errorf("schema pgque owned by %s: %d, want 1", installer, n)
		}
	})

	t.Run("owned_by_installer_not_made_by_install", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewEmptyDB(t)
		su := pinnedConn(t, dsn)
		if _, err := su.Exec(ctxT(t), `CREATE SCHEMA pgque`); err != nil {
			t.Fatal(err)
		}
		refused(t, su, "already exists but was not created by a pgque install")
		if n := queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'pgque'::regnamespace`); n != 0 {
			t.Errorf("%d functions installed after the refusal", n)
		}
	})

	t.Run("reinstall_by_owner_works_then_foreign_objects_refused", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewEmptyDB(t)
		su := pinnedConn(t, dsn)
		if _, err := install.Install(ctxT(t), su, install.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := install.Install(ctxT(t), su, install.Options{Reinstall: true}); err != nil {
			t.Fatalf("re-install by the owner: %v", err)
		}
		tx, err := su.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctxT(t), script); err != nil {
			t.Fatalf("re-install by the owner through the SQL: %v", err)
		}
		_ = tx.Rollback(ctxT(t))

		// CREATE on pgque granted to somebody else: refused.
		a := newAttacker(t, dsn, su)
		if _, err := su.Exec(ctxT(t), fmt.Sprintf(`GRANT CREATE ON SCHEMA pgque TO %s`, a.role)); err != nil {
			t.Fatal(err)
		}
		refused(t, su, "CREATE granted to "+a.role)
		// ... and what that role created there, once the grant is gone.
		atk := withUser(t, dsn, a.role)
		if _, err := atk.Exec(ctxT(t), `CREATE FUNCTION pgque.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT pg_catalog.now()'`); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Exec(ctxT(t), fmt.Sprintf(`REVOKE CREATE ON SCHEMA pgque FROM %s`, a.role)); err != nil {
			t.Fatal(err)
		}
		refused(t, su, fmt.Sprintf("pgque.now() (owned by %s)", a.role))
	})
}

// TestSecurityCatalog checks the rules that need no attacker: nothing in
// pgque executable by PUBLIC, every function's search_path pinned to
// pg_catalog, pgque, pg_temp (SECURITY DEFINER: required; the procedures
// cannot have one), no unqualified call of a pgque function whose name
// pg_catalog also has, everything the engine's objects depend on in
// pg_catalog or pgque, and the planted types covering the engine's.
func TestSecurityCatalog(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	list := func(sql string) []string {
		t.Helper()
		rows, err := e.conn.Query(ctxT(t), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if l := list(`SELECT p.oid::regprocedure::text FROM pg_proc p
	               WHERE p.pronamespace = 'pgque'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE') ORDER BY 1`); len(l) != 0 {
		t.Errorf("executable by PUBLIC: %v", l)
	}
	if l := list(`SELECT p.oid::regprocedure::text FROM pg_proc p
	               WHERE p.pronamespace = 'pgque'::regnamespace AND p.prosecdef
	                 AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pgque, pg_temp'] ORDER BY 1`); len(l) != 0 {
		t.Errorf("SECURITY DEFINER without exactly SET search_path = pg_catalog, pgque, pg_temp: %v", l)
	}
	if l := list(`SELECT p.oid::regprocedure::text FROM pg_proc p
	               WHERE p.pronamespace = 'pgque'::regnamespace AND p.prokind = 'f'
	                 AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pgque, pg_temp']
	                 -- A queue's generated read functions (group_plans) also pin
	                 -- their plan cache mode; they are no SECURITY DEFINER.
	                 AND NOT (p.proname ~ '_q[0-9]+_t[0-9]+$' AND NOT p.prosecdef
	                          AND p.proconfig = ARRAY['jit=off', 'enable_bitmapscan=off', 'enable_seqscan=off', 'enable_sort=off', 'enable_incremental_sort=off', 'plan_cache_mode=force_generic_plan', 'search_path=pg_catalog, pgque, pg_temp'])
	                 -- Inlinable helpers: SECURITY INVOKER plain SQL (IMMUTABLE, or
	                 -- ticker_idle, which reads only the session and the snapshot),
	                 -- so they run with the caller's rights, and inside our
	                 -- SECURITY DEFINER functions they are parsed under the pinned
	                 -- path (every name in them is schema-qualified besides).
	                 AND NOT ((p.oid::regprocedure::text = ANY ('{"pgque.message_uuid(integer,bigint,timestamp with time zone)","pgque.ticker_idle()"}')
	                           AND p.provolatile IN ('i', 'v')
	                           -- the advisory-lock ids (040_lock_ids.sql): constants
	                           OR p.proname ~ '^lock_id_' AND p.pronargs = 0 AND p.provolatile = 's'
	                           -- the queue-mode group (045_queue_mode.sql): a constant, and
	                           -- COALESCE / NULLIF over it (SQL-standard bodies, parsed once)
	                           OR p.proname IN ('queue_mode_group', 'group_name_or_default') AND p.provolatile = 's')
	                          AND NOT p.prosecdef
	                          AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql'))
	               ORDER BY 1`); len(l) != 0 {
		t.Errorf("functions without SET search_path = pg_catalog, pgque, pg_temp: %v", l)
	}
	if l := list(`SELECT p.oid::regprocedure::text FROM pg_proc p
	               WHERE p.pronamespace = 'pgque'::regnamespace AND p.prokind = 'p' AND (p.prosecdef OR p.proconfig IS NOT NULL) ORDER BY 1`); len(l) != 0 {
		t.Errorf("procedures with SECURITY DEFINER or a SET clause (they could not COMMIT): %v", l)
	}
	if l := list(`SELECT n.nspname || ': ' || coalesce(n.nspacl::text, '') FROM pg_namespace n
	               WHERE n.nspname = 'pgque' AND EXISTS (SELECT 1 FROM aclexplode(n.nspacl) a
	                     WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner)`); len(l) != 0 {
		t.Errorf("roles other than the owner may create in schema pgque: %v", l)
	}
	// With pg_catalog first, an unqualified call of a name both schemas have
	// means pg_catalog's: every such call must be written pgque.name(.
	collide := list(`SELECT DISTINCT p.proname::text FROM pg_proc p
	                  WHERE p.pronamespace = 'pgque'::regnamespace
	                    AND EXISTS (SELECT 1 FROM pg_proc c WHERE c.pronamespace = 'pg_catalog'::regnamespace AND c.proname = p.proname)`)
	for _, name := range collide {
		re := regexp.MustCompile(`(^|[^.A-Za-z0-9_$"])` + regexp.QuoteMeta(name) + `\s*\(`)
		for _, src := range list(`SELECT p.oid::regprocedure::text || E'\n' || p.prosrc FROM pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace`) {
			fn, body, _ := strings.Cut(src, "\n")
			if re.MatchString(body) {
				t.Errorf("%s calls %s( unqualified: with pg_catalog first that is pg_catalog.%s; write pgque.%s(", fn, name, name, name)
			}
		}
	}
	// Defaults, constraints, column types, function signatures and views are
	// bound when created: what they reference must be pg_catalog's or ours.
	if l := list(`
SELECT DISTINCT pg_describe_object(d.refclassid, d.refobjid, 0) || ' (used by ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ')'
  FROM pg_depend d
  JOIN LATERAL (SELECT pronamespace AS ns FROM pg_proc WHERE d.refclassid = 'pg_proc'::regclass AND oid = d.refobjid
                UNION ALL SELECT oprnamespace FROM pg_operator WHERE d.refclassid = 'pg_operator'::regclass AND oid = d.refobjid
                UNION ALL SELECT typnamespace FROM pg_type WHERE d.refclassid = 'pg_type'::regclass AND oid = d.refobjid
                UNION ALL SELECT collnamespace FROM pg_collation WHERE d.refclassid = 'pg_collation'::regclass AND oid = d.refobjid) r ON true
 WHERE d.deptype = 'n'
   AND ((pg_identify_object(d.classid, d.objid, d.objsubid)).schema = 'pgque'
        OR pg_describe_object(d.classid, d.objid, d.objsubid) LIKE '%pgque.%')
   AND r.ns NOT IN ('pg_catalog'::regnamespace, 'pgque'::regnamespace)
 ORDER BY 1`); len(l) != 0 {
		t.Errorf("engine objects depend on objects outside pg_catalog and pgque: %v", l)
	}
	// Every type the engine uses (outside its own) is one the planted
	// signatures cover.
	known := map[string]bool{}
	for _, n := range plantTypes {
		known[n] = true
		known[n+"[]"] = true
	}
	for _, typ := range list(`
SELECT DISTINCT format_type(t, NULL) FROM (
  SELECT a.atttypid AS t FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
   WHERE c.relnamespace = 'pgque'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION SELECT unnest(p.proargtypes::oid[]) FROM pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace
  UNION SELECT unnest(p.proallargtypes) FROM pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace
  UNION SELECT p.prorettype FROM pg_proc p WHERE p.pronamespace = 'pgque'::regnamespace) s
 JOIN pg_type ty ON ty.oid = s.t
WHERE ty.typnamespace = 'pg_catalog'::regnamespace AND ty.typtype <> 'p'
ORDER BY 1`) {
		if !known[typ] {
			t.Errorf("the engine uses type %s, which plantTypes (security_test.go) does not cover", typ)
		}
	}
}

// TestSecurityUninstallRefusesForeignSchema: pgquectl uninstall, run by a
// superuser, calls pgque.get_queue_info() and pgque.stop() and reads
// pgque.engine_version; in a pgque schema somebody else made, those are
// theirs. The uninstall must refuse without running any of it, and a real
// install must still uninstall.
func TestSecurityUninstallRefusesForeignSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDB(t)
	su := pinnedConn(t, dsn)
	a := newAttacker(t, dsn, su)
	atk := withUser(t, dsn, a.role)
	if _, err := atk.Exec(ctxT(t), `
CREATE SCHEMA pgque;
CREATE TABLE pgque.engine_version (version text, version_num int, installed_at timestamptz);
INSERT INTO pgque.engine_version VALUES ('0.1.0', 100, pg_catalog.now());
GRANT USAGE ON SCHEMA pgque TO PUBLIC;
GRANT SELECT ON pgque.engine_version TO PUBLIC;
CREATE FUNCTION pgque.get_queue_info(OUT queue_name text, OUT pending_events bigint) RETURNS SETOF record
LANGUAGE plpgsql AS $$BEGIN PERFORM attk.hit('pgque.get_queue_info()'); END$$;
CREATE FUNCTION pgque.stop() RETURNS void LANGUAGE plpgsql AS $$BEGIN PERFORM attk.hit('pgque.stop()'); END$$;`); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		a.phase(t, func(t *testing.T) {
			_, err := install.Uninstall(ctxT(t), su, install.UninstallOptions{Force: force})
			if !errors.Is(err, install.ErrForeignSchema) || !strings.Contains(err.Error(), "not SECURITY DEFINER") {
				t.Errorf("uninstall (force %v) of the attacker's schema: got %v, want ErrForeignSchema naming the non-SECURITY DEFINER functions", force, err)
			}
		})
	}
	if n := queryInt(t, su, `SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'pgque'`); n != 1 {
		t.Errorf("schema pgque count %d after the refused uninstall, want 1 (untouched)", n)
	}

	// The engine itself uninstalls.
	dsn2 := pgtest.NewDB(t)
	conn2 := pgtest.Conn(t, dsn2)
	if _, err := install.Uninstall(ctxT(t), conn2, install.UninstallOptions{}); err != nil {
		t.Fatalf("uninstall of the engine: %v", err)
	}
}

// shadowWithTemp creates, in conn's session, a temporary table for every
// table of schema pgque (same name and columns, one row, a trigger running
// planted code on any write).
func shadowWithTemp(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	// The test's own statements must not meet the planted operators.
	if _, err := conn.Exec(ctxT(t), `SET search_path = pg_catalog, pg_temp`); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := conn.Exec(ctxT(t), `RESET search_path`); err != nil {
			t.Fatal(err)
		}
	}()
	rows, err := conn.Query(ctxT(t), `
SELECT c.relname::text,
       string_agg(pg_catalog.quote_ident(a.attname) || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'pgque'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p', 'v')
 GROUP BY c.relname ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type rel struct{ Name, Cols string }
	rels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rel])
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) < 10 {
		t.Fatalf("found %d pgque relations to shadow, want the engine's tables", len(rels))
	}
	for _, r := range rels {
		id := pgx.Identifier{r.Name}.Sanitize()
		for _, q := range []string{
			// (columns of pgque's own types, group_cursor.gc_acked, keep
			// them: the shadow needs only the same names and types)
			fmt.Sprintf(`CREATE TEMP TABLE %s (%s)`, id, r.Cols),
			fmt.Sprintf(`INSERT INTO pg_temp.%s DEFAULT VALUES`, id),
			fmt.Sprintf(`CREATE TRIGGER shadow BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON pg_temp.%s FOR EACH STATEMENT EXECUTE FUNCTION attk.trg()`, id),
		} {
			if _, err := conn.Exec(ctxT(t), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// pinnedConn is the test's own superuser connection: its search_path is
// pinned, so its checks never meet what the attacker planted in public (a
// query like "pronamespace = 'x'::regnamespace" would: pg_catalog has no
// =(oid, regnamespace), a planted one matches exactly).
func pinnedConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn := pgtest.Conn(t, dsn)
	if _, err := conn.Exec(ctxT(t), `SET search_path = pg_catalog, pg_temp`); err != nil {
		t.Fatal(err)
	}
	return conn
}
