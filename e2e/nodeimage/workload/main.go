// The fidelity matrix's workload (e2e/stack.sh workload): one static binary, FROM scratch,
// linked under the names the Trainer runtimes' commands use (sh, bash, python, python3,
// torchrun, tune, mpirun, sshd, ...), so any runtime's container starts it whatever its command.
// It prints what it was started as, sleeps WORKLOAD_SLEEP_SECONDS (default 1) and exits with
// WORKLOAD_EXIT_CODE (default 0). Env vars it is told to require (WORKLOAD_REQUIRE_ENV, comma
// separated) must be set, else it exits 3: a Secret's value reached the container or not.
//
// Linked as getent, it is the one applet the node's DNS tests need (e2e/test_dns_live.py):
// `getent hosts NAME...` resolves each NAME with Go's own resolver (net.LookupHost: the pod's
// /etc/resolv.conf, its search list and ndots, as glibc's getent would) and prints
// "ADDRESS NAME" per address; exit 2 when a NAME does not resolve (getent's "not found").
package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func getent(args []string) int {
	if len(args) < 2 || args[0] != "hosts" {
		fmt.Fprintln(os.Stderr, "usage: getent hosts NAME...")
		return 1
	}
	code := 0
	for _, name := range args[1:] {
		addrs, err := net.LookupHost(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 2
			continue
		}
		for _, a := range addrs {
			fmt.Printf("%s %s\n", a, name)
		}
	}
	return code
}

func main() {
	if filepath.Base(os.Args[0]) == "getent" {
		os.Exit(getent(os.Args[1:]))
	}
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
