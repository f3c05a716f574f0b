package main

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestSendFloor(t *testing.T) {
	cpu, err := sendFloor(context.Background(), 3, 4<<20+5)
	if err != nil {
		t.Fatal(err)
	}
	if cpu <= 0 {
		t.Errorf("send floor CPU %v, want > 0", cpu)
	}
}

// TestDiskFloor: both of the log's floors measure a dd and a CRC-32C and
// leave nothing in the dir; a file already where the floor's dd writes
// fails it, since the empty-log floor's dd must write a new file.
func TestDiskFloor(t *testing.T) {
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("no dd")
	}
	dir := t.TempDir()
	for _, overwrite := range []bool{false, true} {
		f, err := diskFloor(context.Background(), dir, 8<<20, overwrite)
		if err != nil {
			t.Fatal(err)
		}
		if f.dd <= 0 || f.crc < 0 {
			t.Errorf("overwrite %v: dd CPU %v, CRC CPU %v", overwrite, f.dd, f.crc)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("overwrite %v: the floor left %v", overwrite, left)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "dd-floor"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := diskFloor(context.Background(), dir, 1<<20, false); err == nil {
		t.Error("a file where the dd writes: no error")
	}
}

// TestCRCFloor: the CRC floor passes over its buffer as many times as the
// size takes, the last pass partly, and checksums exactly size bytes.
func TestCRCFloor(t *testing.T) {
	const bufBytes, size = 1 << 20, 3<<20 + 5
	buf := crcPattern(bufBytes)
	if bytes.Count(buf, []byte{0}) > bufBytes/128 {
		t.Fatal("the CRC buffer is mostly zeros")
	}
	want := crc32.Checksum(bytes.Join([][]byte{buf, buf, buf, buf[:5]}, nil), castagnoli)
	cpu, err := crcCPU(size, bufBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := crcSink.Load(); got != want {
		t.Errorf("CRC-32C %#x, want %#x", got, want)
	}
	if cpu < 0 {
		t.Errorf("CRC CPU %v", cpu)
	}
}
