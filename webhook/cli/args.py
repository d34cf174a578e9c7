"""Arguments several subcommands share, declared once so their spelling and help agree."""

from __future__ import annotations

import argparse


def add_manifest_argument(p: argparse.ArgumentParser) -> None:
    """-f/--filename: the manifests a command reads (`webhook.manifests.load_documents`)."""
    p.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="FILE",
        help="manifest file (YAML or JSON, multi-document); - for stdin",
    )
