"""The gap map: what the audit records of a partition's log (``segments``: aborted, marker, open and
compacted stretches, bounded; computed in the audit's per-partition task) and its drawing (``svg``: one bar
per partition, findings on top, the HTML report's gap-map section).

Nothing is imported here: eosctl.findings imports ``segments`` (a report's partitions carry them), and
``svg`` builds on eosctl.findings.
"""
