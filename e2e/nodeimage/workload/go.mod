module preflight-webhook.local/e2e/workload

go 1.22
