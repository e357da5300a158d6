"""Spark jobs that check a sink against what Kafka holds (eosctl audit).

`spark` builds the session, `job` runs the audit, `report` renders it. Imported only by the audit
command and the benchmark, never at eosctl start-up (Spark is slow to import and start).
"""
