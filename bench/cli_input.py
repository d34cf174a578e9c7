"""How long does `preflight-webhook check` take on a large manifest file, and how much memory?

    .venv/bin/python bench/cli_input.py [--labels 2400000] [--code DIR] [--timeout 600] [--write | --quick]

Generates each input in a temporary directory and runs `python -m webhook check --offline -f FILE`
on it in a subprocess (the code under DIR, default this checkout), once: its exit code, the first
line of its stderr, the wall time and the peak RSS (the child's ru_maxrss). The inputs:

- labels: issue 33's reproduction, one AIPerfJob with `--labels` labels (2.4M make 55 MB);
  the apiserver reads at most 3 MiB of a request, so it is refused;
- labels-within: the same with 60,000 labels (1.3 MiB as JSON, under etcd's 1.5 MiB): read whole and judged;
- many-documents: 1,000 copies of the sample AIPerfJob in one file, judged one by one.

`--write` puts the table and the command into docs/benchmarks/cli-input.md between
`<!-- bench:cli-input -->` markers; `--quick` runs toy sizes and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import write_section  # noqa: E402

SECTION = "cli-input"
SAMPLE = ROOT / "tests" / "oracle" / "samples" / "aiperfjob.yaml"


def labels_yaml(path: Path, n: int) -> None:
    """The sample AIPerfJob with `n` labels, the shape of the issue's 50 MB file."""
    head, _, rest = SAMPLE.read_text().partition("metadata:\n")
    with path.open("w") as f:
        f.write(head + "metadata:\n  labels:\n")
        for start in range(0, n, 100_000):
            f.write("".join(f"    k{i:07d}: v{i:07d}\n" for i in range(start, min(n, start + 100_000))))
        f.write(rest)


def many_documents(path: Path, n: int) -> None:
    sample = SAMPLE.read_text()
    path.write_text("".join(f"---\n{sample}" for _ in range(n)))


def run(code: Path, path: Path, timeout: float) -> dict[str, str]:
    """One `check --offline -f path` in a subprocess: exit code, first stderr line, wall time, peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(code))
    argv = [sys.executable, "-m", "webhook", "check", "--offline", "-f", str(path), "-o", "json"]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        first = err.read().decode("utf-8", "replace").splitlines()[:1]
    killed = proc.returncode < 0
    message = first[0].replace(str(path), path.name) if first else ""
    return {
        "exit": f"killed after {timeout:.0f} s" if killed else str(proc.returncode),
        "wall": f"{wall:.1f} s",
        "rss": f"{usage.ru_maxrss / 1024:.0f} MiB",
        "said": (message[:150] + "…") if len(message) > 150 else message,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--labels", type=int, default=2_400_000, help="labels of the reproduction's AIPerfJob (2400000)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose CLI runs (default: this one)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a run is killed (600)")
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks/cli-input.md")
    ap.add_argument("--quick", action="store_true", help="toy sizes (a smoke test); writes nothing")
    args = ap.parse_args()
    labels = 200_000 if args.quick else args.labels
    within = 6_000 if args.quick else 60_000
    copies = 20 if args.quick else 1_000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        p = Path(tmp) / "labels.yaml"
        labels_yaml(p, labels)
        inputs.append((f"labels ({labels:,})", p))
        p = Path(tmp) / "within.yaml"
        labels_yaml(p, within)
        inputs.append((f"labels-within ({within:,})", p))
        p = Path(tmp) / "many.yaml"
        many_documents(p, copies)
        inputs.append((f"many-documents ({copies:,})", p))
        for name, path in inputs:
            size = path.stat().st_size
            r = run(args.code.resolve(), path, args.timeout)
            rows.append(f"| {name} | {size / 2**20:.1f} MiB | {r['exit']} | {r['wall']} | {r['rss']} | {r['said']} |")
            print(rows[-1], flush=True)
    command = "python bench/cli_input.py" + "".join(f" {shlex.quote(a)}" for a in sys.argv[1:])
    rev = subprocess.run(["git", "-C", str(args.code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    code = rev.stdout.strip() if rev.returncode == 0 else str(args.code)
    load = os.getloadavg()[0]
    body = "\n".join(
        [
            "## `preflight-webhook check --offline -f FILE` on large files (`bench/cli_input.py`)",
            "",
            f"`{command}` ({date.today().isoformat()}, Python {platform.python_version()}, {os.cpu_count()} cores, "
            f"load average {load:.1f}; code: {code}). One run each; wall time includes the interpreter's start "
            "and the imports; RSS is the process's peak.",
            "",
            "| input | file | exit | wall | peak RSS | stderr, first line |",
            "|---|---:|---|---:|---:|---|",
            *rows,
        ]
    )
    if args.write and not args.quick:
        write_section(SECTION, body)
    else:
        print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
