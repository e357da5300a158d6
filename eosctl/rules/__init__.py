"""The audit rule: what the audit decides for one partition (``rule.audit_partition``) and for one business
key (``rule.key_finding``), by range arithmetic over the log and the sink's offset islands
(``reconcile``), each finding with its cause (``causes``, carried as JSON by ``causejson``) and the root cause
that explains it with others (``rootcauses``).

Pure: no Kafka connection, no sink reader, no engine. The engines in ``auditors/`` (Spark, a local process
pool) plan the work, read Kafka and the sink, and run this rule in their tasks; ``eosctl ledger`` uses the
same reconcile so the two never disagree.
"""
