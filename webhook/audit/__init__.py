"""The audit controller (`preflight-webhook audit`): re-checks the jobs that have not started yet
and writes what it finds where their owners look (Events, Policy Reports, metrics).

It is the one writer of the project; the webhook never writes. It judges through the same
adapter -> engine -> policy path as the webhook (`webhook.preflight.evaluate`).
"""
