"""What `check` and `report` both do before they judge: read the --config and the --timeout budget,
and open the live ClusterView (--kubeconfig). Declared once, so their errors read the same."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, TextIO

from webhook.checks import all_checks, check_names
from webhook.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from webhook.cluster.live import LiveClusterView


def settings_and_budget(args: argparse.Namespace, err: TextIO) -> tuple[Settings, float] | None:
    """The settings of --config and the time budget per job (--timeout, else the config's
    budgetSeconds); None after saying on `err` what is wrong and how to fix it."""
    try:
        settings = load_settings(args.config, known_checks=check_names())
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return None
    timeout = args.timeout if args.timeout is not None else settings.budget_seconds
    if timeout <= 0:
        print(
            f"error: --timeout must be greater than 0 (got {timeout:g}): it is each job's time budget in "
            "seconds. Fix: give e.g. --timeout 10, or leave it out to use the config's budgetSeconds",
            file=err,
        )
        return None
    return settings, timeout


@contextlib.asynccontextmanager
async def live_view(
    settings: Settings, kubeconfig: str | None, err: TextIO, fix: str = "check --kubeconfig"
) -> AsyncIterator[LiveClusterView | None]:
    """The live ClusterView, closed on exit; None when it cannot be opened, after saying why on
    `err` with `fix` (any failure to reach the cluster is an input problem for the CLI)."""
    from webhook.cluster.live import open_cluster_view

    try:
        view = await open_cluster_view(settings, kubeconfig=kubeconfig, checks=all_checks())
    except Exception as exc:
        print(f"error: cannot connect to the cluster: {str(exc) or type(exc).__name__}. Fix: {fix}", file=err)
        yield None
        return
    try:
        yield view
    finally:
        await view.close()
