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


def sanitize_for_label(value: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", value.lower())
    # AIPerf trims with re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", ""); s now holds only [a-z0-9._-], so that is
    # strip("._-"), which is linear: the regex retried `[^a-z0-9]+$` from every character of a long
    # run of separators (quadratic: bench/fuzz_parsers.py)
    s = s.strip("._-")[:63]
    return s.strip("._-") or "v"
