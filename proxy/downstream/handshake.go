package downstream

import (
	"net"
	"strconv"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replid"
)

// The replication handshake a client makes before PSYNC or SYNC: what its
// REPLCONF options said, read here, where the replica that is made of them
// and reads its later REPLCONF ACKs lives, so that the two readings of one
// command cannot drift apart.

// A Handshake is what a client said with REPLCONF before PSYNC or SYNC.
// Owned by the client's goroutine until PSYNC hands it to New; the replica's
// copy is read-only after.
type Handshake struct {
	Port       int    // listening-port
	IP         string // ip-address
	CapaEOF    bool   // capa eof: takes a "$EOF:<mark>" payload
	CapaPSync2 bool   // capa psync2: takes "+CONTINUE <replid>"
	RDBOnly    bool   // rdb-only 1: the snapshot alone, then done
	// Filtered: rdb-filter-only was sent, with Filter its value as sent
	// ("" for an RDB with none of the data, "functions" for the functions
	// alone: Redis 7.0's one filter). The proxy holds no such RDB: the
	// primary makes it (writer.filtered).
	Filtered bool
	Filter   string
	// CapaReplproxy: capa replproxy, which every replproxy sends and
	// Redis ignores: the replica is a downstream proxy (traffic control
	// and INFO's Links section single those out).
	CapaReplproxy bool
	// CapaSource: capa replproxy-source, which a replproxy sends when it
	// fetches from this one as its snapshot source (snapshot-from): a
	// backup (rdb-only) then gets any snapshot a full sync would, however
	// far behind the stream's end, the asker checking its position.
	CapaSource bool
	// Compression is what REPLCONF link-compression agreed to: "zstd" once
	// the proxy answered +OK to zstd (everything it sends after the PSYNC
	// reply line is then compressed), "" for a plain link.
	Compression string
}

// LinkCompressionRefused is the reply to REPLCONF link-compression zstd
// when repl-link-compression-allow is no: the link stays plain.
const LinkCompressionRefused = "ERR link-compression refused: repl-link-compression-allow is no"

// Address is the replica's identity, as INFO's slaveN line and the logs
// show it: ip-address (else the host of addr, the connection's remote
// address) and listening-port, joined as host:port.
func (h Handshake) Address(addr string) string {
	ip := h.IP
	if ip == "" {
		ip, _, _ = net.SplitHostPort(addr)
	}
	return net.JoinHostPort(ip, strconv.Itoa(h.Port))
}

// Replconf applies REPLCONF's options (args: REPLCONF and its option pairs)
// to h, in order, up to the first that ends the command. It says whether
// to answer (ACK and GETACK are never answered), and with which error
// reply; none ("") is +OK. Redis's options follow Redis: a refused option
// leaves the ones before it applied. link-compression, replproxy's own, is
// agreed only by the +OK: a command refused as a whole, or ended by ACK or
// GETACK, leaves the link's compression as it was. It is
// [Handshake.ReplconfAllowing] with link compression allowed and not
// capped (repl-link-compression-allow's default).
func (h *Handshake) Replconf(args [][]byte) (answer bool, errReply string) {
	answer, errReply, _ = h.ReplconfAllowing(args, CompressionPolicy{Allow: true})
	return answer, errReply
}

// ReplconfAllowing is Replconf under pol, the link compression in force:
// link-compression zstd is agreed to (+OK, Compression "zstd") when
// pol.Allow and, once every option of the command is taken, a slot of
// pol.Slots is free under pol.MaxLinks (taken then, once per connection,
// and given back by EndCompression or by a later link-compression no), and
// refused otherwise, with LinkCompressionRefused or, past the cap,
// LinkCompressionCapped (capped reports that one, for the caller's log
// line); link-compression no is +OK and plain; any other value is refused
// as unsupported. The last link-compression of a command is the one that
// counts.
func (h *Handshake) ReplconfAllowing(args [][]byte, pol CompressionPolicy) (answer bool, errReply string, capped bool) {
	if len(args)%2 == 0 {
		return true, "ERR syntax error", false
	}
	// compression is what the command asks for, agreed below only once
	// every option is taken: nothing of it outlives a refusal.
	compression := h.Compression
	for i := 1; i < len(args); i += 2 {
		opt, val := wire.Word(string(args[i])), string(args[i+1])
		switch opt {
		case "listening-port":
			n, ok := wire.ParseInt([]byte(val))
			if !ok || n < 0 || n > 65535 {
				return true, "ERR value is not an integer or out of range", false
			}
			h.Port = int(n)
		case "ip-address":
			if len(val) >= 256 {
				return true, "ERR REPLCONF ip-address provided by replica instance is too long: " + strconv.Itoa(len(val)) + " bytes", false
			}
			if !validIP(val) {
				// It is shown in INFO's "slaveN:ip=...,port=..." lines.
				return true, "ERR REPLCONF ip-address cannot contain spaces, newlines, ',', '=' or special characters", false
			}
			h.IP = val
		case "capa":
			switch wire.Word(val) {
			case "eof":
				h.CapaEOF = true
			case "psync2":
				h.CapaPSync2 = true
			case "replproxy":
				h.CapaReplproxy = true
			case "replproxy-source":
				h.CapaSource = true
			}
		case "ack":
			// No reply, ever; from a client that is not a replica, ignored
			// (a replica's are read by its own loop: replconfAck).
			return false, "", false
		case "getack":
			return false, "", false // we are no replica of our replicas
		case "rdb-only":
			switch val {
			case "0", "1":
				h.RDBOnly = val == "1"
			default: // Redis's range check, and its replies
				if _, ok := wire.ParseInt([]byte(val)); !ok {
					return true, "ERR value is not an integer or out of range", false
				}
				return true, "ERR value is out of range, value must between 0 and 1", false
			}
		case "rdb-filter-only":
			if reply := filterRefusal(val); reply != "" {
				return true, reply, false
			}
			h.Filtered, h.Filter = true, val
		case "link-compression":
			switch wire.Word(val) {
			case "zstd":
				if !pol.Allow {
					return true, LinkCompressionRefused, false
				}
				compression = "zstd"
			case "no":
				compression = ""
			default:
				return true, "ERR Unsupported link-compression: " + clip(val, 64), false
			}
		case "version":
		default:
			return true, "ERR Unrecognized REPLCONF option: " + wire.CString(string(args[i])), false
		}
	}
	switch {
	case compression == h.Compression:
	case compression == "":
		h.EndCompression(pol.Slots)
	case pol.Slots != nil && !pol.Slots.take(pol.MaxLinks):
		return true, LinkCompressionCapped(pol.MaxLinks), true
	default:
		h.Compression = compression
	}
	return true, "", false
}

// filterRefusal returns Redis's refusal of an rdb-filter-only value, or ""
// when it takes it: the value split as sdssplitargs splits it (quotes, and
// a C string's end at a NUL byte), each word a filter, and only
// "functions" is one.
func filterRefusal(val string) string {
	words, ok := wire.SplitArgs([]byte(val))
	if !ok {
		return "ERR Missing rdb-filter-only values"
	}
	for _, f := range words {
		if !wire.EqualFold(f, "functions") {
			return "ERR Unsupported rdb-filter-only option: " + wire.CString(string(f))
		}
	}
	return ""
}

// clip shortens s for an error reply, as the proxy's replies clip what a
// client sent.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// replconfAck returns the offset of a REPLCONF ACK among args (REPLCONF and
// its option pairs), read as Replconf reads options: in order, up to the
// first that ends the command (ACK, GETACK, or one refused), so that an ACK
// counts here exactly when Replconf, reading the same options, reaches it.
func replconfAck(args [][]byte) (off int64, ok bool) {
	if len(args)%2 == 0 {
		return 0, false
	}
	for i := 1; i < len(args); i += 2 {
		val := string(args[i+1])
		switch wire.Word(string(args[i])) {
		case "ack":
			return replid.ParseOffset(val)
		case "listening-port":
			if n, ok := wire.ParseInt([]byte(val)); !ok || n < 0 || n > 65535 {
				return 0, false
			}
		case "ip-address":
			if len(val) >= 256 || !validIP(val) {
				return 0, false
			}
		case "rdb-only":
			if val != "0" && val != "1" {
				return 0, false
			}
		case "rdb-filter-only":
			if filterRefusal(val) != "" {
				return 0, false
			}
		case "link-compression":
			// Either value read as Replconf reads it; whether zstd was
			// allowed is not known here, and an ACK after it is none anyway
			// (a replica negotiates before PSYNC, never beside an ACK).
			if v := wire.Word(val); v != "zstd" && v != "no" {
				return 0, false
			}
		case "capa", "version":
		default: // getack, unknown options
			return 0, false
		}
	}
	return 0, false
}

// validIP reports whether a REPLCONF ip-address may be shown in INFO's
// "slaveN:ip=...,port=..." lines: only '!' to '~' (the characters a client
// name may have, so nothing that breaks an INFO or CLIENT LIST line), and
// no ',' or '='.
func validIP(ip string) bool {
	for i := 0; i < len(ip); i++ {
		if ip[i] < '!' || ip[i] > '~' || ip[i] == ',' || ip[i] == '=' {
			return false
		}
	}
	return true
}
