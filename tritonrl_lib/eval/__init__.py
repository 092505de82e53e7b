"""Evaluation: held-out tasks, a model's samples verified and summarised as an eval record, the metrics,
resuming a cut-off evaluation, the eager / torch.compile baselines, and `tritonrl eval`."""
