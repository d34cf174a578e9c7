"""Arguments several subcommands share, declared once so their spelling and help agree."""

from __future__ import annotations

import argparse


def add_manifest_argument(p: argparse.ArgumentParser, many: bool = False) -> None:
    """-f/--filename: the manifests a command reads (`webhook.manifests.load_documents`). With `many`,
    -f repeats, names files, directories or - (stdin), and -R/--recursive walks directories, as kubectl's."""
    if not many:
        p.add_argument(
            "-f",
            "--filename",
            required=True,
            metavar="FILE",
            help="manifest file (YAML or JSON, multi-document); - for stdin",
        )
        return
    p.add_argument(
        "-f",
        "--filename",
        required=True,
        action="append",
        metavar="PATH",
        help="manifest file (YAML or JSON, multi-document), directory (its .yaml, .yml and .json files that hold "
        "Kubernetes objects; a Helm chart's templates and values files are passed over), or - for stdin (e.g. "
        "`kustomize build | ... -f -`); repeatable",
    )
    p.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read the directories given with -f recursively, but not hidden ones (.git, .github) nor symbolic "
        "links to directories",
    )
