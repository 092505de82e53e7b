"""The worker: a long-lived process that takes one job at a time, runs it in a sandboxed candidate's
process, and judges its messages (comparison, the standard an output is held to, the reference cache)."""
