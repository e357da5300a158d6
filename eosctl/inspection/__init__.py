"""The models behind the inspection verbs: a pipeline captured at one moment, the live model, snapshots, lag,
the sink ledger and explain."""
