package streamlog

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// countingWriter counts the writes and ReadFroms a reader makes of it.
type countingWriter struct {
	buf       bytes.Buffer
	writes    int
	readFroms int
}

func (c *countingWriter) Write(p []byte) (int, error) { c.writes++; return c.buf.Write(p) }

func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	c.readFroms++
	return c.buf.ReadFrom(r)
}

// countingOnlyWriter hides countingWriter's ReadFrom: the buffer path.
type countingOnlyWriter struct{ c *countingWriter }

func (o countingOnlyWriter) Write(p []byte) (int, error) { return o.c.Write(p) }

// TestReaderSendsManyRecordsPerCall: one WriteTo sends as many verified
// records as max allows, on both paths; on the sendfile path the records of
// one segment go in one ReadFrom. Each 16 KiB append is its own record, so
// one record per call would take 64 calls per MiB.
func TestReaderSendsManyRecordsPerCall(t *testing.T) {
	l, _ := openDir(t, t.TempDir(), Options{MaxBytes: 1 << 30, SegmentBytes: 4 << 20})
	l.Reset(testID, 0)
	data := stream(8<<20, 3)
	for p := data; len(p) > 0; p = p[RecordMax:] {
		if err := l.Append(p[:RecordMax], true); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		viaFile  bool
		maxCalls int // WriteTo calls for 8 MiB in 1 MiB calls
	}{
		{"sendfile", true, 8 + 2}, // a segment's end may split a call
		{"buffer", false, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.NewReader(1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var cw countingWriter
			var w io.Writer = &cw
			if !tc.viaFile {
				w = countingOnlyWriter{&cw}
			}
			calls := 0
			for {
				n, err := r.WriteTo(w, 1<<20)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if n > 1<<20 {
					t.Fatalf("WriteTo sent %d bytes, over its max", n)
				}
				calls++
			}
			if !bytes.Equal(cw.buf.Bytes(), data) {
				t.Fatal("bytes differ from what was appended")
			}
			if calls > tc.maxCalls {
				t.Fatalf("%d WriteTo calls for 8 MiB, want at most %d", calls, tc.maxCalls)
			}
			perMiB := float64(cw.writes+cw.readFroms) / 8
			t.Logf("%d WriteTo calls, %.1f writes or sendfiles per MiB", calls, perMiB)
			if tc.viaFile && perMiB > 2 {
				t.Fatalf("%.1f sendfiles per MiB, want one run per segment and call", perMiB)
			}
		})
	}
}

// TestReaderStopsBeforeLaterCorruption: a record that went bad after the
// first of a call ends the call before it (its bytes unsent, no error), and
// the next call, whose first record it is, reports it, on both paths.
func TestReaderStopsBeforeLaterCorruption(t *testing.T) {
	for _, viaFile := range []bool{true, false} {
		dir := t.TempDir()
		l, _ := openDir(t, dir, Options{MaxBytes: 1 << 30})
		l.Reset(testID, 0)
		data := stream(4*RecordMax, 11)
		for p := data; len(p) > 0; p = p[RecordMax:] {
			l.Append(p[:RecordMax], true)
		}
		flip(t, segFiles(t, dir, segExt)[0], 2*RecordMax+5) // the third record
		r, _ := l.NewReader(1)
		var cw countingWriter
		var w io.Writer = &cw
		if !viaFile {
			w = countingOnlyWriter{&cw}
		}
		var sent int64
		var err error
		for err == nil && sent < 2*RecordMax {
			var n int64
			n, err = r.WriteTo(w, 1<<20)
			sent += n
		}
		if err != nil || sent != 2*RecordMax || !bytes.Equal(cw.buf.Bytes(), data[:2*RecordMax]) {
			t.Fatalf("viaFile %v: sent %d (%v), want the two good records and no error", viaFile, sent, err)
		}
		if n, err := r.WriteTo(w, 1<<20); n != 0 || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("viaFile %v: next call = %d, %v, want ErrCorrupt and nothing sent", viaFile, n, err)
		}
		if cw.buf.Len() != 2*RecordMax {
			t.Fatalf("viaFile %v: %d bytes sent, corrupt ones among them", viaFile, cw.buf.Len())
		}
		r.Close()
	}
}

// discardCounter discards what it is sent and counts its ReadFroms.
type discardCounter struct{ readFroms int }

func (d *discardCounter) Write(p []byte) (int, error) { return len(p), nil }

func (d *discardCounter) ReadFrom(r io.Reader) (int64, error) {
	d.readFroms++
	return io.Copy(io.Discard, r)
}

// BenchmarkReaderWriteToCalls reads 16 MiB from the log in 1 MiB calls by
// sendfile and reports the calls and sendfiles per MiB.
func BenchmarkReaderWriteToCalls(b *testing.B) {
	l, _ := openDir(b, b.TempDir(), Options{MaxBytes: 1 << 30})
	l.Reset(testID, 0)
	block := stream(16<<10, 1)
	for range 1024 {
		l.Append(block, true)
	}
	b.SetBytes(16 << 20)
	b.ReportAllocs()
	var calls, runs int
	for b.Loop() {
		r, _ := l.NewReader(1)
		var dw discardCounter
		for {
			if _, err := r.WriteTo(&dw, 1<<20); err != nil {
				if err == io.EOF {
					break
				}
				b.Fatal(err)
			}
			calls++
		}
		runs += dw.readFroms
		r.Close()
	}
	b.ReportMetric(float64(calls)/float64(b.N)/16, "calls/MiB")
	b.ReportMetric(float64(runs)/float64(b.N)/16, "sendfiles/MiB")
}
