// A Go worker for tests/perf_data.rs: goroutines hashing and sorting in a
// loop until killed, so that `--call-graph dwarf` samples land in Go code
// under runtime.goexit (goroutines), runtime.main and the scheduler.
package main

import (
	"crypto/sha256"
	"os"
	"sort"
	"strconv"
)

var sink int

//go:noinline
func hashStage(round int) int {
	h := sha256.New()
	for i := 0; i < 2000; i++ {
		h.Write([]byte(strconv.Itoa(round + i)))
	}
	return int(h.Sum(nil)[0])
}

//go:noinline
func sortStage(round int) int {
	v := make([]int, 20000)
	for i := range v {
		v[i] = (i*7919 + round) % 10007
	}
	sort.Ints(v)
	return v[len(v)/2]
}

func worker(id int, out chan<- int) {
	for round := 0; ; round++ {
		out <- hashStage(round+id) + sortStage(round)
	}
}

func main() {
	n := 2
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	out := make(chan int)
	for i := 0; i < n; i++ {
		go worker(i, out)
	}
	for v := range out {
		sink += v
	}
}
