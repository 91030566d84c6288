package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// Usage is a process's resource use so far.
type Usage struct {
	CPU     time.Duration // user + system
	PeakRSS int64         // bytes, VmHWM
}

// ReadUsage reads utime+stime from /proc/PID/stat and VmHWM from
// /proc/PID/status.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, errors.New("bench: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("bench: /proc stat: %w", err)
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("bench: VmHWM: %w", err)
			}
			u.PeakRSS = kb << 10
		}
	}
	return u, nil
}

// ReadThreadsCPU is the CPU time the live threads of process pid have run,
// the sum of /proc/PID/task/*/schedstat's first field (nanoseconds). It is
// finer than /proc/PID/stat's 10 ms ticks, which short runs need; the time
// of threads that exited is missing from it (the Go runtime keeps its
// threads), so take differences over a window, not totals.
func ReadThreadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	read := 0
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited since ReadDir
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: schedstat: %w", err)
		}
		sum += time.Duration(ns)
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("bench: no schedstat under %s", dir)
	}
	return sum, nil
}

// CPUTimes are the machine's CPU times from the first line of /proc/stat,
// in USER_HZ ticks: idle (idle and iowait: nothing ran) and the total.
type CPUTimes struct {
	Idle, Total uint64
}

// ReadCPUTimes reads the "cpu" line of /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	return parseCPUTimes(string(line))
}

// parseCPUTimes reads "cpu user nice system idle iowait irq softirq steal
// guest guest_nice". Guest time is already counted in user and nice.
func parseCPUTimes(line string) (CPUTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}, errors.New("bench: malformed /proc/stat")
	}
	var t CPUTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("bench: /proc/stat: %w", err)
		}
		t.Total += v
		if i == 3 || i == 4 { // idle, iowait
			t.Idle += v
		}
	}
	return t, nil
}

// IdlePercent is the share of the machine's CPU time between t0 and t1
// during which nothing ran, 0 to 100; -1 when no time passed.
func IdlePercent(t0, t1 CPUTimes) float64 {
	total := float64(t1.Total) - float64(t0.Total)
	if total <= 0 {
		return -1
	}
	return min(100, max(0, 100*(float64(t1.Idle)-float64(t0.Idle))/total))
}
