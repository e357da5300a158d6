"""A Spark Structured Streaming `foreachBatch` that MERGEs each batch into a Delta table by key, as users
write an upsert (or a running total) sink. Run as a process of its own by
tests/integration/test_spark_merge.py:

    python merge_job.py --bootstrap B --topic T --jars a.jar,b.jar --max-offsets N
                        --query MODE,TABLE,CHECKPOINT [--query ...]

MODE `overwrite`: the row takes the batch's latest value of its key (idempotent: a replayed batch writes
the same); `add`: the row adds the batch's values to what it holds (a replayed batch adds them again). Each
query reads the topic read_committed from the earliest offset and processes what it holds now
(Trigger.AvailableNow, at most N records a batch); the process exits 0 when every query is done.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

DELTA = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
         "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
         "spark.databricks.delta.snapshotPartitions": "1"}
SET = {"overwrite": "t.n = s.n", "add": "t.n = t.n + s.n"}


def merge(mode: str, table: str):  # noqa: ANN201 - a foreachBatch function
    def run(batch, batch_id: int) -> None:
        spark = batch.sparkSession
        rows = batch.selectExpr("CAST(key AS STRING) AS k", "offset",
                                "CAST(get_json_object(CAST(value AS STRING), '$.n') AS BIGINT) AS n")
        rows.createOrReplaceTempView("batch_rows")
        # One source row per key: the batch's latest value (overwrite) or the sum of its values (add).
        src = ("SELECT k, max_by(n, offset) AS n FROM batch_rows GROUP BY k" if mode == "overwrite"
               else "SELECT k, sum(n) AS n FROM batch_rows GROUP BY k")
        spark.sql(f"MERGE INTO delta.`{table}` t USING ({src}) s ON t.k = s.k "
                  f"WHEN MATCHED THEN UPDATE SET {SET[mode]} "
                  f"WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, s.n)")
        print(f"merged {mode} {batch_id}", flush=True)

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--jars", required=True)
    ap.add_argument("--max-offsets", type=int, required=True)
    ap.add_argument("--query", action="append", required=True)
    a = ap.parse_args()
    builder = (SparkSession.builder.master("local[1]").appName("eosctl-test-merge")
               .config("spark.driver.memory", "768m").config("spark.jars", a.jars)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1"))
    for key, value in DELTA.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    started = []
    for q in a.query:
        mode, table, checkpoint = q.split(",")
        spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{table}` (k STRING, n BIGINT) USING delta")
        rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", a.bootstrap)
                .option("subscribe", a.topic).option("startingOffsets", "earliest")
                .option("kafka.isolation.level", "read_committed")
                .option("maxOffsetsPerTrigger", str(a.max_offsets)).load())
        started.append(rows.writeStream.foreachBatch(merge(mode, table))
                       .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    for query in started:
        query.awaitTermination()
        print(f"done {query.lastProgress and query.lastProgress['batchId']}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
