package cluster

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/replproxy/replproxy/bench/internal/procstat"
)

// pollInterval is how often the Wait functions ask again.
const pollInterval = 5 * time.Millisecond

// ParseInfo parses the text of an INFO reply into its fields. Section
// headers ("# Replication") and blank lines are skipped.
func ParseInfo(text string) map[string]string {
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// Info returns the fields of one INFO section.
func (p *Process) Info(ctx context.Context, section string) (map[string]string, error) {
	text, err := p.client.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: INFO %s: %w", p.Name, section, err)
	}
	return ParseInfo(text), nil
}

// InfoInt returns one integer field of an INFO section.
func (p *Process) InfoInt(ctx context.Context, section, field string) (int64, error) {
	f, err := p.Info(ctx, section)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(f[field], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: INFO %s %s = %q", p.Name, section, field, f[field])
	}
	return v, nil
}

// Offset is master_repl_offset from INFO replication.
func (p *Process) Offset(ctx context.Context) (int64, error) {
	return p.InfoInt(ctx, "replication", "master_repl_offset")
}

// digestTimeout bounds DEBUG DIGEST, which hashes the whole dataset: many
// seconds for a GB of it on a loaded machine, past the client's timeout.
const digestTimeout = 5 * time.Minute

// Digest is DEBUG DIGEST: a hash of the whole dataset.
func (p *Process) Digest(ctx context.Context) (string, error) {
	d, err := p.client.WithTimeout(digestTimeout).Do(ctx, "DEBUG", "DIGEST").Text()
	if err != nil {
		return "", fmt.Errorf("cluster: %s: DEBUG DIGEST: %w", p.Name, err)
	}
	return d, nil
}

// ReplicaOf sends REPLICAOF <upstream's Host> <upstream's ReplPort>.
func (p *Process) ReplicaOf(ctx context.Context, upstream *Process) error {
	return p.client.SlaveOf(ctx, upstream.Host(), strconv.Itoa(upstream.ReplPort())).Err()
}

// CPU reads the process's CPU time from /proc.
func (p *Process) CPU() (procstat.CPU, error) {
	if p.cmd == nil {
		return procstat.CPU{}, fmt.Errorf("cluster: %s is not running", p.Name)
	}
	return procstat.ReadCPU(p.PID())
}

// HWM is the process's peak resident set size in bytes (VmHWM).
func (p *Process) HWM() (int64, error) {
	if p.cmd == nil {
		return 0, fmt.Errorf("cluster: %s is not running", p.Name)
	}
	return procstat.ReadHWM(p.PID())
}

// Switches is the context switches of all the process's threads.
func (p *Process) Switches() (procstat.Switches, error) {
	if p.cmd == nil {
		return procstat.Switches{}, fmt.Errorf("cluster: %s is not running", p.Name)
	}
	return procstat.ReadSwitches(p.PID())
}

// IO is the process's count of read and write system calls.
func (p *Process) IO() (procstat.IO, error) {
	if p.cmd == nil {
		return procstat.IO{}, fmt.Errorf("cluster: %s is not running", p.Name)
	}
	return procstat.ReadIO(p.PID())
}

// WaitLinkUp waits until every replica reports master_link_status:up.
func WaitLinkUp(ctx context.Context, timeout time.Duration, replicas ...*Process) error {
	return poll(ctx, timeout, func() (bool, error) {
		for _, r := range replicas {
			f, err := r.Info(ctx, "replication")
			if err != nil {
				return false, err
			}
			if f["master_link_status"] != "up" {
				return false, nil
			}
		}
		return true, nil
	})
}

// WaitOffsets waits until every replica's master_repl_offset equals the
// primary's, read again on each round (the primary's pings move it), and
// returns that offset.
func WaitOffsets(ctx context.Context, timeout time.Duration, primary *Process, replicas ...*Process) (int64, error) {
	var target int64
	err := poll(ctx, timeout, func() (bool, error) {
		var err error
		if target, err = primary.Offset(ctx); err != nil {
			return false, err
		}
		for _, r := range replicas {
			off, err := r.Offset(ctx)
			if err != nil {
				return false, err
			}
			if off != target {
				return false, nil
			}
		}
		return true, nil
	})
	return target, err
}

// WaitReached waits until every replica's link is up and its
// master_repl_offset is at least min.
func WaitReached(ctx context.Context, timeout time.Duration, minOffset int64, replicas ...*Process) error {
	return poll(ctx, timeout, func() (bool, error) {
		for _, r := range replicas {
			f, err := r.Info(ctx, "replication")
			if err != nil {
				return false, err
			}
			off, _ := strconv.ParseInt(f["master_repl_offset"], 10, 64)
			if f["master_link_status"] != "up" || off < minOffset {
				return false, nil
			}
		}
		return true, nil
	})
}

// WaitInfo waits until done holds for the fields of p's INFO section.
func WaitInfo(ctx context.Context, timeout time.Duration, p *Process, section string, done func(fields map[string]string) bool) error {
	return poll(ctx, timeout, func() (bool, error) {
		f, err := p.Info(ctx, section)
		if err != nil {
			return false, err
		}
		return done(f), nil
	})
}

// poll calls done every pollInterval until it returns true or an error, the
// timeout passes or ctx is cancelled.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: condition not met within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}
