"""The audit's rules: what the audit decides, from what it was handed.

For one partition and one business key (``rule``: the rule both engines run in their tasks), by range
arithmetic over the log and the sink's offset islands (``reconcile``), with a dead-letter queue
(``deadletter``), each finding with its cause (``causes``; the root causes and the causes' JSON are
eosctl.report's); a row's content against its record's (``content``, decoded: ``fields``), one finding per
row across them (``precedence``); state sinks per key (``upsert``, ``aggregate``, compared by ``stateids``,
the record and table row they share in ``keyed``, a windowed aggregate's windows in ``timewindows``);
a Kafka stage's hop (``hop``), a MirrorMaker 2 replica (``replica``), a key duplicate followed back through
the stage upstream (``upstream``).

Pure: no Kafka client, no sink reader, no engine (tests/unit/test_import_graph.py says so). The auditors
(auditors/: Spark, a local process pool, and the driver's passes in auditors.passes) plan the work, read
Kafka and the sink, and hand the rules what they judge; ``eosctl ledger`` uses the same reconcile so the
two never disagree.
"""
