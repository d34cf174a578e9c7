"""Child names and labels: AIPerf 0.13.0's `sweep_controller/_naming.py`.

A child AIPerfJob is named `<sweep>-v<NN>[-t<N>]`; the trial suffix is there only when more
than one trial runs or convergence is set. The names must fit the AIPerfJob's 35-character job
id, so the operator bounds a sweep at 200 variations and 10 trials.
"""

from __future__ import annotations

import re

from webhook.workloads import aiperf

MAX_SWEEP_VARIATIONS = 200  # sweep_controller/_naming.py
MAX_SWEEP_TRIALS = 10
MAX_CHILD_JOB_ID = aiperf.MAX_JOB_ID  # 35


def needs_trial_suffix(trials: int | None, has_convergence: bool) -> bool:
    return has_convergence or (trials or 1) > 1


def child_name_suffix_length(n_variations: int, max_total_runs: int, *, has_convergence: bool) -> int:
    var_digits = max(2, len(str(max(n_variations - 1, 0))))
    trials = max_total_runs // n_variations if n_variations else 1
    return 2 + var_digits + (3 if needs_trial_suffix(trials, has_convergence) else 0)


def child_name(sweep: str, variation: int, trial: int | None) -> str:
    suffix = f"-t{trial:01d}" if trial is not None else ""
    return f"{sweep}-v{variation:02d}{suffix}"


_INVALID = re.compile(r"[^a-z0-9._-]+")
_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def sanitize_for_label(value: str) -> str:
    """AIPerf's label value: lowercase, runs of other characters as '-', trimmed to [a-z0-9] at both
    ends, at most 63 characters. AIPerf writes it as

        s = re.sub(r"[^a-z0-9._-]+", "-", value.lower())
        s = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", s)[:63]
        return re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", s) or "v"

    which is quadratic on a run of separators (the trim retries `[^a-z0-9]+$` from each) and pays a
    match per run of a 1 MB value (0.6 s; bench/fuzz_parsers.py). The same result, linear and in C:
    start at the first [a-z0-9]; read a 4 KB window when it is enough; replace only the first 64 runs (each adds one character and runs
    are separated by at least one kept one, so the first 63 characters are final after 64); cut to
    63 and trim. tests/oracle/test_sweep_oracle.py compares it with AIPerf's own function."""
    low = value.lower()
    # the first [a-z0-9]: one str.find per character (memchr), faster than a regex scan of a long run
    first = min((i for i in map(low.find, _ALNUM) if i >= 0), default=-1)
    if first < 0:
        return "v"
    # a window of the value is enough when it yields 64 characters: a run cut at its end changes only
    # its last character (a 1 MB value of allowed characters is not scanned to the end)
    s = _INVALID.sub("-", low[first : first + 4096], count=64)
    if len(s) < 64 and len(low) > first + 4096:
        s = _INVALID.sub("-", low[first:], count=64)
    return s[:63].strip("._-") or "v"
