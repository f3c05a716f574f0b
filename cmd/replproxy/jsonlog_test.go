package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Every proxy these tests start logs JSON (TestMain adds --log-format json
// to the child's command line), and checkJSONLog holds each line to the
// table of fields in docs/logs.md: a line that is not one JSON object, a
// key the table does not list, or a value not of the key's type fails the
// test, so the table stays complete and true. TestLogCallsMatchDocs
// (logcalls_test.go) holds every logging call of the source to the same
// table, those no test reaches included.

// logsDoc is where operators read the log fields: docs/logs.md, whose
// table has a row per key.
var logsDoc = filepath.Join("..", "..", "docs", "logs.md")

// docLogFields is the table of log fields in docs/logs.md, key to type, read
// once.
var docLogFields = sync.OnceValues(func() (map[string]string, error) {
	data, err := os.ReadFile(logsDoc)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string)
	in := false
	key := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "| key | type | unit | meaning |":
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			if len(cells) < 4 {
				continue
			}
			typ := strings.TrimSpace(cells[2])
			for _, m := range key.FindAllStringSubmatch(cells[1], -1) {
				fields[m[1]] = typ
			}
		case in:
			return fields, nil
		}
	}
	return fields, nil
})

// checkJSONLogLines checks every line of data against the table of log
// fields and returns how many it checked. what names the log in failures.
func checkJSONLogLines(t testing.TB, what string, data []byte) int {
	t.Helper()
	fields, err := docLogFields()
	if err != nil || len(fields) == 0 {
		t.Fatalf("the table of log fields in %s: %v (%d keys)", logsDoc, err, len(fields))
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		n++
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil || dec.More() {
			t.Errorf("%s line %d is not one JSON object (%v): %s", what, n, err, line)
			continue
		}
		for k, v := range rec {
			typ, ok := fields[k]
			if !ok {
				t.Errorf("%s line %d: key %q is not in the table of log fields (docs/logs.md): %s", what, n, k, line)
				continue
			}
			if !hasLogType(v, typ) {
				t.Errorf("%s line %d: %q is %T %v, the table of log fields says %s: %s", what, n, k, v, v, typ, line)
			}
		}
		for _, k := range []string{"@timestamp", "@level", "@message"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("%s line %d has no %s: %s", what, n, k, line)
			}
		}
	}
	return n
}

// hasLogType reports whether v, decoded with UseNumber, is of typ: string,
// integer (a number without fraction or exponent) or boolean. null is none.
func hasLogType(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		return ok && !strings.ContainsAny(n.String(), ".eE")
	}
	return false
}

// checkJSONLog checks, when the test ends, every line of the log file path
// (relative paths are to dir). Register it before the process is started
// (redistest.StartProcess), so that it runs once the process is stopped.
func checkJSONLog(t *testing.T, path string) {
	t.Helper()
	t.Cleanup(func() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("log %s: %v", path, err)
			return
		}
		n := checkJSONLogLines(t, filepath.Base(path), data)
		if n == 0 {
			t.Errorf("log %s is empty", path)
		}
		t.Logf("%s: %d JSON lines checked against the table of log fields", filepath.Base(path), n)
	})
}

func TestDocLogFields(t *testing.T) {
	fields, err := docLogFields()
	if err != nil {
		t.Fatal(err)
	}
	for k, typ := range fields {
		if typ != "string" && typ != "integer" && typ != "boolean" {
			t.Errorf("log field %q has type %q in docs/logs.md: string, integer or boolean", k, typ)
		}
	}
	for _, k := range []string{"@timestamp", "@level", "@message", "@module", "error", "reason", "took-ms"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("the table of log fields in docs/logs.md lacks %q", k)
		}
	}
}

func TestJSONLogChecker(t *testing.T) {
	good := `{"@level":"info","@message":"full sync received","@module":"replproxy.upstream","@timestamp":"2026-01-01T00:00:00.000000Z","rdb-bytes":10,"took-ms":3,"eof-mark":true,"reason":"requested"}` + "\n"
	if n := checkJSONLogLines(t, "good", []byte(good)); n != 1 {
		t.Fatalf("%d lines checked", n)
	}
	for name, line := range map[string]string{
		"not JSON":         "*** FATAL CONFIG ERROR ***",
		"unknown key":      `{"@level":"info","@message":"m","@timestamp":"t","size":"1.5 MiB"}`,
		"nanoseconds":      `{"@level":"info","@message":"m","@timestamp":"t","took-ms":0.5}`,
		"reason as number": `{"@level":"info","@message":"m","@timestamp":"t","reason":1}`,
		"null error":       `{"@level":"info","@message":"m","@timestamp":"t","error":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			ft := &fakeTB{TB: t}
			checkJSONLogLines(ft, name, []byte(line+"\n"))
			if !ft.failed {
				t.Errorf("%s passed the check: %s", name, line)
			}
		})
	}
}

// fakeTB records a failure instead of failing the test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
func (f *fakeTB) Helper()               {}

// TestFatalErrorsInJSON: under log-format json, a start that fails says why
// in JSON on stderr (and in the logfile, when there is one), whether
// log-format comes from the command line or the file, and whatever else in
// them is wrong.
func TestFatalErrorsInJSON(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.conf")
	os.WriteFile(badFile, []byte("log-format JSON\nport 0\nrepl-backlog-size 12zz\n"), 0o644)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := itoa(busy.Addr().(*net.TCPAddr).Port)
	logfile := filepath.Join(dir, "start.log")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown directive", []string{"--port", "0", "--bogus", "x", "--log-format", "json"}, "bogus"},
		{"log-format before the bad directive", []string{"--log-format json", "--repl-backlog-size", "lots"}, "repl-backlog-size"},
		{"bad value in a file that asks for json", []string{badFile}, badFile + ":3"},
		{"missing file", []string{filepath.Join(dir, "nope.conf"), "--log-format", "json"}, "nope.conf"},
		{"logfile not writable", []string{"--port", "0", "--log-format", "json", "--logfile", filepath.Join(dir, "no", "such", "dir.log")}, "dir.log"},
		{"port in use", []string{"--port", busyPort, "--log-format", "json", "--dir", dir}, busyPort},
		{"port in use, logfile", []string{"--port", busyPort, "--log-format", "json", "--dir", dir, "--logfile", logfile}, busyPort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code == 0 {
				t.Fatalf("exit code 0 for %v", tc.args)
			}
			if n := checkJSONLogLines(t, "stderr", stderr.Bytes()); n == 0 {
				t.Fatal("nothing on stderr")
			}
			if !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), `"@level":"error"`) {
				t.Errorf("stderr %q has no error naming %q", stderr.String(), tc.want)
			}
		})
	}
	data, _ := os.ReadFile(logfile)
	if checkJSONLogLines(t, "logfile", data) == 0 || !strings.Contains(string(data), "cannot start") {
		t.Errorf("the logfile does not record the failed start: %q", data)
	}

	// The real program, as a child process: its stderr is JSON too.
	cmd := exec.Command(os.Args[0], badFile)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("a bad config file started")
	}
	if checkJSONLogLines(t, "child's stderr", stderr.Bytes()) != 1 || !strings.Contains(stderr.String(), "fatal config error") {
		t.Errorf("child's stderr: %q", stderr.String())
	}
}

// TestFatalConfigErrorText: without log-format json the fatal config error
// stays redis-server's text.
func TestFatalConfigErrorText(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--log-format", "json", "--log-format", "text", "--bogus", "x"}, &stderr); code == 0 {
		t.Fatal("exit code 0")
	}
	if !strings.HasPrefix(stderr.String(), "\n*** FATAL CONFIG ERROR ***\n") {
		t.Errorf("stderr %q", stderr.String())
	}
}
