"""`preflight-webhook` / `python -m webhook`: the command line entry point.

This module only builds the parser and dispatches. Each subcommand lives in its own
module `webhook.cli.<name>`, listed in COMMANDS, exposing:

    def add_parser(subparsers) -> argparse.ArgumentParser   # registers the subcommand
    def run(args: argparse.Namespace) -> int                # the exit code

A command module imports what only running it needs inside its functions, so `--help`
stays fast, and a command's module is imported only when that command runs (or `--help`
lists them all): `serve` never loads what `check`, `plan` or `certs` need (the manifest
reader, the report formats, cryptography), issue 38's idle webhook. Every subcommand also gets `--log-level` and `--log-format text|json`. Logs
go to stderr, so stdout stays clean for machine-readable output.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from webhook import __version__
from webhook._compat import parser_dests

#: the subcommands (modules of webhook.cli), in --help order
COMMANDS = ("serve", "audit", "check", "plan", "capabilities", "certs", "report")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg and the record's `fields` extra."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            # the type only: an exception's text may quote object content
            out["error"] = record.exc_info[0].__name__
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`time level logger: message key=value ...` for people reading a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            text += " " + " ".join(
                f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}" for k, v in fields.items()
            )
        return text


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is now (it may be replaced after start-up, e.g. under test)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str = "info", fmt: str = "text") -> None:
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # the kubernetes client logs request bodies at debug; never let it
    logging.getLogger("kubernetes_asyncio").setLevel(max(logging.INFO, root.level))


def _add_logging_options(p: argparse.ArgumentParser) -> None:
    existing = parser_dests(p)
    if "log_level" not in existing:
        p.add_argument(
            "--log-level",
            default="info",
            choices=["debug", "info", "warning", "error"],
            help="log verbosity (default: info); admission decisions: denials at info, all at debug",
        )
    if "log_format" not in existing:
        p.add_argument(
            "--log-format",
            default="text",
            choices=["text", "json"],
            help="log line format on stderr: text, or json (one object per line) for log pipelines",
        )


def build_parser(prog: str = "preflight-webhook", only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only` (one of COMMANDS), the top level and that command alone,
    which parses that command's arguments the same way without importing the other commands."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Refuse, at kubectl apply, AIPerfJobs and TrainJobs that would fail later. "
            "Runs as a Kubernetes validating admission webhook (serve) or on manifests (check)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        mod = importlib.import_module(f"webhook.cli.{name}")
        p = mod.add_parser(sub)
        _add_logging_options(p)
        if p.get_default("func") is None:
            p.set_defaults(func=mod.run)
    return parser


def kubectl_main() -> int:
    """`kubectl-preflight`: the same commands as a kubectl plugin (`kubectl preflight check -f ...`);
    kubectl runs the first `kubectl-<name>` on PATH with the remaining arguments."""
    return main(prog="kubectl preflight")


def main(argv: Sequence[str] | None = None, prog: str = "preflight-webhook") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the top level has options only before the command (-h, --version): a first word that names a
    # command is that command, and only its module is loaded
    parser = build_parser(prog, only=argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    configure_logging(getattr(args, "log_level", "info"), getattr(args, "log_format", "text"))
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 141


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
