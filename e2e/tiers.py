"""Where each end-to-end module runs: `make test` (the default) or `make conformance` (listed here).

`make test` is what CI runs on every stop (.ci/run) and must stay within its budget
(docs/development.md, "Test tiers"): lint, unit, the in-process server, the oracles, every
control-plane e2e, one real-node smoke (e2e/test_smoke_node.py) and the fidelity matrix with its
recorded outcomes (e2e/test_fidelity.py). `make conformance` runs the modules below: every node e2e
that needs a component `make test` does not build, or that lets a job run to its real outcome on
the node, and the fidelity matrix with every scenario run for real (rewriting the record).

e2e/conftest.py adds the ``conformance`` marker to every test of these modules, so
``pytest -m "not conformance"`` (make test) and ``pytest -m conformance`` (make conformance)
split the suite in two with nothing in between and nothing in both. docs/test-tiers.md lists every
test and its tier (``python -m e2e.tiers --write``), and the tests collected before the split,
each found in one of the two.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

#: module → why it runs in `make conformance` and not in `make test`
CONFORMANCE: dict[str, str] = {
    "e2e/test_fidelity_conformance.py": "every fidelity scenario run for real on the node (~20 min); rewrites "
    "e2e/fidelity/outcomes.json and docs/fidelity.md, which make test compares its verdicts with",
    "e2e/test_aiperf_stack.py": "the AIPerf operator (a venv on the node) running a real benchmark to Completed "
    "(~2 min); make test judges AIPerfJobs through the fidelity matrix and the smoke",
    "e2e/test_audit_quota_node.py": "the audit controller against the real quota controller on the shared node "
    "(~3 min); make test covers the audit logic on the control plane (test_audit_sweep_live.py)",
    "e2e/test_audit_stack.py": "the audit controller with the real Kueue, Trainer and JobSet controllers on the "
    "shared node",
    "e2e/test_dryrun_stack.py": "Dry Run behind the real Kueue/JobSet/Trainer webhooks on the shared node; make "
    "test reaches the same webhooks through the fidelity matrix's verdicts",
    "e2e/test_jobset_node.py": "JobSets run to their real outcome on the shared node",
    "e2e/test_kueue_visibility_node.py": "Kueue's visibility API on the shared node: a ClusterQueue held full by a "
    "running JobSet, the will-wait count and the audit controller's positions against it; make test judges Kueue "
    "jobs on the control plane (test_kueue_wait_live.py) and through the fidelity matrix",
    "e2e/test_dns_live.py": "CoreDNS deployed on the node (~2 min): a component make test does not start",
    "e2e/test_dra_node.py": "the real scheduler and kubelet allocate DRA devices (a job run to its outcome)",
    "e2e/test_imagepull_node.py": "containerd pulls from the registry (a pod run to its outcome); make test "
    "judges the same images in the fidelity matrix",
    "e2e/test_node.py": "the node harness's own lifecycle (a killed owner's leftovers torn down); make test "
    "starts and stops the node twice (smoke, fidelity), each asserting it left nothing",
    "e2e/test_node_chart.py": "the chart's pods through rotation, upgrade from 0.1.0, leader election, rollout "
    "restart (~6 min); make test installs the chart from the registry in the smoke",
    "e2e/test_install_from_registry.py": "the release path with registryCA and Image Pull through the "
    "registry; the smoke (e2e/test_smoke_node.py) installs from the registry in make test",
    "e2e/test_prometheus_scrape.py": "needs the Prometheus server (e2e/build.sh prometheus, ~8 CPU-min cold) "
    "and the chart's pods on the node",
    "e2e/test_prometheus_local.py": "needs the Prometheus server (e2e/build.sh prometheus), which make test "
    "does not build",
}

#: a test collected before the split that is gone on purpose → the test that replaces it and why
REPLACED: dict[str, str] = {
    "tests/test_cmd_check.py::test_json_output_is_only_the_aiperf_shape": "tests/test_cmd_check.py::"
    "test_json_output_is_an_array_of_aiperf_shaped_entries_that_name_their_job (issue 36: -o json is always an "
    "array whose entries name their job)",
    "tests/test_cmd_check.py::test_unhandled_kinds_are_counted_and_nothing_checked_is_an_error": "tests/"
    "test_cmd_check.py::test_unhandled_kinds_are_counted_and_no_job_is_an_empty_report_exit_0 (issue 36: input "
    "with no job is a valid empty report, exit 0)",
    "tests/test_chart_monitoring.py::test_bad_monitoring_values_are_refused[args0-metrics.serviceMonitor.enabled "
    "needs metrics.enabled=true]": "tests/test_chart_monitoring.py::test_bad_monitoring_values_are_refused[args0-- "
    "at '/metrics/enabled': value must be true] (issue 36: values.schema.json refuses it, so helm lint does too)",
    "tests/test_check_synchronous.py::test_synchronous_check_never_awaits[Kueue Capacity]": "tests/"
    "test_check_synchronous.py::test_checks_that_do_io_stay_tasks (issue 39: Kueue Capacity reads Kueue's "
    "visibility API for a job that will wait, so it is a task, no longer synchronous)",
    "tests/test_check_synchronous.py::test_synchronous_check_never_awaits[ConfigMap Size]": "tests/"
    "test_loop_stall.py (issue 33: ConfigMap Size measures its largest parts in a worker thread, off the "
    "event loop, so it is a task, no longer synchronous)",
}

#: modules moved since the split (issue 37: a models layer under the checks), old → new under webhook/; the
#: layer tests run per module, so each of their ids follows its module to the new name
MOVED_MODULES = {
    "checks.provisioning": "models.provisioning",
    "checks.quota_admission": "models.quota",
    "checks.netpol_eval": "models.netpol",
    "checks.dryrun_cache": "models.dryrun_cache",
    "checks.dryrun_probe": "models.dryrun_probe",
    "checks.kueue_capacity": "checks.kueue.capacity",
    "checks.kueue_cohort": "models.kueue.cohort",
    "checks.kueue_queue": "models.kueue.queue",
    "checks.dra.allocate": "models.dra.allocate",
    "checks.dra.cel": "models.dra.cel",
    "checks.podsecurity_policy": "models.podsecurity",
    **{
        f"checks.podsecurity_policy.{m}": f"models.podsecurity.{m}"
        for m in (
            "api",
            "checks_host",
            "checks_pod",
            "checks_privilege",
            "checks_profiles",
            "checks_users",
            "helpers",
            "registry",
        )
    },
}
REPLACED.update(
    {
        f"tests/test_layers.py::{test}[webhook.{old}]": f"tests/test_layers.py::{test}[webhook.{new}] (issue 37: the "
        "module moved)"
        for old, new in MOVED_MODULES.items()
        for test in ("test_imports_follow_the_layers", "test_webhook_never_imports_the_tests")
    }
)
REPLACED.update(
    {
        f"tests/test_layers.py::test_a_package_imports_one_way[webhook.checks.{old}]": "tests/test_layers.py::"
        f"test_a_package_imports_one_way[webhook.models.{new}] (issue 37: the package's models moved)"
        for old, new in (("dra", "dra"), ("podsecurity_policy", "podsecurity"))
    }
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "test-tiers.md"
#: the test ids collected at 3a0fb26, before the split (`pytest --collect-only -q tests e2e`)
BEFORE = ROOT / "e2e" / "tiers-before.txt"


PATHS = ("tests", "e2e")


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def is_conformance(path: str) -> bool:
    """``path``: a test file's path relative to the repository (or ending with it)."""
    path = path.replace("\\", "/")
    return any(path == m or path.endswith("/" + m) for m in CONFORMANCE)


def collect(marker: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 5):
        raise SystemExit(f"pytest --collect-only -m {marker!r} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return [line for line in proc.stdout.splitlines() if "::" in line]


def render(test: list[str], conformance: list[str], before: list[str]) -> tuple[str, list[str]]:
    """The document and the ids of ``before`` found in neither tier (nothing may be lost)."""
    now = set(test) | set(conformance)
    lost = [t for t in before if t not in now and t not in REPLACED]
    new = sorted(now - set(before))
    per_test, per_conf = Counter(map(module_of, test)), Counter(map(module_of, conformance))
    out = [
        "# Test tiers: where every test runs",
        "",
        "Generated by `python -m e2e.tiers --write` (from `pytest --collect-only`); do not edit by hand. "
        '`make test` runs `pytest -m "not conformance"` on tests/ and e2e/ side by side (scripts/test.sh), '
        "`make conformance` runs "
        "`pytest -m conformance e2e`; e2e/tiers.py lists the conformance modules and why each is there "
        '(docs/development.md, "Test tiers").',
        "",
        f"**{len(test)} tests in `make test`, {len(conformance)} in `make conformance`.** Before the split "
        f"(3a0fb26) {len(before)} tests were collected: {len(before) - len(lost) - len(REPLACED)} of them are in "
        f"one of the two tiers, {len(REPLACED)} were replaced (below), {len(lost)} are in neither; {len(new)} "
        "tests are new since.",
        "",
        "| module | make test | make conformance | why conformance |",
        "|---|---|---|---|",
    ]
    for mod in sorted(set(per_test) | set(per_conf)):
        why = next((w for m, w in CONFORMANCE.items() if mod == m), "")
        out.append(f"| `{mod}` | {per_test.get(mod, 0) or ''} | {per_conf.get(mod, 0) or ''} | {why} |")
    if lost:
        out += ["", "## Collected before, found in neither tier", ""] + [f"- `{t}`" for t in lost]
    out += ["", "## Replaced since the split", ""] + [f"- `{old}`: by `{by}`" for old, by in REPLACED.items()]
    out += ["", "## The tests of `make conformance`", ""] + [f"- `{t}`" for t in conformance]
    out += ["", "## New since the split", ""] + ([f"- `{t}`" for t in new] or ["none"])
    out.append("")
    return "\n".join(out), lost


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.tiers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    test, conformance = collect("not conformance"), collect("conformance")
    both = set(test) & set(conformance)
    if both:
        print(f"in both tiers: {sorted(both)}", file=sys.stderr)
        return 1
    text, lost = render(test, conformance, BEFORE.read_text().splitlines())
    if args.write:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    print(f"make test: {len(test)} tests; make conformance: {len(conformance)}; lost since the split: {len(lost)}")
    for t in lost:
        print(f"  lost: {t}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
