package kafkatest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgoutbox/pgoutbox/proc"
)

// disk is a small disk for one broker's data: a tmpfs of a fixed size,
// mounted in a mount namespace of its own that a holder process keeps.
// The broker runs in that namespace (nsenter); nothing else on the machine
// sees the mount, and it goes, with what it holds, when the holder and the
// broker are gone. Filling it fills no disk of the machine, and frees
// what it took as soon as its file is removed.
type disk struct {
	holder *proc.Process
	dir    string
}

// newDisk mounts a tmpfs of size bytes on dir in a new mount namespace.
func newDisk(dir string, size int64) (*disk, error) {
	p, err := proc.Start("kafka-disk", "unshare", []string{"--mount", "--propagation", "private", "--",
		"sh", "-c", `mount -t tmpfs -o size="$1" pgoutbox-kafka "$2" && echo mounted && exec sleep infinity`,
		"kafka-disk", strconv.FormatInt(size, 10), dir}, nil, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Output(), "mounted") {
		select {
		case <-p.Exited():
			return nil, fmt.Errorf("mounting a tmpfs for the broker's data in a mount namespace of its own: %v", p.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("mounting a tmpfs for the broker's data: not mounted within 10s: %s", p.Output())
		}
	}
	return &disk{holder: p, dir: dir}, nil
}

// path is name inside the disk, as this process reaches it: through the
// holder's root, in its mount namespace.
func (d *disk) path(name string) string {
	return filepath.Join("/proc", strconv.Itoa(d.holder.PID()), "root", d.dir, name)
}

// fillName is the file fill writes.
const fillName = "disk-full"

// fill writes to the disk until it has no byte left.
func (d *disk) fill() error {
	f, err := os.OpenFile(d.path(fillName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("filling the broker's disk: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("filling the broker's disk: %w", err)
			}
			buf = buf[:len(buf)/2] // the last pages
		}
	}
	return nil
}

// free removes what fill wrote.
func (d *disk) free() error {
	if err := os.Remove(d.path(fillName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("freeing the broker's disk: %w", err)
	}
	return nil
}

// close ends the namespace, and the tmpfs with it once the broker is gone.
func (d *disk) close() { d.holder.Kill() }
