"""`make demo`: a real kube-apiserver calling preflight-webhook, shown through kubectl.

    python -m e2e.harness.demo up      # build/reuse binaries, start everything, apply the samples
    python -m e2e.harness.demo down    # stop what `up` left running (the webhook, then the control plane)

`up` starts etcd + kube-apiserver (state in .demo/, git-ignored), installs the CRDs and
the sample ClusterTrainingRuntime, starts `preflight-webhook serve` and registers it
(e2e/harness/runner.py), then applies e2e/samples/: a good AIPerfJob and TrainJob (accepted),
a broken one of each (denied), and a `--dry-run=server` of a job that only warns. Every
kubectl line printed is kubectl's real output. The cluster stays up afterwards; Ctrl-C
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

from e2e.harness import controlplane
from e2e.harness.controlplane import STATE_FILE, ControlPlane, ControlPlaneError, _pid_runs, ensure_built, stop_pid
from e2e.harness.runner import RunningWebhook, WebhookError
from e2e.harness.standins import sample_endpoints

ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = ROOT / ".demo"
CLUSTER_DIR = DEMO_DIR / "cluster"
WEBHOOK_DIR = DEMO_DIR / "webhook"
WEBHOOK_STATE = DEMO_DIR / "webhook.json"
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
    total = 6
    cp: ControlPlane | None = None
    hook: RunningWebhook | None = None
    t0 = time.monotonic()
    try:
        step(1, total, "Building or reusing kube-apiserver, etcd, kubectl and the CRDs (e2e/build.sh control-plane)")
        note(
            "a cold cache builds these from source (~15-20 min on 2 cores: kube-apiserver is most of it); a warm one takes seconds"
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

        step(6, total, f"Done in {time.monotonic() - t0:.0f}s. The cluster and the webhook keep running:")
        print(f"\n    export KUBECONFIG={cp.kubeconfig}")
        print(f"    export PATH={cp.bin_dir}:$PATH")
        print(f"    {'kubectl apply -f e2e/samples/aiperfjob-broken.yaml':<52} # try it yourself")
        print(f"    {'tail -f ' + str(hook.log_path.relative_to(ROOT)):<52} # the webhook's log")
        print(f"\n    {'make demo-down':<52} # stops the webhook and the control plane\n", flush=True)
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
