#!/usr/bin/env bash
# Create (once) the oracle venv: AIPerf 0.13.0's own renderer, outside the repository.
# Prints the venv's python on stdout; progress goes to stderr. Idempotent (a stamp records
# what it was built from), so a warm run takes well under a second.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${PREFLIGHT_ORACLE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight-webhook/oracle-venv}"
STAMP="$VENV/.stamp"
WANT="aiperf==0.13.0 $(sha256sum "$HERE/requirements.txt" | cut -c1-16)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
    echo "$VENV/bin/python"
    exit 0
fi
echo "==> creating the AIPerf 0.13.0 oracle venv in $VENV (first time: about a minute)" >&2
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
# pip's resolver complains that aiperf's ~40 heavy dependencies are absent: on purpose, the
# renderer needs only requirements.txt. Its output is shown only when a step fails.
if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --upgrade pip \
       && "$VENV/bin/pip" install -q --no-deps aiperf==0.13.0 \
       && "$VENV/bin/pip" install -q -r "$HERE/requirements.txt"; } >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "tests/oracle/setup.sh: error: could not create the oracle venv in $VENV" >&2
    exit 1
fi
echo "$WANT" > "$STAMP"
echo "$VENV/bin/python"
