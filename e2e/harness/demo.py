"""`make demo`: a real kube-apiserver calling preflight-webhook, shown through kubectl.

    python -m e2e.harness.demo up      # build/reuse binaries, start everything, apply the samples
    python -m e2e.harness.demo down    # stop what `up` left running (the webhook, then the control plane)

`up` starts etcd + kube-apiserver (state in .demo/, git-ignored), installs the CRDs and
the sample ClusterTrainingRuntime, starts `preflight-webhook serve` and registers it
(e2e/harness/runner.py), then applies e2e/samples/: a good AIPerfJob and TrainJob (accepted),
a broken one of each (denied), and a `--dry-run=server` of a job that only warns. Then it
starts `preflight-webhook audit` beside the webhook, with the Policy Report CRDs, and shows it:
a suspended TrainJob is admitted, its Secret is deleted, the `PreflightFailed` Event and the
report appear, the Secret is put back, `PreflightPassed` follows. Every kubectl line printed is
kubectl's real output. The cluster stays up afterwards; Ctrl-C
while `up` runs stops everything it started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from e2e.harness import controlplane
from e2e.harness.controlplane import STATE_FILE, ControlPlane, ControlPlaneError, _pid_runs, ensure_built, stop_pid
from e2e.harness.runner import RunningWebhook, WebhookError
from e2e.harness.standins import sample_endpoints

ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = ROOT / ".demo"
CLUSTER_DIR = DEMO_DIR / "cluster"
WEBHOOK_DIR = DEMO_DIR / "webhook"
WEBHOOK_STATE = DEMO_DIR / "webhook.json"
AUDIT_STATE = DEMO_DIR / "audit.json"
OPENREPORTS = Path("charts") / "preflight-webhook" / "files" / "openreports"
SAMPLES = Path("e2e") / "samples"  # relative: kubectl prints the path it was given

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def step(n: int, total: int, text: str) -> None:
    print(f"\n{BOLD}==> [{n}/{total}] {text}{RESET}", flush=True)


def heading(text: str) -> None:
    print(f"\n{BOLD}--- {text}{RESET}", flush=True)


def note(text: str) -> None:
    print(f"    {text}", flush=True)


def show_kubectl(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    """Print `$ kubectl ARGS`, run it (cwd: the repository), print its output as a terminal shows it.

    stderr goes into the same pipe as stdout, so `Warning:` lines keep their real place.
    """
    print(f"{DIM}$ kubectl {shlex.join(args)}{RESET}", flush=True)
    proc = subprocess.run(
        [str(cp.kubectl_path), *args],
        cwd=ROOT,
        env=cp.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    if proc.stdout:
        print(proc.stdout, end="" if proc.stdout.endswith("\n") else "\n", flush=True)
    print(f"{DIM}(exit code {proc.returncode}){RESET}", flush=True)
    return proc


# --------------------------------------------------------------------------- up


def up() -> int:
    if (CLUSTER_DIR / STATE_FILE).exists():
        state = json.loads((CLUSTER_DIR / STATE_FILE).read_text())
        if all(_pid_runs(int(i["pid"]), i["exe"]) for i in state.get("pids", {}).values()):
            print(f"A demo is already running (kube-apiserver {state['server_url']}).")
            print(f"    export KUBECONFIG={state['kubeconfig']}")
            print("Run `make demo-down` first to start afresh.")
            return 1
        print("==> cleaning up a previous demo that is no longer running")
        down(quiet=True)

    # Ctrl-C (and SIGTERM) → KeyboardInterrupt → stop what was started, even when the
    # shell started us with SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    total = 7
    cp: ControlPlane | None = None
    hook: RunningWebhook | None = None
    t0 = time.monotonic()
    try:
        step(1, total, "Building or reusing kube-apiserver, etcd, kubectl and the CRDs (e2e/build.sh control-plane)")
        note(
            "a cold cache builds them from source in one go build: 13 min of CPU (kube-apiserver is most of it),"
            " so ~9-11 min on 2 idle cores and longer on busy ones"
            " (measured: docs/benchmarks/build-and-test-times.md#current-figures);"
            " a warm one takes seconds"
        )
        ensure_built(what="control-plane")

        step(2, total, f"Starting etcd + kube-apiserver on 127.0.0.1 (state in {CLUSTER_DIR.relative_to(ROOT)}/)")
        note("fresh certificates, RBAC, an audit log; then the JobSet, Trainer, Kueue and AIPerfJob CRDs")
        t = time.monotonic()
        cp = ControlPlane(CLUSTER_DIR, build=False)
        cp.start()
        note(f"kube-apiserver ready at {cp.server_url} ({time.monotonic() - t:.0f}s); CRDs established")

        step(3, total, "Creating the sample namespaces, Service, Secrets and ClusterTrainingRuntime")
        # (no controller-manager here: the harness makes each namespace's default ServiceAccount)
        cp.apply_samples_prerequisites(SAMPLES, show=show_kubectl)
        # no controller runs here: the EndpointSlice the endpoint slice controller would write for "llm"
        cp.apply(sample_endpoints())

        step(4, total, "Starting preflight-webhook and registering it with the apiserver")
        note(
            "python -m webhook serve --port <free port> --tls-cert/--tls-key (a CA made for 127.0.0.1) --kubeconfig ..."
        )
        hook = RunningWebhook(
            cp,
            vwc_name="preflight-webhook-demo",
            config={"mode": "enforce", "privateRegistries": ["nvcr.io"]},  # aiperfjob-broken's pull Secret is needed
            # every namespace the chart judges (all but the system ones), so a newcomer's own
            # namespace is checked too, as after `helm install`
            namespace_selector={
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", "kube-node-lease", "kube-public"],
                    }
                ]
            },
            probe_namespace="demo-bench",
            workdir=WEBHOOK_DIR,
        )
        hook.start()
        WEBHOOK_STATE.write_text(
            json.dumps({"pid": hook.pid, "exe": sys.executable, "url": hook.url, "log": str(hook.log_path)}, indent=2)
            + "\n"
        )
        note(
            f"webhook {hook.url}/validate (pid {hook.pid}); ValidatingWebhookConfiguration {hook.vwc_name}: "
            "aiperfjobs + trainjobs, CREATE/UPDATE, failurePolicy Fail, timeoutSeconds 10"
        )
        note("the apiserver calls it now (a server-side dry-run probe reached it)")

        step(5, total, "Applying the samples through kubectl")
        heading("A good AIPerfJob: accepted")
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "aiperfjob-good.yaml"))
        heading("A good TrainJob: accepted")
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "trainjob-good.yaml"))
        heading('A broken AIPerfJob (pull Secret "ngc" is missing): denied, with the check and the fix')
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "aiperfjob-broken.yaml"))
        heading('A broken TrainJob (Secret key "hf_token" does not exist): denied, with the check and the fix')
        show_kubectl(cp, "apply", "-f", str(SAMPLES / "trainjob-broken.yaml"))
        heading("A job that only warns, with --dry-run=server: allowed, warnings printed, nothing stored")
        show_kubectl(cp, "apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-warns.yaml"))
        heading("What the cluster now holds")
        show_kubectl(cp, "get", "aiperfjobs,trainjobs", "-A")

        step(6, total, "The audit controller: a waiting job whose Secret goes away")
        audit_walkthrough(cp)

        step(
            7,
            total,
            f"Done in {time.monotonic() - t0:.0f}s. The cluster, the webhook and the audit controller keep running:",
        )
        print(f"\n    export KUBECONFIG={cp.kubeconfig}")
        print(f"    export PATH={cp.bin_dir}:$PATH")
        print(f"    {'kubectl apply -f e2e/samples/aiperfjob-broken.yaml':<52} # try it yourself")
        print(f"    {'tail -f ' + str(hook.log_path.relative_to(ROOT)):<52} # the webhook's log")
        print(f"    {'tail -f .demo/audit.log':<52} # the audit controller's log")
        print(
            f"\n    {'make demo-down':<52} # stops the webhook, the audit controller and the control plane\n",
            flush=True,
        )
        return 0
    except KeyboardInterrupt:
        print("\n==> interrupted: stopping everything the demo started", file=sys.stderr, flush=True)
        _teardown(cp, hook)
        return 130
    except (ControlPlaneError, WebhookError, subprocess.SubprocessError, OSError) as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        if hook is not None and hook.log_path is not None:
            print(f"webhook log tail:\n{hook.log_tail()}", file=sys.stderr)
        print("==> stopping everything the demo started", file=sys.stderr, flush=True)
        _teardown(cp, hook)
        return 1


def _wait_event(cp: ControlPlane, ns: str, name: str, reason: str, timeout: float = 90.0) -> bool:
    """Until an Event `reason` on `name` exists (the audit controller's; bounded wait)."""
    deadline = time.monotonic() + timeout
    selector = f"involvedObject.name={name},reason={reason}"
    while time.monotonic() < deadline:
        out = cp.kubectl("get", "events", "-n", ns, "--field-selector", selector, "-o", "json", check=False).stdout
        if out and json.loads(out).get("items"):
            return True
        time.sleep(0.5)
    return False


def audit_walkthrough(cp: ControlPlane) -> None:
    """Start `preflight-webhook audit` (recorded in .demo/audit.json for `down`), then: a suspended
    TrainJob admitted, its Secret deleted, the Event and the report, the Secret put back."""
    ns, job = "demo-train", "waiting-ft"
    note("the Policy Report CRDs the chart installs (openreports.io, reports-api v0.2.1)")
    cp.kubectl("apply", "--server-side", "--field-manager=demo", *[a for f in sorted((ROOT / OPENREPORTS).glob("*.yaml"))
               for a in ("-f", str(f))])  # fmt: skip
    cp.wait_for_crds(["reports.openreports.io", "clusterreports.openreports.io"])
    cfg = DEMO_DIR / "audit.yaml"
    cfg.write_text(json.dumps({"audit": {"leaseNamespace": "default", "debounceSeconds": 0.5}}))
    log = DEMO_DIR / "audit.log"
    argv = [sys.executable, "-m", "webhook", "audit", "--config", str(cfg), "--kubeconfig", str(cp.kubeconfig),
            "--identity", "demo", "--metrics-port", "0"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    AUDIT_STATE.write_text(json.dumps({"pid": proc.pid, "exe": sys.executable, "log": str(log)}, indent=2) + "\n")
    note(
        f"python -m webhook audit --config {cfg.relative_to(ROOT)} --kubeconfig ... (pid {proc.pid}; log {log.relative_to(ROOT)})"
    )

    heading("A suspended TrainJob (it waits, e.g. in a Kueue queue): admitted")
    manifest = DEMO_DIR / f"{job}.yaml"
    tj = next(d for d in yaml.safe_load_all((ROOT / SAMPLES / "trainjob-good.yaml").read_text()) if d)
    tj["metadata"]["name"] = job
    tj["spec"]["suspend"] = True
    manifest.write_text(yaml.safe_dump(tj, sort_keys=False))
    show_kubectl(cp, "apply", "-f", str(manifest.relative_to(ROOT)))

    heading('While it waits, its Secret "hf-token" is deleted: the audit controller re-checks it')
    show_kubectl(cp, "delete", "secret", "hf-token", "-n", ns)
    if not _wait_event(cp, ns, job, "PreflightFailed"):
        note(f"no PreflightFailed Event within 90 s; see {log.relative_to(ROOT)}")
    show_kubectl(cp, "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={job}")
    show_kubectl(cp, "get", "reports.openreports.io", "-n", ns)
    print(f"{DIM}$ preflight-webhook report -n {ns}{RESET}", flush=True)
    rep = subprocess.run([sys.executable, "-m", "webhook", "report", "-n", ns, "--kubeconfig", str(cp.kubeconfig)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    print(rep.stdout + rep.stderr, end="", flush=True)
    print(f"{DIM}(exit code {rep.returncode}){RESET}", flush=True)

    heading("The Secret is put back: PreflightPassed")
    show_kubectl(cp, "apply", "-f", str(SAMPLES / "00-prerequisites.yaml"))
    if not _wait_event(cp, ns, job, "PreflightPassed"):
        note(f"no PreflightPassed Event within 90 s; see {log.relative_to(ROOT)}")
    show_kubectl(cp, "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={job}")


def _teardown(cp: ControlPlane | None, hook: RunningWebhook | None) -> None:
    if hook is not None:
        with contextlib.suppress(Exception):
            hook.stop_process()
    if cp is not None:
        cp.stop()
    down(quiet=True)


# --------------------------------------------------------------------------- down


def down(quiet: bool = False) -> int:
    """Stop the webhook (by recorded PID), then the control plane; remove .demo/'s files."""
    say = (lambda s: None) if quiet else (lambda s: print(f"==> {s}", flush=True))
    if WEBHOOK_STATE.exists():
        state = json.loads(WEBHOOK_STATE.read_text())
        pid = int(state["pid"])
        if _pid_runs(pid, state["exe"]):
            stop_pid(pid)
            say(f"stopped preflight-webhook (pid {pid})")
        else:
            say(f"preflight-webhook (pid {pid}) was not running")
        WEBHOOK_STATE.unlink()
    shutil.rmtree(WEBHOOK_DIR, ignore_errors=True)
    if AUDIT_STATE.exists():
        state = json.loads(AUDIT_STATE.read_text())
        pid = int(state["pid"])
        if _pid_runs(pid, state["exe"]):
            stop_pid(pid)
            say(f"stopped the audit controller (pid {pid})")
        AUDIT_STATE.unlink()
    for leftover in ("audit.yaml", "audit.log", "waiting-ft.yaml"):
        with contextlib.suppress(OSError):
            (DEMO_DIR / leftover).unlink()
    if (CLUSTER_DIR / STATE_FILE).exists() or CLUSTER_DIR.exists():
        with contextlib.redirect_stderr(open(os.devnull, "w") if quiet else sys.stderr):
            controlplane.main(["down", "--state-dir", str(CLUSTER_DIR)])
    elif not quiet:
        say("no demo control plane recorded in .demo/")
    # .demo/cluster is the demo's alone: also what an interrupted start left before it recorded anything
    shutil.rmtree(CLUSTER_DIR, ignore_errors=True)
    with contextlib.suppress(OSError):
        DEMO_DIR.rmdir()  # only if empty
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.demo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="start the control plane + webhook and apply the samples (make demo)")
    sub.add_parser("down", help="stop what `up` left running (make demo-down)")
    args = parser.parse_args(argv)
    return up() if args.cmd == "up" else down()


if __name__ == "__main__":
    sys.exit(main())
