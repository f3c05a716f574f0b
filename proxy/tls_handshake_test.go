package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
)

// tlsArgs are the proxy arguments for a TLS listener on a free port with
// pki's files (tls-auth-clients left at its default, yes).
func tlsArgs(t testing.TB, pki *redistest.PKI) []string {
	return []string{
		"--tls-port", strconv.Itoa(redistest.FreePort(t)),
		"--tls-cert-file", pki.Cert, "--tls-key-file", pki.Key, "--tls-ca-cert-file", pki.CACert,
	}
}

// tlsPing dials addr over TLS with conf, sends PING and returns the reply
// line, or the error that ended the attempt. Under TLS 1.3 the server checks
// the client's certificate after the client's handshake is done, so a
// refusal shows up on the first read, not in the dial.
func tlsPing(addr string, conf *tls.Config) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// countListeners returns how many listeners of a kind (TLS or plain) the
// server's listener set holds.
func countListeners(s *Server, isTLS bool) int {
	n := 0
	for _, b := range s.listeners.inUse() {
		if b.TLS == isTLS {
			n++
		}
	}
	return n
}

// TestTLSBothWays: a primary serving TLS only, the proxy
// over TLS on both sides (tls-replication upstream, tls-port only
// downstream), two real replicas over TLS; the data is equal everywhere, and
// a client without a valid certificate is refused under tls-auth-clients yes.
// The stream reaches the replicas by inline writes.
func TestTLSBothWays(t *testing.T) {
	pki := redistest.NewPKI(t)
	primary := redistest.StartTLSServer(t, pki, "--repl-diskless-sync-delay", "0")
	pc := redistest.DialTLS(t, primary.Addr(), pki.ClientConfig())

	// A 16 KiB backlog and no stream log: after the writes below the
	// proxy's own snapshot is no longer servable, so the replicas' full
	// syncs need a side-link fetch, over TLS too.
	args := append(replicaOf(primary), "--port", "0", "--tls-replication", "yes", "--repl-backlog-size", "16kb",
		"--repl-log-size", "0")
	p := metricsProxy(t, append(args, tlsArgs(t, pki)...)...)
	if n := countListeners(p.Server, false); n != 0 {
		t.Fatalf("port 0 with a tls-port opened %d plain listeners", n)
	}
	addr := p.TLSAddr().String()
	xc := redistest.DialTLS(t, addr, pki.ClientConfig())
	waitLinkUp(t, xc)

	for i := range 2000 {
		pc.MustDo(t, "SET", "key:"+strconv.Itoa(i), strings.Repeat("v", i%300))
	}
	waitOffsetsEqual(t, pc, xc)
	_, rcs := redistest.StartTLSReplicas(t, pki, 2, addr)
	redistest.WaitSynced(t, pc, rcs...) // offsets equal, then DEBUG DIGEST equal
	if n := xc.InfoInt(t, "proxy", "snapshot_fetches"); n != 1 {
		t.Fatalf("snapshot_fetches %d, want 1 (over TLS)", n)
	}
	for i := range 1000 { // the stream, over TLS on both sides
		pc.MustDo(t, "HSET", "h:"+strconv.Itoa(i%10), strconv.Itoa(i), strings.Repeat("x", 1000))
	}
	pc.MustDo(t, "INCRBY", "counter", 42)
	redistest.WaitSynced(t, pc, rcs...)
	// Caught up, TLS replicas are sent the stream inline, as plain ones.
	if n := scrape(t, p)[`replproxy_relay_delay_seconds_count{path="inline"}`]; n == 0 {
		t.Error("no inline write to the TLS replicas")
	}
	want := pc.Digest(t)
	for i, rc := range rcs {
		if got := rc.Digest(t); got != want {
			t.Fatalf("replica %d digest %s, primary %s", i, got, want)
		}
		if got, w := rc.InfoInt(t, "replication", "master_repl_offset"), pc.InfoInt(t, "replication", "master_repl_offset"); got != w {
			t.Fatalf("replica %d offset %d, primary %d", i, got, w)
		}
	}
	if n := xc.InfoInt(t, "replication", "connected_slaves"); n != 2 {
		t.Fatalf("proxy has %d replicas, want 2", n)
	}

	// Refused: no certificate, and a certificate from another CA.
	noCert := pki.ClientConfig()
	noCert.Certificates = nil
	other := redistest.NewPKI(t).ClientConfig()
	other.RootCAs = pki.ClientConfig().RootCAs // trusts the proxy, but its own cert is foreign
	before := xc.InfoInt(t, "proxy", "tls_handshake_failures")
	for name, conf := range map[string]*tls.Config{"no certificate": noCert, "another CA": other} {
		if reply, err := tlsPing(addr, conf); err == nil || reply == "+PONG" {
			t.Fatalf("%s: PING answered %q, %v; want the connection refused", name, reply, err)
		}
	}
	redistest.WaitFor(t, 5*time.Second, "two handshake failures counted", func() bool {
		return xc.InfoInt(t, "proxy", "tls_handshake_failures") == before+2
	})
	if reply, err := tlsPing(addr, pki.ClientConfig()); err != nil || reply != "+PONG" {
		t.Fatalf("valid certificate: PING answered %q, %v", reply, err)
	}
	// redis-cli over TLS, as an operator would.
	_, port, _ := net.SplitHostPort(addr)
	out := redistest.RedisCLI(t, "--tls", "--cacert", pki.CACert, "--cert", pki.Cert, "--key", pki.Key,
		"-h", "127.0.0.1", "-p", port, "INFO", "replication")
	if !strings.Contains(out, "connected_slaves:2") {
		t.Fatalf("redis-cli --tls INFO replication:\n%s", out)
	}
}

// TestTLSPlainAndTLS serves both ports: each speaks its own transport, and
// INFO shows the plain port as tcp_port.
func TestTLSPlainAndTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	plain := redistest.FreePort(t)
	p := startProxy(t, append([]string{"--port", strconv.Itoa(plain)}, tlsArgs(t, pki)...)...)
	c := redistest.Dial(t, p.AddrString())
	c.MustDo(t, "PING")
	tc := redistest.DialTLS(t, p.TLSAddr().String(), pki.ClientConfig())
	tc.MustDo(t, "PING")
	if got := tc.Info(t, "server")["tcp_port"]; got != strconv.Itoa(plain) {
		t.Fatalf("tcp_port %s, want %d", got, plain)
	}
	if n := c.InfoInt(t, "proxy", "tls_connections_received"); n != 1 {
		t.Fatalf("tls_connections_received %d, want 1", n)
	}
	// Plain bytes on the TLS port are a failed handshake, not a client.
	conn, err := net.Dial("tcp", p.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("PING\r\n"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := bufio.NewReader(conn).ReadString('\n'); strings.Contains(b, "PONG") {
		t.Fatalf("plain PING on tls-port answered %q", b)
	}
	redistest.WaitFor(t, 5*time.Second, "handshake failure counted", func() bool {
		return c.InfoInt(t, "proxy", "tls_handshake_failures") == 1
	})
	// Redis counts a connection at accept, whether its handshake succeeds.
	if n := c.InfoInt(t, "stats", "total_connections_received"); n != 3 {
		t.Fatalf("total_connections_received %d, want 3 (plain, TLS, failed TLS)", n)
	}
}

// TestTLSHandshakeTimeout: a client that opens a TCP connection to tls-port
// and says nothing is closed after the handshake timeout (repl-timeout when
// shorter than 10s), and counted as a failed handshake.
func TestTLSHandshakeTimeout(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := startProxy(t, append([]string{"--repl-timeout", "1"}, tlsArgs(t, pki)...)...)
	conn, err := net.Dial("tcp", p.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("silent client still connected after 5s")
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("closed after %v, before the 1s timeout", d)
	}
	c := redistest.DialTLS(t, p.TLSAddr().String(), pki.ClientConfig())
	redistest.WaitFor(t, 5*time.Second, "handshake failure counted", func() bool {
		return c.InfoInt(t, "proxy", "tls_handshake_failures") == 1
	})
	if n := c.InfoInt(t, "clients", "connected_clients"); n != 1 {
		t.Fatalf("connected_clients %d, want 1 (the silent client never became one)", n)
	}
}

// TestTLSReload: CONFIG SET of the tls-* files reloads the material for new
// connections, also with the same file names (rotation in place), and a
// failed reload keeps the old material; open connections are untouched.
func TestTLSReload(t *testing.T) {
	old, next := redistest.NewPKI(t), redistest.NewPKI(t)
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")
	install := func(pki *redistest.PKI) {
		for src, dst := range map[string]string{pki.Cert: cert, pki.Key: key, pki.CACert: ca} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(old)
	tlsPort := redistest.FreePort(t)
	p := startProxy(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca)
	addr := p.TLSAddr().String()
	oc := redistest.DialTLS(t, addr, old.ClientConfig())
	oc.MustDo(t, "PING")
	if _, err := tlsPing(addr, next.ClientConfig()); err == nil {
		t.Fatal("a client of the new CA connected before the reload")
	}

	// Rotation in place: new files under the same names, then CONFIG SET.
	install(next)
	if _, err := tlsPing(addr, next.ClientConfig()); err == nil {
		t.Fatal("new files took effect without CONFIG SET")
	}
	oc.MustDo(t, "CONFIG", "SET", "tls-cert-file", cert, "tls-key-file", key, "tls-ca-cert-file", ca)
	if reply, err := tlsPing(addr, next.ClientConfig()); err != nil || reply != "+PONG" {
		t.Fatalf("client of the new CA after CONFIG SET: %q, %v", reply, err)
	}
	if _, err := tlsPing(addr, old.ClientConfig()); err == nil {
		t.Fatal("a client of the old CA still connects after the reload")
	}
	oc.MustDo(t, "PING") // the open connection is untouched

	// A failed reload answers Redis's error and keeps the material in force.
	_, err := oc.Do("CONFIG", "SET", "tls-cert-file", filepath.Join(dir, "missing.crt"))
	const want = "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
	if err == nil || err.Error() != want {
		t.Fatalf("CONFIG SET of a missing file: %v, want %q", err, want)
	}
	if got := oc.MustDo(t, "CONFIG", "GET", "tls-cert-file").Array()[1].String(); got != cert {
		t.Fatalf("tls-cert-file %q after a failed CONFIG SET, want %q", got, cert)
	}
	if reply, err := tlsPing(addr, next.ClientConfig()); err != nil || reply != "+PONG" {
		t.Fatalf("after a failed reload: %q, %v", reply, err)
	}
	// New names take effect the same way, and tls-auth-clients no lets a
	// client without a certificate in.
	other := redistest.NewPKI(t)
	oc.MustDo(t, "CONFIG", "SET", "tls-cert-file", other.Cert, "tls-key-file", other.Key, "tls-ca-cert-file", other.CACert, "tls-auth-clients", "no")
	noCert := other.ClientConfig()
	noCert.Certificates = nil
	if reply, err := tlsPing(addr, noCert); err != nil || reply != "+PONG" {
		t.Fatalf("tls-auth-clients no, no certificate: %q, %v", reply, err)
	}
}

// tlsListenersOf returns the TLS listeners of the server's listener set.
func tlsListenersOf(s *Server) []net.Listener {
	var lns []net.Listener
	for _, b := range s.listeners.inUse() {
		if b.TLS {
			lns = append(lns, b.Ln)
		}
	}
	return lns
}

// TestTLSConfigSetPortBind: CONFIG SET port moves the plain listeners only
// (the TLS listener and its connections stay); port 0 with a tls-port
// leaves TLS only, as in Redis, and a port brings the plain listener back;
// bind moves both kinds, as redis-server's changeBindAddr does; a change
// whose TLS material fails to load leaves no new listener open.
func TestTLSConfigSetPortBind(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := startProxy(t, append([]string{"--port", strconv.Itoa(redistest.FreePort(t))}, tlsArgs(t, pki)...)...)
	tlsAddr := p.TLSAddr().String()
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	tc := redistest.DialTLS(t, tlsAddr, pki.ClientConfig())
	tlsAnswers := func(addr string) bool {
		reply, err := tlsPing(addr, pki.ClientConfig())
		return err == nil && reply == "+PONG"
	}
	plainAt := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

	// port: the plain listener moves, the TLS one stays the same listener.
	before := tlsListenersOf(p.Server)
	port := freePort(t)
	tc.MustDo(t, "CONFIG", "SET", "port", strconv.Itoa(port))
	if !pingAt(t, plainAt(port)) {
		t.Fatal("no plain answer on the new port")
	}
	if after := tlsListenersOf(p.Server); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("CONFIG SET port replaced the TLS listener: %v, was %v", after, before)
	}
	if !tlsAnswers(tlsAddr) {
		t.Fatal("TLS listener does not answer after CONFIG SET port")
	}
	tc.MustDo(t, "PING") // accepted before the change

	// port 0 with a tls-port: TLS only; then plain again.
	tc.MustDo(t, "CONFIG", "SET", "port", "0")
	if n := countListeners(p.Server, false); n != 0 {
		t.Fatalf("%d plain listeners after CONFIG SET port 0 with a tls-port", n)
	}
	if pingAt(t, plainAt(port)) {
		t.Fatal("the plain port still answers after CONFIG SET port 0")
	}
	if got := tc.Info(t, "server")["tcp_port"]; got != "0" {
		t.Fatalf("tcp_port %s in TLS only, want 0", got)
	}
	if got := p.AddrString(); got != tlsAddr {
		t.Fatalf("Addr %s in TLS only, want the TLS listener's %s", got, tlsAddr)
	}
	if !tlsAnswers(tlsAddr) {
		t.Fatal("TLS listener does not answer in TLS only")
	}
	port = freePort(t)
	tc.MustDo(t, "CONFIG", "SET", "port", strconv.Itoa(port))
	if !pingAt(t, plainAt(port)) || p.AddrString() != plainAt(port) {
		t.Fatalf("plain listener not back on %d (Addr %s)", port, p.AddrString())
	}

	// bind: both kinds move; the wildcard overlaps 127.0.0.1 on both ports.
	tc.MustDo(t, "CONFIG", "SET", "bind", "*")
	lns := tlsListenersOf(p.Server)
	if len(lns) != 1 || lns[0].Addr().String() != net.JoinHostPort("0.0.0.0", tlsPort) {
		t.Fatalf("TLS listeners after CONFIG SET bind *: %v, want one on 0.0.0.0:%s", lns, tlsPort)
	}
	if p.TLSAddr().String() != lns[0].Addr().String() {
		t.Fatalf("TLSAddr %s, want %s", p.TLSAddr(), lns[0].Addr())
	}
	if !tlsAnswers(tlsAddr) || !pingAt(t, plainAt(port)) {
		t.Fatal("no answer through the wildcard")
	}
	tc.MustDo(t, "CONFIG", "SET", "bind", "127.0.0.1")
	if got := p.TLSAddr().String(); got != tlsAddr {
		t.Fatalf("TLSAddr %s after bind 127.0.0.1, want %s", got, tlsAddr)
	}
	if !tlsAnswers(tlsAddr) {
		t.Fatal("TLS listener does not answer after bind 127.0.0.1")
	}
	tc.MustDo(t, "PING") // still the connection made before every change

	// A port change in the same CONFIG SET as a TLS reload that fails: the
	// new port's listener is closed, the old one stays.
	failed := freePort(t)
	_, err := tc.Do("CONFIG", "SET", "port", strconv.Itoa(failed), "tls-cert-file", filepath.Join(t.TempDir(), "missing.crt"))
	if err == nil || !strings.Contains(err.Error(), "Unable to update TLS configuration") {
		t.Fatalf("CONFIG SET port with a missing certificate: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", plainAt(failed), time.Second); err == nil {
		conn.Close()
		t.Fatal("the port of a failed CONFIG SET is listened on")
	}
	if !pingAt(t, plainAt(port)) {
		t.Fatal("the plain port stopped answering after a failed CONFIG SET")
	}
	if got := tc.MustDo(t, "CONFIG", "GET", "port").Array()[1].String(); got != strconv.Itoa(port) {
		t.Fatalf("port %s after a failed CONFIG SET, want %d", got, port)
	}
}

// configGetAll returns CONFIG GET * as a map.
func configGetAll(t testing.TB, c *redistest.Client) map[string]string {
	t.Helper()
	arr := c.MustDo(t, "CONFIG", "GET", "*").Array()
	m := make(map[string]string, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		m[arr[i].String()] = arr[i+1].String()
	}
	return m
}

// TestTLSConfigRewrite: CONFIG REWRITE writes the tls-* directives (TLS
// only, after CONFIG SET port 0), and a proxy started from the file alone
// serves tls-port with the same CONFIG GET *.
func TestTLSConfigRewrite(t *testing.T) {
	pki := redistest.NewPKI(t)
	path := filepath.Join(t.TempDir(), "tls.conf")
	if err := os.WriteFile(path, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newTestProxy(t, proxySetup{args: tlsArgs(t, pki), opts: Options{ConfigFile: path}})
	tlsAddr := p.TLSAddr().String()
	tc := redistest.DialTLS(t, tlsAddr, pki.ClientConfig())
	tc.MustDo(t, "CONFIG", "SET", "port", "0", "tls-auth-clients", "optional", "tls-protocols", "TLSv1.2 TLSv1.3")
	tc.MustDo(t, "CONFIG", "REWRITE")
	want := configGetAll(t, tc)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"port 0\n", "tls-port " + strconv.Itoa(p.TLSAddr().(*net.TCPAddr).Port) + "\n",
		`tls-cert-file "` + pki.Cert + `"` + "\n", "tls-auth-clients optional\n", `tls-protocols "TLSv1.2 TLSv1.3"` + "\n"} {
		if !strings.Contains(string(data), line) {
			t.Errorf("rewritten file lacks %q:\n%s", line, data)
		}
	}
	tc.Close()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}

	cfg, err := config.Parse([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, Options{Logger: hclog.NewNullLogger(), ConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if n := countListeners(srv, false); n != 0 {
		t.Fatalf("restarted from the file with %d plain listeners, want TLS only", n)
	}
	rc := redistest.DialTLS(t, srv.TLSAddr().String(), pki.ClientConfig())
	if got := configGetAll(t, rc); !maps.Equal(got, want) {
		t.Fatalf("CONFIG GET * after the restart:\n got %v\nwant %v", got, want)
	}
}

// TestTLSConfigSetTLSPort: CONFIG SET tls-port turns TLS on in a proxy
// started without it (the files named in the same command are loaded
// first), moves the TLS listeners without touching the plain one, refuses
// a port in use with Redis's reply and keeps the old one, and turns TLS
// off again.
func TestTLSConfigSetTLSPort(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := startProxy(t)
	xc := redistest.Dial(t, p.AddrString())
	plainListener := func() net.Listener {
		for _, b := range p.listeners.inUse() {
			if !b.TLS {
				return b.Ln
			}
		}
		return nil
	}
	plain := plainListener()
	at := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	tlsAnswers := func(port int) bool {
		reply, err := tlsPing(at(port), pki.ClientConfig())
		return err == nil && reply == "+PONG"
	}

	first := freePort(t)
	xc.MustDo(t, "CONFIG", "SET", "tls-cert-file", pki.Cert, "tls-key-file", pki.Key,
		"tls-ca-cert-file", pki.CACert, "tls-port", strconv.Itoa(first))
	if !tlsAnswers(first) {
		t.Fatal("no TLS answer on the tls-port set at runtime")
	}
	second := freePort(t)
	xc.MustDo(t, "CONFIG", "SET", "tls-port", strconv.Itoa(second))
	if !tlsAnswers(second) {
		t.Fatal("no TLS answer on the new tls-port")
	}
	if conn, err := net.DialTimeout("tcp", at(first), time.Second); err == nil {
		conn.Close()
		t.Fatal("the old tls-port still accepts")
	}
	if got := plainListener(); got != plain {
		t.Fatalf("CONFIG SET tls-port replaced the plain listener: %v, was %v", got, plain)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	if _, err := xc.Do("CONFIG", "SET", "tls-port", busyPort); err == nil || !strings.Contains(err.Error(), "argument 'tls-port'") {
		t.Fatalf("CONFIG SET tls-port to a port in use: %v", err)
	}
	if got := xc.MustDo(t, "CONFIG", "GET", "tls-port").Array()[1].String(); got != strconv.Itoa(second) || !tlsAnswers(second) {
		t.Fatalf("after a refused CONFIG SET tls-port: tls-port %s, want %d still answering", got, second)
	}

	xc.MustDo(t, "CONFIG", "SET", "tls-port", "0")
	if n := countListeners(p.Server, true); n != 0 {
		t.Fatalf("%d TLS listeners after CONFIG SET tls-port 0", n)
	}
	xc.MustDo(t, "PING")
	if plainListener() != plain {
		t.Fatal("CONFIG SET tls-port 0 replaced the plain listener")
	}
}

// TestTLSHandshakeCounted: a connection in its TLS
// handshake counts against maxclients and in connected_clients from accept
// on, as Redis creates its client before the handshake. With maxclients 5,
// one plain client and four silent TLS connections fill it: a fifth TLS
// connection is closed at once (long before the 10s handshake timeout),
// with nothing written, and a plain client gets Redis's error; the slots
// come back when the silent ones leave.
func TestTLSHandshakeCounted(t *testing.T) {
	pki := redistest.NewPKI(t)
	plainPort := strconv.Itoa(redistest.FreePort(t))
	p := startProxy(t, append([]string{"--maxclients", "5", "--port", plainPort}, tlsArgs(t, pki)...)...)
	c := redistest.Dial(t, p.AddrString())
	c.MustDo(t, "PING") // registered before the TLS connections come
	var silent []net.Conn
	for range 4 {
		conn, err := net.Dial("tcp", p.TLSAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		silent = append(silent, conn)
	}
	redistest.WaitFor(t, 5*time.Second, "the four handshakes counted in connected_clients", func() bool {
		return c.InfoInt(t, "clients", "connected_clients") == 5
	})

	conn, err := net.Dial("tcp", p.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(make([]byte, 64))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a TLS connection past maxclients is still open after 5s")
	}
	if n != 0 {
		t.Fatalf("a TLS connection past maxclients got %d bytes before its handshake", n)
	}

	plain, err := net.Dial("tcp", p.AddrString())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(plain).ReadString('\n')
	if line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a plain client past maxclients got %q", line)
	}
	if n := c.InfoInt(t, "stats", "rejected_connections"); n != 2 {
		t.Fatalf("rejected_connections %d, want 2", n)
	}

	for _, s := range silent {
		s.Close()
	}
	redistest.WaitFor(t, 5*time.Second, "the handshakes' slots given back", func() bool {
		return c.InfoInt(t, "clients", "connected_clients") == 1
	})
	if r, err := tlsPing(p.TLSAddr().String(), pki.ClientConfig()); r != "+PONG" {
		t.Fatalf("TLS PING after the slots came back: %q %v", r, err)
	}
}
