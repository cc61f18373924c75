package memlimit

import (
	"io/fs"
	"runtime"
	"testing"
)

func TestSystemMemory_TheSmallestOfTheMachineAndItsCgroups(t *testing.T) {
	const meminfo = "MemTotal:        3884084 kB\nMemFree:          123456 kB\n"
	const machine = 3884084 << 10
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"nothing readable", nil, 0, false},
		{"machine only", map[string]string{"/proc/meminfo": meminfo}, machine, true},
		{"v2 without a limit", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "0::/system.slice/tributary.service\n",
			"/sys/fs/cgroup/system.slice/tributary.service/memory.max": "max\n",
		}, machine, true},
		{"v2 limit on the service", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "0::/system.slice/tributary.service\n",
			"/sys/fs/cgroup/system.slice/tributary.service/memory.max": "536870912\n",
		}, 512 << 20, true},
		{"v2 limit on the parent slice", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "0::/system.slice/tributary.service\n",
			"/sys/fs/cgroup/system.slice/tributary.service/memory.max": "max\n",
			"/sys/fs/cgroup/system.slice/memory.max":                   "1073741824\n",
		}, 1 << 30, true},
		{"v2 in a container (own namespace)", map[string]string{
			"/proc/meminfo":             meminfo,
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20, true},
		{"v2 limit above the machine", map[string]string{
			"/proc/meminfo":             meminfo,
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "68719476736\n",
		}, machine, true},
		{"v1 memory controller", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "134217728\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n", // v1's "no limit"
		}, 128 << 20, true},
		{"garbage", map[string]string{
			"/proc/meminfo":             "MemTotal: lots kB\n",
			"/proc/self/cgroup":         "0::/\nnonsense\n",
			"/sys/fs/cgroup/memory.max": "-5\n",
		}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := tt.files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			got, ok := systemMemory(read)
			if got != tt.want || ok != tt.ok {
				t.Errorf("systemMemory = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestSystem_ReadsThisMachine: on Linux the machine's memory is readable.
func TestSystem_ReadsThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	n, ok := System()
	if !ok || n < 64<<20 {
		t.Fatalf("System() = %d, %v; want this machine's memory", n, ok)
	}
}
