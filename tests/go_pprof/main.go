// Writes profiles with Go's own runtime/pprof, for the test that pprt top,
// collapse and flame read other writers' profiles: a CPU profile of
// goBurnHot and a heap profile of the allocations of goAllocSite.
//
// Usage: gopprof DIR   (writes DIR/go-cpu.pprof and DIR/go-heap.pprof)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

var sink uint64
var kept [][]byte

// processCPU is the CPU time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// goBurnHot spins until the process has used d more CPU time: measured, not
// wall time, so that a busy machine still gives the profile d of samples.
//
//go:noinline
func goBurnHot(d time.Duration) {
	end := processCPU() + d
	x := uint64(1)
	for processCPU() < end {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

//go:noinline
func goAllocSite(n int) {
	for i := 0; i < n; i++ {
		kept = append(kept, make([]byte, 64<<10))
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gopprof DIR")
		os.Exit(2)
	}
	runtime.MemProfileRate = 4096
	dir := os.Args[1]
	cpu, err := os.Create(filepath.Join(dir, "go-cpu.pprof"))
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		panic(err)
	}
	goBurnHot(700 * time.Millisecond)
	pprof.StopCPUProfile()
	cpu.Close()

	goAllocSite(64)
	runtime.GC()
	heap, err := os.Create(filepath.Join(dir, "go-heap.pprof"))
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("heap").WriteTo(heap, 0); err != nil {
		panic(err)
	}
	heap.Close()
	fmt.Println(len(kept))
}
