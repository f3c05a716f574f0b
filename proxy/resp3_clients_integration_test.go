package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// The RESP3 clients' view: go-redis with Protocol 3,
// redis-cli -3 and node-redis with RESP: 3 read INFO, ROLE, CONFIG GET and
// CLIENT LIST from the proxy and from a real redis-server replica of the same
// primary, and decode them alike: the same types, the same keys. The one
// difference by design is ROLE's sixth element, the proxy's own replicas
// (docs/metrics.md, INFO), which none of them reads.

// resp3Pair is a primary, a real redis-server replica of it and a proxy of
// it, both links up: what a client reads from the proxy is compared with
// what it reads from the replica, the thing the proxy stands in for.
type resp3Pair struct {
	replica, proxy string // host:port
}

func startRESP3Pair(t *testing.T) resp3Pair {
	t.Helper()
	primary, pc := startPrimary(t)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	replica := redistest.StartServer(t, "--replicaof", host, port)
	rc := redistest.Dial(t, replica.Addr())
	p, xc := startProxyOf(t, primary)
	pc.MustDo(t, "SET", "k", "v")
	redistest.WaitSynced(t, pc, rc)
	waitOffsetsEqual(t, pc, xc)
	return resp3Pair{replica: replica.Addr(), proxy: p.AddrString()}
}

// goShape describes a value go-redis decoded: its Go type, with the keys and
// element types of maps and slices.
func goShape(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = goShape(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case map[any]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			keys = append(keys, fmt.Sprintf("%v(%T):%s", k, k, goShape(e)))
		}
		sort.Strings(keys)
		return "map{" + strings.Join(keys, " ") + "}"
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "map[string]string{" + strings.Join(keys, " ") + "}"
	}
	return fmt.Sprintf("%T", v)
}

// clientListFields returns the field names of each CLIENT LIST line, and
// fails the test unless every line has the same ones.
func clientListFields(t testing.TB, list string) []string {
	t.Helper()
	var fields []string
	for i, line := range strings.Split(strings.TrimRight(list, "\n"), "\n") {
		var names []string
		for _, kv := range strings.Fields(line) {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		if i > 0 && !slices.Equal(names, fields) {
			t.Fatalf("CLIENT LIST lines with different fields: %q and %q", fields, names)
		}
		fields = names
	}
	return fields
}

// TestGoRedisRESP3 reads INFO, ROLE, CONFIG GET and CLIENT LIST with go-redis
// v9, Protocol 3, from the proxy and from a redis-server replica: the same Go
// types from the generic Do (maps for CONFIG GET and HELLO, strings for the
// verbatim INFO and CLIENT LIST), and the same results from go-redis's typed
// commands. RESP2 is read the same way, for contrast.
func TestGoRedisRESP3(t *testing.T) {
	pair := startRESP3Pair(t)
	for _, proto := range []int{3, 2} {
		t.Run("protocol="+strconv.Itoa(proto), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dial := func(addr string) *redis.Client {
				rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1,
					DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
				t.Cleanup(func() { rdb.Close() })
				return rdb
			}
			x, r := dial(pair.proxy), dial(pair.replica)
			for _, args := range [][]any{
				{"HELLO"},
				{"INFO", "replication"},
				{"CONFIG", "GET", "repl-timeout"},
				{"CONFIG", "GET", "repl-timeout", "maxmemory"},
				{"CLIENT", "LIST"},
				{"CLIENT", "INFO"},
				{"CLIENT", "GETNAME"},
				{"ROLE"},
			} {
				got, gerr := x.Do(ctx, args...).Result()
				want, werr := r.Do(ctx, args...).Result()
				if (gerr == nil) != (werr == nil) || (gerr != nil && gerr != redis.Nil) {
					t.Errorf("%v: the proxy: %v; redis-server: %v", args, gerr, werr)
					continue
				}
				if args[0] == "ROLE" {
					// The proxy adds its replicas as a sixth element.
					g, ok := got.([]any)
					if !ok || len(g) != 6 || goShape(g[5]) != "[]" {
						t.Errorf("ROLE from the proxy: %#v, want six elements, the sixth its (no) replicas", got)
						continue
					}
					got = g[:5]
				}
				if gs, ws := goShape(got), goShape(want); gs != ws {
					t.Errorf("%v: the proxy decodes to %s, redis-server to %s", args, gs, ws)
				}
				if args[0] == "CLIENT" && args[1] == "LIST" {
					gf, wf := clientListFields(t, got.(string)), clientListFields(t, want.(string))
					if !slices.Equal(gf, wf) {
						t.Errorf("CLIENT LIST fields: the proxy %q, redis-server %q", gf, wf)
					}
				}
			}
			// go-redis's typed commands parse the same replies.
			gi, err1 := x.Info(ctx, "replication").Result()
			wi, err2 := r.Info(ctx, "replication").Result()
			if err1 != nil || err2 != nil || !strings.HasPrefix(gi, "# Replication\r\nrole:slave\r\n") || !strings.HasPrefix(wi, "# Replication\r\nrole:slave\r\n") {
				t.Errorf("INFO: the proxy %.60q (%v), redis-server %.60q (%v)", gi, err1, wi, err2)
			}
			gc, err1 := x.ConfigGet(ctx, "repl-timeout").Result()
			wc, err2 := r.ConfigGet(ctx, "repl-timeout").Result()
			if err1 != nil || err2 != nil || !reflect.DeepEqual(gc, wc) {
				t.Errorf("CONFIG GET: the proxy %v (%v), redis-server %v (%v)", gc, err1, wc, err2)
			}
			gl, err1 := x.ClientList(ctx).Result()
			wl, err2 := r.ClientList(ctx).Result()
			if err1 != nil || err2 != nil || !slices.Equal(clientListFields(t, gl), clientListFields(t, wl)) {
				t.Errorf("CLIENT LIST: the proxy %q (%v), redis-server %q (%v)", gl, err1, wl, err2)
			}
			if !strings.Contains(gl, " resp="+strconv.Itoa(proto)+"\n") {
				t.Errorf("CLIENT LIST from the proxy does not show resp=%d: %q", proto, gl)
			}
			gci, err1 := x.ClientInfo(ctx).Result()
			wci, err2 := r.ClientInfo(ctx).Result()
			if err1 != nil || err2 != nil || gci.Resp != proto || wci.Resp != proto {
				t.Errorf("CLIENT INFO: the proxy %+v (%v), redis-server %+v (%v)", gci, err1, wci, err2)
			}
		})
	}
}

// cliShape reduces redis-cli --no-raw output to its types: each value
// replaced by its kind ("string", "(integer)", "(nil)"), the map keys kept.
func cliShape(out string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		prefix, value := "", line
		if i := strings.Index(line, " => "); i >= 0 {
			prefix, value = line[:i+4], line[i+4:]
		} else if i := strings.Index(line, ") "); i >= 0 && strings.Trim(line[:i], " 0123456789") == "" {
			prefix, value = line[:i+2], line[i+2:]
		}
		switch {
		case strings.HasPrefix(value, `"`):
			value = "string"
		case strings.HasPrefix(value, "(integer) "):
			value = "(integer)"
		}
		lines = append(lines, prefix+value)
	}
	return lines
}

// TestRedisCLIRESP3 runs redis-cli -3 (which says HELLO 3 first and prints
// each RESP3 type its own way) against the proxy and a redis-server replica:
// no error, and the same output but for values (CONFIG GET's map lines, ROLE's
// first five elements; INFO's and CLIENT LIST's text).
func TestRedisCLIRESP3(t *testing.T) {
	redistest.Require(t)
	pair := startRESP3Pair(t)
	cli := func(addr string, args ...string) string {
		host, port, _ := strings.Cut(addr, ":")
		out := redistest.RedisCLI(t, append([]string{"-3", "--no-raw", "-h", host, "-p", port}, args...)...)
		if strings.Contains(out, "HELLO 3 failed") || strings.Contains(out, "NOPROTO") || strings.Contains(out, "ERR") {
			t.Errorf("redis-cli -3 %q against %s printed an error: %s", args, addr, out)
		}
		return out
	}
	for _, args := range [][]string{
		{"CONFIG", "GET", "repl-timeout"},
		{"CONFIG", "GET", "repl-timeout", "maxmemory"},
		{"ROLE"},
		{"HELLO", "3"},
		{"CLIENT", "GETNAME"},
		{"INFO", "replication"},
		{"CLIENT", "LIST"},
	} {
		got, want := cli(pair.proxy, args...), cli(pair.replica, args...)
		t.Logf("redis-cli -3 %q: the proxy printed\n%s\nredis-server\n%s", args, got, want)
		gs, ws := cliShape(got), cliShape(want)
		switch args[0] {
		case "ROLE":
			if len(gs) < 6 || !strings.HasPrefix(gs[5], "6) ") {
				t.Errorf("ROLE from the proxy:\n%s\nwant six elements", got)
				continue
			}
			gs = gs[:5]
		case "CONFIG":
			// Redis orders several directives its own way: the pairs are
			// compared without their ordinals ("1# ").
			for _, lines := range [][]string{gs, ws} {
				for i, l := range lines {
					_, lines[i], _ = strings.Cut(l, "# ")
				}
				sort.Strings(lines)
			}
		case "INFO":
			// Verbatim text, printed as it is: a bulk string would be quoted.
			if !strings.HasPrefix(got, "# Replication\r\nrole:slave\r\n") || !strings.HasPrefix(want, "# Replication\r\nrole:slave\r\n") {
				t.Errorf("INFO: the proxy printed %.80q, redis-server %.80q", got, want)
			}
			continue
		case "CLIENT":
			if args[1] == "LIST" {
				if gf, wf := clientListFields(t, got), clientListFields(t, want); !slices.Equal(gf, wf) {
					t.Errorf("CLIENT LIST fields: the proxy %q, redis-server %q", gf, wf)
				}
				if !strings.HasSuffix(strings.TrimSpace(got), " resp=3") {
					t.Errorf("CLIENT LIST from redis-cli -3 does not end in resp=3: %q", got)
				}
				continue
			}
		case "HELLO":
			// The id is a value; the rest are the same strings.
			if !slices.Contains(gs, `3# "proto" => (integer)`) {
				t.Errorf("HELLO 3: %q", got)
			}
		}
		if !slices.Equal(gs, ws) {
			t.Errorf("redis-cli -3 %q: the proxy printed\n%s\nredis-server\n%s", args, got, want)
		}
	}
}

// nodeRedisScript reads the four replies with node-redis v5 (RESP: 3) from
// the port it is given, and prints what they decoded to as JSON: the raw
// reply's shape (sendCommand) and node-redis's own parse of each.
const nodeRedisScript = `
import { createClient } from 'redis';
const port = process.argv[2];
const c = createClient({ url: 'redis://127.0.0.1:' + port, RESP: 3,
  socket: { connectTimeout: 5000, reconnectStrategy: false } });
c.on('error', e => { console.error('node-redis:', String(e)); process.exit(2); });
await c.connect();
function shape(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return ['array', v.map(shape)];
  if (v instanceof Map) return ['Map', [...v.entries()].map(([k, x]) => [String(k), shape(x)]).sort()];
  if (Buffer.isBuffer(v)) return 'Buffer';
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    return [proto === null ? 'object' : proto.constructor.name,
      Object.entries(v).map(([k, x]) => [k, shape(x)]).sort()];
  }
  return typeof v;
}
const out = {};
out.hello = shape(await c.sendCommand(['HELLO']));
out.info = shape(await c.sendCommand(['INFO', 'replication']));
out.role = shape(await c.sendCommand(['ROLE']));
out.configGet = shape(await c.sendCommand(['CONFIG', 'GET', 'repl-timeout']));
out.configGet2 = shape(await c.sendCommand(['CONFIG', 'GET', 'repl-timeout', 'maxmemory']));
out.clientList = shape(await c.sendCommand(['CLIENT', 'LIST']));
out.clientGetName = shape(await c.sendCommand(['CLIENT', 'GETNAME']));
const info = await c.info('replication');
out.infoParsed = typeof info + ':' + info.split('\r\n').slice(0, 2).join('|');
out.configParsed = await c.configGet('repl-timeout');
out.clientListParsed = [...new Set((await c.clientList()).map(o => Object.keys(o).sort().join(',')))];
out.clientListResp = (await c.clientList()).map(o => String(o.resp));
const role = await c.role();
out.roleParsed = { keys: Object.keys(role).sort(), role: role.role, state: role.state,
  master: Object.keys(role.master ?? {}).sort() };
console.log(JSON.stringify(out));
await c.close();
`

// TestNodeRedisRESP3 reads INFO, ROLE, CONFIG GET and CLIENT LIST with
// node-redis from the npm registry (redistest.NodeRedis, installed once into
// the user's cache), RESP: 3, from the proxy and a redis-server replica: the
// same JS types and keys, node-redis's own parsers included.
func TestNodeRedisRESP3(t *testing.T) {
	redistest.Require(t)
	dir := redistest.NodeModules(t, redistest.NodeRedis)
	pair := startRESP3Pair(t)
	read := func(addr string) map[string]json.RawMessage {
		_, port, _ := strings.Cut(addr, ":")
		out := redistest.RunNode(t, dir, nodeRedisScript, port)
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("node-redis against %s printed %q: %v", addr, out, err)
		}
		return m
	}
	got, want := read(pair.proxy), read(pair.replica)
	for _, key := range []string{"hello", "info", "role", "configGet", "configGet2", "clientList", "clientGetName",
		"infoParsed", "configParsed", "clientListParsed", "roleParsed"} {
		g, w := string(got[key]), string(want[key])
		if key == "role" {
			// ["array",[five elements..., the proxy's replicas]]: compare the five.
			var gv, wv []json.RawMessage
			var ge, we []json.RawMessage
			if json.Unmarshal(got[key], &gv) != nil || json.Unmarshal(gv[1], &ge) != nil || len(ge) != 6 ||
				json.Unmarshal(want[key], &wv) != nil || json.Unmarshal(wv[1], &we) != nil {
				t.Errorf("ROLE: the proxy %s, redis-server %s", g, w)
				continue
			}
			gb, _ := json.Marshal(ge[:5])
			wb, _ := json.Marshal(we)
			g, w = string(gb), string(wb)
		}
		if key == "configGet2" {
			// Redis orders several directives its own way; the shape sorts
			// the keys of a map already, so only its form is compared.
			g, w = strings.ReplaceAll(g, "maxmemory", "m"), strings.ReplaceAll(w, "maxmemory", "m")
		}
		if g != w {
			t.Errorf("%s: the proxy decodes to %s, redis-server to %s", key, g, w)
		}
	}
	if !strings.Contains(string(got["clientListResp"]), `"3"`) {
		t.Errorf("CLIENT LIST from the proxy, parsed by node-redis, shows no resp=3: %s", got["clientListResp"])
	}
	t.Logf("node-redis read from the proxy: %s", mustJSON(got))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
