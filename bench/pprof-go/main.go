// Encodes the same synthetic CPU profile as bench/profile.c with pprof's
// own Go package (github.com/google/pprof/profile), so bench/profile can
// print the two side by side. Prints "ns=<encode time> bytes=<size>".
//
// The samples come from the same generator as the C side (splitmix64 over
// the same seeds), and this program does the same work: dedups locations by
// address and samples by stack, then writes the gzip'd profile.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/google/pprof/profile"
)

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func main() {
	samples := flag.Int("samples", 100000, "samples")
	stacks := flag.Int("stacks", 10000, "distinct stacks")
	depth := flag.Int("depth", 32, "frames per stack")
	out := flag.String("o", "", "write the profile here too")
	flag.Parse()

	// The inputs, generated before the clock starts, as on the C side.
	pcs := make([][]uint64, *stacks)
	for s := range pcs {
		pcs[s] = make([]uint64, *depth)
		for j := range pcs[s] {
			pcs[s][j] = 0x400000 + (splitmix(uint64(s*(*depth)+j))%0x100000)&^3
		}
	}
	pick := make([]int, *samples)
	for i := range pick {
		pick[i] = int(splitmix(uint64(i)^0xabcdef) % uint64(*stacks))
	}

	start := time.Now()
	m := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/bench", BuildID: "0123456789abcdef"}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10000000,
		TimeNanos:  1700000000000000000,
		DurationNanos: 1000000000,
		Mapping:    []*profile.Mapping{m},
	}
	locs := map[uint64]*profile.Location{}
	bystack := map[string]*profile.Sample{}
	key := make([]byte, 0, 8*(*depth))
	for _, s := range pick {
		key = key[:0]
		for _, pc := range pcs[s] {
			key = append(key, byte(pc), byte(pc>>8), byte(pc>>16), byte(pc>>24))
		}
		if smp, ok := bystack[string(key)]; ok {
			smp.Value[0]++
			smp.Value[1] += 10000000
			continue
		}
		smp := &profile.Sample{Value: []int64{1, 10000000}}
		for j, pc := range pcs[s] {
			addr := pc
			if j > 0 {
				addr-- // return address - 1, as pprt stores non-leaf frames
			}
			l := locs[addr]
			if l == nil {
				l = &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Address: addr}
				locs[addr] = l
				p.Location = append(p.Location, l)
			}
			smp.Location = append(smp.Location, l)
		}
		bystack[string(key)] = smp
		p.Sample = append(p.Sample, smp)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	elapsed := time.Since(start)
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Printf("ns=%d bytes=%d\n", elapsed.Nanoseconds(), buf.Len())
}
