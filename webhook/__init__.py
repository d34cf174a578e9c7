"""preflight-webhook: refuse, at apply time, AIPerfJobs and TrainJobs that would fail later."""

__version__ = "0.1.0"
