"""Name Length: the Job and pod names JobSet derives must be DNS-1035 labels (≤ 63 characters).

JobSet names each Job `<jobset>-<replicatedJob>-<jobIdx>` and each pod
`<jobset>-<replicatedJob>-<jobIdx>-<podIdx>-xxxxx` (5 random characters). Its webhook
rejects the JobSet when the longest of those names is not a DNS-1035 label, which for a
TrainJob or AIPerfJob happens after admission, inside the controller, where the user only
sees a job that never starts. We compute the same longest names up front and say how long
metadata.name may be.
"""

from __future__ import annotations

from webhook.checks.base import Check, CheckContext
from webhook.models.jobset_names import MAX_LABEL, jobset_name, longest_names, replicated_jobs
from webhook.results import CheckResult, Status

NAME = "Name Length"
_DNS1035_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-"


def _format_problem(name: str) -> str | None:
    if not name or name[0] not in "abcdefghijklmnopqrstuvwxyz":
        return "must start with a lowercase letter"
    # ^[a-z]([-a-z0-9]*[a-z0-9])?$ as "nothing left after stripping the allowed characters" and a last
    # character (C speed, ~1 ms per MB): the regex backtracked over long names
    if name.strip(_DNS1035_CHARS) or name[-1] == "-":
        return "may contain only lowercase letters, digits and '-', and must end with a letter or digit"
    return None


class NameLength(Check):
    name = NAME
    synchronous = True  # reads only the Workload and cached state
    summary = (
        "The Job and pod names JobSet derives (<jobset>-<replicatedJob>-<jobIdx>-<podIdx>-xxxxx) fit 63 characters."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        wl = ctx.workload
        js = jobset_name(wl)
        names = longest_names(js, replicated_jobs(wl))
        if not names:
            return CheckResult(self.name, Status.SKIP, "Skipped: the job derives no Jobs")
        longest = max(names, key=lambda n: (len(n.name), n.what == "pod"))
        extra = len(js) - len(wl.name) if wl.name and wl.name in js else 0
        allowed = MAX_LABEL - max(n.fixed for n in names) - extra

        problems = []
        for n in names:
            bad = _format_problem(n.name)
            if bad:
                problems.append((n, bad))
        if problems:
            n, bad = problems[0]
            return CheckResult(
                self.name,
                Status.FAIL,
                f'{n.what} name "{n.name}" that JobSet derives from metadata.name "{wl.name}" is not a valid '
                f"DNS-1035 label: it {bad}, so JobSet rejects the job. "
                "Fix: use a metadata.name of lowercase letters, digits and '-' that starts with a letter",
            )
        if len(longest.name) > MAX_LABEL:
            over = [n for n in names if len(n.name) > MAX_LABEL]
            rjs = list(dict.fromkeys(n.replicated_job for n in over))
            groups = ("replicatedJob " if len(rjs) == 1 else "replicatedJobs ") + ", ".join(f'"{r}"' for r in rjs)
            fix = (
                f"use a metadata.name of at most {allowed} characters"
                if allowed > 0
                else "shorten the replicatedJob names of the runtime"
            )
            return CheckResult(
                self.name,
                Status.FAIL,
                f'metadata.name "{wl.name}" ({len(wl.name)} characters) is too long: JobSet would name '
                f'{longest.what}s of {groups} like "{longest.name}" ({len(longest.name)} characters, '
                f"over the {MAX_LABEL} allowed) and rejects the job. Fix: {fix}",
                details=[f"{n.what} {n.name} ({len(n.name)} characters)" for n in over],
            )
        return CheckResult(
            self.name,
            Status.PASS,
            f'Longest derived name is {len(longest.name)} of {MAX_LABEL} characters ("{longest.name}"); '
            f"metadata.name may be up to {allowed} characters",
        )


CHECKS = [NameLength()]
