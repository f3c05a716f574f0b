package proxy

import (
	"bytes"
	"cmp"
	"flag"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/commanddocs"
)

var updateDocs = flag.Bool("update-command-docs", false, "rewrite command_docs.resp from a real redis-server")

// rawDo sends args on conn and parses one reply, RESP2 or RESP3.
func rawDo(t testing.TB, conn net.Conn, args ...string) commanddocs.Value {
	t.Helper()
	v, _, err := commanddocs.Parse([]byte(rawReply(t, conn, args...)))
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// served reports whether full ("config|get") is a subcommand the proxy
// serves.
func served(full string) bool {
	parent, sub, _ := strings.Cut(full, "|")
	return slices.Contains(servedSubcommands[parent], sub)
}

// keepServed cuts a command's COMMAND INFO entry to the subcommands the
// proxy serves, sorted (Redis lists them in its dict's order, which its
// random hash seed changes from run to run).
func keepServed(info commanddocs.Value) commanddocs.Value {
	info.Elems = slices.Clone(info.Elems)
	subs := &info.Elems[9]
	var kept []commanddocs.Value
	for _, s := range subs.Elems {
		if served(s.Elems[0].Str) {
			kept = append(kept, s)
		}
	}
	slices.SortFunc(kept, func(a, b commanddocs.Value) int { return cmp.Compare(a.Elems[0].Str, b.Elems[0].Str) })
	subs.Elems = kept
	return info
}

// keepServedDocs cuts a command's COMMAND DOCS map (or, under RESP2, its
// array of keys and values) to the subcommands the proxy serves, sorted.
func keepServedDocs(docs commanddocs.Value) commanddocs.Value {
	docs.Elems = slices.Clone(docs.Elems)
	for i := 0; i+1 < len(docs.Elems); i += 2 {
		if docs.Elems[i].Str != "subcommands" {
			continue
		}
		type pair struct{ k, v commanddocs.Value }
		var kept []pair
		subs := docs.Elems[i+1]
		for j := 0; j+1 < len(subs.Elems); j += 2 {
			if served(subs.Elems[j].Str) {
				kept = append(kept, pair{subs.Elems[j], subs.Elems[j+1]})
			}
		}
		slices.SortFunc(kept, func(a, b pair) int { return cmp.Compare(a.k.Str, b.k.Str) })
		subs.Elems = nil
		for _, p := range kept {
			subs.Elems = append(subs.Elems, p.k, p.v)
		}
		docs.Elems[i+1] = subs
	}
	return docs
}

// TestCommandDocsMatchRedis: command_docs.resp is what a real redis-server
// 7.0 answers, under RESP3, to COMMAND INFO and COMMAND DOCS for the
// commands the proxy serves, cut to the subcommands it serves
// (-update-command-docs rewrites it); and the proxy answers COMMAND,
// COMMAND INFO, DOCS, LIST and COUNT under RESP3 and RESP2 as that
// redis-server does for the same commands, unknown names and subcommands
// by full name included.
func TestCommandDocsMatchRedis(t *testing.T) {
	r := redistest.StartServer(t)
	rconn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rconn.Close()
	p := startProxy(t)
	var names []string
	for n := range p.commands.byName {
		names = append(names, n)
	}
	slices.Sort(names)

	// The file, from RESP3 replies.
	rawDo(t, rconn, "HELLO", "3")
	info := rawDo(t, rconn, append([]string{"COMMAND", "INFO"}, names...)...)
	docs := rawDo(t, rconn, append([]string{"COMMAND", "DOCS"}, names...)...)
	for i := range info.Elems {
		if info.Elems[i].Kind != '*' {
			t.Fatalf("redis-server has no command %s", names[i])
		}
		info.Elems[i] = keepServed(info.Elems[i])
	}
	for i := 1; i < len(docs.Elems); i += 2 {
		docs.Elems[i] = keepServedDocs(docs.Elems[i])
	}
	want := commanddocs.AppendRESP3(commanddocs.AppendRESP3(nil, info), docs)
	if *updateDocs {
		if err := os.WriteFile("commanddocs/command_docs.resp", want, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if !bytes.Equal(commanddocs.Embedded(), want) {
		t.Errorf("command_docs.resp differs from redis-server's replies: run go test -run TestCommandDocsMatchRedis ./proxy/ -update-command-docs")
	}

	// The proxy's replies against redis-server's, cut the same way, in
	// RESP3 (maps and sets as stored) and in RESP2 (flattened).
	pconn := p.dial(t)
	for _, proto := range []string{"3", "2"} {
		rawDo(t, rconn, "HELLO", proto)
		rawDo(t, pconn, "HELLO", proto)
		commandRepliesMatch(t, "RESP"+proto, rconn, pconn, names)
	}
}

// commandRepliesMatch compares the COMMAND family's replies of the proxy
// (pconn) and redis-server (rconn), in the protocol each speaks: the same
// values of the same types, Redis's cut to what the proxy serves.
func commandRepliesMatch(t *testing.T, proto string, rconn, pconn net.Conn, names []string) {
	t.Helper()
	norm := func(req []string, v commanddocs.Value) commanddocs.Value {
		switch strings.ToLower(req[1]) {
		case "info":
			for i, e := range v.Elems {
				if e.Kind == '*' {
					v.Elems[i] = keepServed(e)
				}
			}
		case "docs":
			for i := 1; i < len(v.Elems); i += 2 {
				v.Elems[i] = keepServedDocs(v.Elems[i])
			}
		}
		return v
	}
	for _, req := range [][]string{
		append([]string{"COMMAND", "INFO"}, names...),
		append([]string{"COMMAND", "DOCS"}, names...),
		{"COMMAND", "INFO", "nosuch", "CONFIG|GET", "config|nosuch", "Ping"},
		{"COMMAND", "DOCS", "nosuch", "echo", "client|list", "client|nosuch"},
		{"COMMAND", "LIST", "x"},
		{"COMMAND", "LIST", "FILTERBY", "nope", "x"},
		{"COMMAND", "FOO"},
		{"COMMAND", "COUNT", "x"},
	} {
		want, got := norm(req, rawDo(t, rconn, req...)), rawDo(t, pconn, req...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %.60q: the proxy answered\n%s\nredis-server\n%s", proto, req, commanddocs.AppendRESP3(nil, got), commanddocs.AppendRESP3(nil, want))
		}
	}
	// Redis lists every command it has; the proxy the ones it serves.
	for _, req := range [][]string{
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "c*"},
		{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"},
		{"COMMAND", "LIST", "FILTERBY", "MODULE", "x"},
	} {
		var want []string
		for _, e := range rawDo(t, rconn, req...).Elems {
			if n := e.Str; slices.Contains(names, n) || served(n) {
				want = append(want, n)
			}
		}
		var got []string
		for _, e := range rawDo(t, pconn, req...).Elems {
			got = append(got, e.Str)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q: the proxy lists %q, redis-server %q among what the proxy serves", proto, req, got, want)
		}
	}

	// COMMAND, COMMAND INFO and COMMAND LIST have COMMAND COUNT entries.
	count := rawDo(t, pconn, "COMMAND", "COUNT").Num
	for _, req := range [][]string{{"COMMAND"}, {"COMMAND", "INFO"}, {"COMMAND", "LIST"}} {
		if n := len(rawDo(t, pconn, req...).Elems); int64(n) != count {
			t.Errorf("%s: %v has %d entries, COMMAND COUNT says %d", proto, req, n, count)
		}
	}
	if n := len(rawDo(t, pconn, "COMMAND", "DOCS").Elems) / 2; int64(n) != count {
		t.Errorf("%s: COMMAND DOCS has %d entries, COMMAND COUNT says %d", proto, n, count)
	}
}

// TestServedSubcommands: every subcommand COMMAND lists is served: none
// gets the unknown-subcommand reply.
func TestServedSubcommands(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	args := map[string][]string{
		"acl|deluser": {"nosuchuser"}, "acl|dryrun": {"default", "ping"}, "acl|getuser": {"default"},
		"acl|setuser": {"nosuchuser"},
		"client|kill": {"ID", "999999"}, "client|setname": {"x"}, "config|get": {"port"},
		"config|set": {"loglevel", "verbose"}, "latency|graph": {"x"}, "latency|history": {"x"},
	}
	for parent, subs := range servedSubcommands {
		for _, sub := range subs {
			got := a.do(append([]string{parent, sub}, args[parent+"|"+sub]...)...)
			if strings.Contains(got, "unknown subcommand") || strings.Contains(got, "wrong number of arguments") {
				t.Errorf("%s %s answered %q", parent, sub, got)
			}
		}
	}
}
