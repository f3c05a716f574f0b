package rdbcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/ with the RDBs the agreement test saves")
	// scale multiplies the agreement test's samples; from 2, every
	// position of every small file is corrupted (of the first, always).
	scale = flag.Int("agreement.scale", 1, "how many times more corruptions the agreement test tries")
)

// checkerTimeout bounds one redis-check-rdb run: it loops forever on a
// module value cut short (it reads the missing opcodes as unknown ones),
// and such a run counts as a refusal.
const checkerTimeout = 10 * time.Second

// TestAgreementWithRedisCheckRDB saves RDBs of every type in every
// encoding Redis 7.0 writes from a real redis-server, corrupts them (byte
// flips, truncations, insertions; the checksum left alone, recomputed or
// zeroed, so that the structure is tested and not only the checksum), and
// requires the walker's verdict on each to be redis-check-rdb's, but for
// the exceptions the walker's stricter rules make (see agree).
func TestAgreementWithRedisCheckRDB(t *testing.T) {
	redistest.Require(t)
	checker := redistest.RequireTool(t, "redis-check-rdb")
	files := saveRDBs(t)
	if *update {
		for _, f := range files {
			if f.small {
				if err := os.WriteFile(filepath.Join("testdata", f.name+".rdb"), f.rdb, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var cases []agreeCase
	for _, f := range files {
		if err := Check(bytes.NewReader(f.rdb)); err != nil {
			t.Fatalf("%s, as redis-server saved it: %v", f.name, err)
		}
		cases = append(cases, agreeCase{name: f.name + " as saved", rdb: f.rdb})
		cases = append(cases, corruptions(f, *scale)...)
	}
	agree(t, checker, cases)
}

// TestHandBuiltCasesWithRedisCheckRDB runs the unit tests' hand-built
// cases through redis-check-rdb (those of version 10 and below, which
// redis-check-rdb 7.0 reads), so that what they claim of Redis is checked
// against it.
func TestHandBuiltCasesWithRedisCheckRDB(t *testing.T) {
	redistest.Require(t)
	checker := redistest.RequireTool(t, "redis-check-rdb")
	var cases []agreeCase
	for group, cs := range allCases() {
		for _, c := range cs {
			if len(c.rdb) >= 9 && atoi(c.rdb[5:9]) > 10 {
				continue // redis-check-rdb 7.0 refuses versions above 10
			}
			cases = append(cases, agreeCase{name: group + ": " + c.name, rdb: c.rdb, rule: c.rule})
		}
	}
	agree(t, checker, cases)
}

// agree runs redis-check-rdb and the walker on every case and fails on a
// disagreement, but for an exception: where the walker refuses by a rule
// redis-check-rdb does not have (the package doc's), the exception must
// hold (confirmException).
func agree(t *testing.T, checker string, cases []agreeCase) {
	start := time.Now()
	runChecker(t, checker, cases)
	t.Logf("redis-check-rdb ran %d cases in %v", len(cases), time.Since(start).Round(time.Millisecond))

	var replica *redistest.Server
	stats := map[string]int{}
	for i := range cases {
		c := &cases[i]
		walked := verdictOf(Check(bytes.NewReader(c.rdb)))
		stats[fmt.Sprintf("redis-check-rdb %s, walker %s", okString(c.accepted), okString(walked.err == nil))]++
		if (walked.err == nil) == c.accepted {
			continue
		}
		var ce *CorruptError
		if c.accepted && errors.As(walked.err, &ce) && ce.rule != ruleLoader {
			if ce.rule == ruleDuplicateKey && replica == nil {
				replica = redistest.StartServer(t)
			}
			if why := confirmException(t, replica, c, ce); why != "" {
				t.Errorf("%s: the walker refuses it (%v) and redis-check-rdb does not, but %s", c.name, walked.err, why)
			}
			stats[fmt.Sprintf("of which exceptions: %s", ruleName(ce.rule))]++
			continue
		}
		t.Errorf("%s: redis-check-rdb %s, the walker: %v\nredis-check-rdb said:\n%s",
			c.name, okString(c.accepted), walked, lastLines(c.output, 6))
	}
	t.Logf("%d cases:", len(cases))
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		t.Logf("  %6d  %s", stats[k], k)
	}
}

// savedRDB is an RDB a real redis-server saved.
type savedRDB struct {
	name   string
	rdb    []byte
	small  bool // written to testdata by -update
	sample int  // how many positions to corrupt; 0 for every one
}

// saveRDBs fills two servers (one with rdbchecksum no) with every type in
// every encoding Redis 7.0 has, small and big, and returns what SAVE wrote.
func saveRDBs(t *testing.T) []savedRDB {
	var files []savedRDB
	for _, checksum := range []string{"yes", "no"} {
		srv := redistest.StartServer(t, "--rdbchecksum", checksum)
		c := redistest.Dial(t, srv.Addr())
		save := func(name string, small bool, sample int) {
			c.MustDo(t, "SAVE")
			b, err := os.ReadFile(filepath.Join(srv.Dir(), "dump.rdb"))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, savedRDB{name: fmt.Sprintf("redis70-%s-checksum-%s", name, checksum), rdb: b, small: small, sample: sample})
		}
		// The small RDB with a checksum is corrupted at every position;
		// the others, which differ from it or from each other in a few
		// places, at a sample.
		fill(t, c, false)
		if checksum == "yes" {
			save("small", true, 0)
			c.MustDo(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
			save("small-lfu", false, 15)
			c.MustDo(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
			save("small-lru", false, 15)
			c.MustDo(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			c.MustDo(t, "CONFIG", "SET", "rdbcompression", "no")
			save("small-uncompressed", false, 25)
			c.MustDo(t, "CONFIG", "SET", "rdbcompression", "yes")
		} else {
			save("small", true, 25)
		}
		fill(t, c, true)
		save("big", false, 60)
	}
	return files
}

// fill writes the dataset: every type in every encoding Redis 7.0 writes
// (7.0 has no set listpack: a set of strings is a hash table), keys with
// expire times, a function library and several DBs; big adds values large
// enough for many quicklist and stream nodes and hash tables.
func fill(t *testing.T, c *redistest.Client, big bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	do := func(args ...any) { c.MustDo(t, args...) }
	do("FLUSHALL")
	// Elements of more than 64 bytes go to plain quicklist nodes. Names
	// are short: the small RDB is corrupted at every byte.
	do("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "64")
	do("FUNCTION", "LOAD", "REPLACE", "#!lua name=l\nredis.register_function('f', function() return 1 end)")
	do("SET", "i", "12345")
	do("SET", "n", "-7")
	do("SET", "s", "hi")
	do("SET", "z", strings.Repeat("ab", 15))
	do("SET", "r", random(25))
	do("PEXPIREAT", "s", 4102444800000)
	do("RPUSH", "l", "a", "1", "-200", "70000")
	do("RPUSH", "p", strings.Repeat("x", 70), "b")
	do("SADD", "is", "1", "-3", "70000")
	do("SADD", "st", "a", "b")
	do("ZADD", "zs", "1", "a", "2.5", "b", "-inf", "c")
	do("ZADD", "sk", "1", strings.Repeat("m", 70), "2", "n")
	do("HSET", "h", "f", "v", "g", "2")
	do("HSET", "ht", "f", strings.Repeat("v", 70))
	do("EXPIRE", "h", 100000)
	stream(t, c, "x", 4, 2)
	do("SELECT", "1")
	do("SET", "a", "v")
	do("SELECT", "3")
	do("RPUSH", "b", "v")
	do("SELECT", "0")
	if !big {
		return
	}
	for i := range 1000 {
		c.Send("SET", fmt.Sprint("key:", i), fmt.Sprint("value:", i))
	}
	for i := range 5000 {
		c.Send("RPUSH", "big-list", fmt.Sprint("element:", i))
	}
	for i := range 3000 {
		c.Send("SADD", "big-set", fmt.Sprint("member:", i))
	}
	for i := range 400 {
		c.Send("SADD", "big-intset", i*7)
	}
	for i := range 1000 {
		c.Send("ZADD", "big-zset", i, fmt.Sprint("member:", i))
		c.Send("HSET", "big-hash", fmt.Sprint("field:", i), fmt.Sprint("value:", i))
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 1000 + 5000 + 3000 + 400 + 2000 {
		if _, err := c.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	do("SET", "big-lzf", strings.Repeat("a long string that compresses ", 3000))
	do("SET", "big-random", random(50000))
	stream(t, c, "big-stream", 1000, 200)
}

// stream adds a stream of n entries (one with fields of its own, the first
// deleted), a consumer group whose two consumers have pending entries (one
// of them acknowledged), and a group with a consumer and none.
func stream(t *testing.T, c *redistest.Client, key string, n, pending int) {
	do := func(args ...any) { c.MustDo(t, args...) }
	for i := range n {
		if i == 2 {
			do("XADD", key, "*", "o", "p")
			continue
		}
		do("XADD", key, "*", "f", i)
	}
	first := c.MustDo(t, "XRANGE", key, "-", "+", "COUNT", 1).Array()[0].Array()[0].String()
	do("XDEL", key, first)
	do("XGROUP", "CREATE", key, "g", "0")
	do("XGROUP", "CREATE", key, "e", "$")
	do("XREADGROUP", "GROUP", "g", "c", "COUNT", pending, "STREAMS", key, ">")
	do("XREADGROUP", "GROUP", "g", "d", "COUNT", 1, "STREAMS", key, ">")
	second := c.MustDo(t, "XRANGE", key, "-", "+", "COUNT", 1).Array()[0].Array()[0].String()
	do("XACK", key, "g", second)
	do("XGROUP", "CREATECONSUMER", key, "e", "c")
}

// agreeCase is one payload and what redis-check-rdb said of it.
type agreeCase struct {
	name     string
	rdb      []byte
	rule     rule   // a hand-built case's rule: the walker refuses more by design
	accepted bool   // redis-check-rdb exited 0
	output   string // what it printed
}

// corruptions returns f's corruptions: byte flips (at every position, or
// at f.sample positions spread over the file), insertions and truncations.
// A flip or an insertion leaves the checksum alone, recomputes it or zeroes
// it, in turn.
func corruptions(f savedRDB, scale int) []agreeCase {
	rng := rand.New(rand.NewPCG(uint64(len(f.rdb)), 7))
	n := len(f.rdb)
	positions := make([]int, 0, n)
	switch {
	case f.sample == 0 || f.small && scale > 1:
		for i := range n {
			positions = append(positions, i)
		}
	default:
		for k := range min(n, f.sample*scale) {
			positions = append(positions, k*n/min(n, f.sample*scale)+rng.IntN(max(1, n/(f.sample*scale))))
		}
	}
	masks := []byte{0xff, 0x01, 0x80, 0x02, 0x40, 0x10, 0x04, 0x20, 0x08}
	crcs := []string{"checksum left", "checksum recomputed", "checksum zeroed", "checksum recomputed"}
	trailer := func(b []byte, how string) []byte {
		if len(b) < 8 {
			return b
		}
		switch how {
		case "checksum recomputed":
			binary.LittleEndian.PutUint64(b[len(b)-8:], CRC64(0, b[:len(b)-8]))
		case "checksum zeroed":
			clear(b[len(b)-8:])
		}
		return b
	}
	var cases []agreeCase
	for k, i := range positions {
		i = min(i, n-1)
		mask := masks[k%len(masks)]
		if k%(2*len(masks)) == len(masks) {
			mask = byte(rng.IntN(255) + 1)
		}
		how := crcs[k%len(crcs)]
		b := bytes.Clone(f.rdb)
		b[i] ^= mask
		cases = append(cases, agreeCase{name: fmt.Sprintf("%s: byte %d ^ %#02x, %s", f.name, i, mask, how), rdb: trailer(b, how)})
	}
	for k := range 4 * scale {
		i := rng.IntN(n) // before the end: a byte after it is the contract's own rule
		v := []byte{0x00, 0xff, 0x01, 0xfe}[k%4]
		how := crcs[1+k%3]
		b := slices.Insert(bytes.Clone(f.rdb), i, v)
		cases = append(cases, agreeCase{name: fmt.Sprintf("%s: %#02x inserted at %d, %s", f.name, v, i, how), rdb: trailer(b, how)})
	}
	for k := range 4 * scale {
		l := n - 1 - k
		if k%2 == 1 {
			l = rng.IntN(n)
		}
		cases = append(cases, agreeCase{name: fmt.Sprintf("%s: cut at %d", f.name, l), rdb: f.rdb[:l]})
	}
	return cases
}

// runChecker runs redis-check-rdb on every case, a few at a time.
func runChecker(t *testing.T, checker string, cases []agreeCase) {
	dir := t.TempDir()
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c := &cases[i]
				path := filepath.Join(dir, fmt.Sprintf("case%d.rdb", i))
				if err := os.WriteFile(path, c.rdb, 0o644); err != nil {
					c.output = err.Error()
					continue
				}
				ctx, cancel := context.WithTimeout(t.Context(), checkerTimeout)
				out, err := exec.CommandContext(ctx, checker, path).CombinedOutput()
				cancel()
				c.accepted, c.output = err == nil, string(out)
				if ctx.Err() != nil {
					c.output += "\n(killed after " + checkerTimeout.String() + ": counted as a refusal)"
				}
				os.Remove(path)
			}
		}()
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()
}

// confirmException checks an exception: the walker refused by a rule
// redis-check-rdb does not have. It returns why the exception does not
// hold, or "".
//
//   - A byte after the checksum: the payload cut before it must be
//     accepted.
//   - A duplicate key: a real redis-server must refuse to load it.
//   - The release candidates' function format (a byte flip makes one of
//     an AUX opcode): redis-check-rdb 7.0 converts it; 7.2 and later
//     refuse it, which a 7.0 server cannot confirm.
//   - The other rules (a replica's allocations, Valkey's aux fields) are
//     the hand-built cases' own, which declare them.
func confirmException(t *testing.T, srv *redistest.Server, c *agreeCase, ce *CorruptError) string {
	switch {
	case ce.rule == ruleTrailing:
		if v := verdictOf(Check(bytes.NewReader(c.rdb[:ce.Offset]))); v.err != nil {
			return fmt.Sprintf("cut before the byte after its end it is still refused: %v", v)
		}
		return ""
	case ce.rule == ruleDuplicateKey:
		if serverLoads(t, srv, c.rdb) {
			return "a redis-server loads it"
		}
		return ""
	case ce.rule == ruleNewer, ce.rule == c.rule:
		return ""
	}
	return fmt.Sprintf("rule %s makes no exception here", ruleName(ce.rule))
}

// serverLoads reports whether a real redis-server loads b: DEBUG RELOAD
// NOSAVE loads its dump file, which b replaces. A server that refuses it
// exits (or panics, on a duplicate key) and is restarted without it.
func serverLoads(t *testing.T, srv *redistest.Server, b []byte) bool {
	dump := filepath.Join(srv.Dir(), "dump.rdb")
	if err := os.WriteFile(dump, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := redistest.Dial(t, srv.Addr())
	defer c.Close()
	_, err := c.Do("DEBUG", "RELOAD", "NOSAVE")
	if err == nil {
		return true
	}
	os.Remove(dump)
	srv.Restart()
	return false
}

func okString(ok bool) string {
	if ok {
		return "accepts"
	}
	return "refuses"
}

func ruleName(r rule) string {
	return [...]string{"loader", "duplicate key", "byte after the checksum", "7.2's function rule", "replica"}[r]
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
