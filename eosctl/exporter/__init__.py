"""The exporter behind `eosctl exporter`: Prometheus metrics of pipelines from their live models.

- ``http``: the bounded HTTP server answering /metrics from the latest exposition (a scrape never reads
  the cluster);
- ``loops``: the live models, the refresh loop (main thread) and the audit loop (its own thread);
- ``textfile``: the --once reading written atomically for node_exporter's textfile collector.

Imports sit at module level here: the command imports this package only when the exporter runs, never
for `eosctl --help`. The metrics themselves are eosctl.exporter.metrics (reference: docs/metrics.md). The
command (eosctl/commands/exporter_cmd.py) parses options, wires the audit engine in and says how it ended.
"""
