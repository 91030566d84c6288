package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memFiles keeps the in-memory files open for the life of the process: each
// connection pgx opens reads them again by their /proc path.
var memFiles []*os.File

// memFile holds data in a file that exists in memory only (a decrypted key
// never reaches a disk) and returns the path by which pgx reads it.
func memFile(name string, data []byte) (string, error) {
	fd, err := unix.MemfdCreate("pgoutbox-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("hold the %s in memory: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("hold the %s in memory: %w", name, err)
	}
	memFiles = append(memFiles, f)
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}
