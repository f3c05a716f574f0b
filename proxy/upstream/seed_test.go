package upstream

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/replid"
)

const (
	idA = "2ad9920273ddbd211fc1921dd45362878e00cbf8"
	idB = "df90deabacf695b5520c3fe928f4d1313a316ea5"
)

// infoOf is an INFO replication reply's body as Redis 7 writes it, with
// the fields a primary's history is read from.
func infoOf(replID, replID2 string, offset, second, first, histlen int64, active bool) string {
	a := "0"
	if active {
		a = "1"
	}
	return strings.Join([]string{
		"# Replication", "role:master", "connected_slaves:1",
		"slave0:ip=127.0.0.1,port=6380,state=online,offset=100,lag=0",
		"master_failover_state:no-failover",
		"master_replid:" + replID, "master_replid2:" + replID2,
		"master_repl_offset:" + strconv.FormatInt(offset, 10), "second_repl_offset:" + strconv.FormatInt(second, 10),
		"repl_backlog_active:" + a, "repl_backlog_size:1048576",
		"repl_backlog_first_byte_offset:" + strconv.FormatInt(first, 10), "repl_backlog_histlen:" + strconv.FormatInt(histlen, 10), "",
	}, "\r\n")
}

// TestPrimaryHistoryContinues: the primary's rule for PSYNC <replid>
// <offset> (Redis's primaryTryPartialResynchronization), read from its
// INFO: its replid, or its replid2 up to second_repl_offset, and an offset
// its backlog holds.
func TestPrimaryHistoryContinues(t *testing.T) {
	// The backlog holds offsets 1001..2000: a PSYNC continues at 1001..2001.
	ph, err := parsePrimaryHistory(infoOf(idA, idB, 2000, 1500, 1001, 1000, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		replID string
		next   int64
		want   string // the reason, "" when it continues
	}{
		{idA, 1001, ""},
		{idA, 2001, ""},
		{idA, 1000, "behind"},
		{idA, 2002, ""}, // past what the INFO showed: newer than it, judged by the PSYNC
		{idB, 1500, ""},
		{idB, 1501, "replid"},
		{"e44abd2af047d7ad667bd01d92b27a8203579517", 1500, "replid"},
	} {
		err := ph.continues(tc.replID, tc.next)
		var nc *replid.NotContinued
		got := ""
		if errors.As(err, &nc) {
			got = nc.Reason
		} else if err != nil {
			t.Errorf("continues(%s, %d): %v, not a replid.NotContinued", tc.replID, tc.next, err)
		}
		if got != tc.want {
			t.Errorf("continues(%s, %d) = %q (%v), want %q", tc.replID[:6], tc.next, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		replID string
		offset int64
		want   string
	}{
		{idA, 2000, ""},
		{idA, 2001, "ahead"}, // a position the primary has not reached
		{idB, 2500, ""},      // replid2's rule is continues'
	} {
		err := ph.reached(tc.replID, tc.offset)
		var nc *replid.NotContinued
		got := ""
		if errors.As(err, &nc) {
			got = nc.Reason
		}
		if got != tc.want {
			t.Errorf("reached(%s, %d) = %v, want %q", tc.replID[:6], tc.offset, err, tc.want)
		}
	}
	inactive, err := parsePrimaryHistory(infoOf(idA, idB, 2000, 1500, 1001, 1000, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := inactive.continues(idA, 1500); err == nil {
		t.Error("a primary with no backlog continues a PSYNC")
	}
}

// TestParsePrimaryHistoryBad: an INFO that lacks a field or has one out of
// range is an error, never a history to check against.
func TestParsePrimaryHistoryBad(t *testing.T) {
	good := infoOf(idA, idB, 2000, 1500, 1001, 1000, true)
	for _, bad := range []string{
		"",
		strings.Replace(good, "master_replid:"+idA, "master_replid:xyz", 1),
		strings.Replace(good, "repl_backlog_histlen:1000", "repl_backlog_histlen:-5", 1),
		strings.Replace(good, "second_repl_offset:1500", "second_repl_offset:99999999999999999999", 1),
		strings.Replace(good, "master_repl_offset:2000\r\n", "", 1),
	} {
		if ph, err := parsePrimaryHistory(bad); err == nil || !errors.Is(err, ErrBadReply) {
			t.Errorf("parsePrimaryHistory accepted %q: %+v, %v", bad, ph, err)
		}
	}
}

// FuzzParsePrimaryHistory: no INFO reply makes the parser panic, and what
// it accepts it can check a position against.
func FuzzParsePrimaryHistory(f *testing.F) {
	f.Add(infoOf(idA, idB, 2000, 1500, 1001, 1000, true))
	f.Add(infoOf(idA, "0000000000000000000000000000000000000000", 0, -1, 1, 0, true))
	f.Add("master_replid:x\nrepl_backlog_active:1")
	f.Fuzz(func(t *testing.T, info string) {
		ph, err := parsePrimaryHistory(info)
		if err != nil {
			return
		}
		_ = ph.continues(idA, ph.offset+1)
		_ = ph.continues(ph.replID2, ph.secondOffset)
	})
}
