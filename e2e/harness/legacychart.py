"""The chart as 0.1.0 shipped its selectors, for the upgrade tests (e2e/test_chart.py, e2e/test_node_chart.py).

Chart 0.1.0 selected the serving pods by ``app.kubernetes.io/name`` and ``instance`` alone, which
also matched the certificate Deployment's pod; 0.2.0 adds ``app.kubernetes.io/component: webhook``
to the serving pods and to every selector of them (charts/preflight-webhook/templates/_helpers.tpl
``pw.webhookSelectorLabels``). That is the only difference that matters to an upgrade, so the
legacy chart is today's chart with the selectors put back, not a copy of old files: the tests then
show what `helm upgrade` from a 0.1.0 release meets.
"""

from __future__ import annotations

import shutil
from pathlib import Path

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "preflight-webhook"
#: the templates that selected the serving pods by the release's selectorLabels alone
_SELECTING = ("deployment.yaml", "service.yaml", "pdb.yaml", "networkpolicy.yaml")


def legacy_chart(dest: Path) -> Path:
    """Write the 0.1.0-selector chart under ``dest`` and return its directory."""
    out = dest / "preflight-webhook"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(CHART_DIR, out)
    templates = out / "templates"
    for name in _SELECTING:
        path = templates / name
        text = path.read_text().replace('include "pw.webhookSelectorLabels"', 'include "pw.selectorLabels"')
        if name == "deployment.yaml":
            text = text.replace("    app.kubernetes.io/component: webhook\n", "", 1)
        assert "app.kubernetes.io/component" not in text, name
        path.write_text(text)
    helpers = templates / "_helpers.tpl"
    text = helpers.read_text()
    assert '{{- include "pw.validateUpgrade" . -}}\n' in text
    helpers.write_text(text.replace('{{- include "pw.validateUpgrade" . -}}\n', ""))
    chart = out / "Chart.yaml"
    lines = ["version: 0.1.0" if ln.startswith("version:") else ln for ln in chart.read_text().splitlines()]
    chart.write_text("\n".join(lines) + "\n")
    return out
