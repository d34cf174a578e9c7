// The fidelity matrix's workload (e2e/stack.sh workload): one static binary, FROM scratch,
// linked under the names the Trainer runtimes' commands use (sh, bash, python, python3,
// torchrun, tune, mpirun, sshd, ...), so any runtime's container starts it whatever its command.
// It prints what it was started as, sleeps WORKLOAD_SLEEP_SECONDS (default 1) and exits with
// WORKLOAD_EXIT_CODE (default 0). Env vars it is told to require (WORKLOAD_REQUIRE_ENV, comma
// separated) must be set, else it exits 3: a Secret's value reached the container or not.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	host, _ := os.Hostname()
	fmt.Printf("workload %s on %s: %s\n", filepath.Base(os.Args[0]), host, strings.Join(os.Args[1:], " "))
	for _, name := range strings.Split(os.Getenv("WORKLOAD_REQUIRE_ENV"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			if _, ok := os.LookupEnv(name); !ok {
				fmt.Printf("required env %s is not set\n", name)
				os.Exit(3)
			}
		}
	}
	sleep := 1.0
	if v, err := strconv.ParseFloat(os.Getenv("WORKLOAD_SLEEP_SECONDS"), 64); err == nil {
		sleep = v
	}
	time.Sleep(time.Duration(sleep * float64(time.Second)))
	code, _ := strconv.Atoi(os.Getenv("WORKLOAD_EXIT_CODE"))
	os.Exit(code)
}
