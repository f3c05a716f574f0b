package main

import (
	"context"
	"os/exec"
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

func TestDiskFloor(t *testing.T) {
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("no dd")
	}
	dir := t.TempDir()
	b, d, err := diskFloor(context.Background(), dir, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b < 0 || d < 0 {
		t.Errorf("disk floor CPU %v, %v", b, d)
	}
}
