"""Spark Structured Streaming queries as users write them: Kafka source, a checkpoint, a Parquet file sink
or a Delta table. Run as a process of its own by tests/integration/test_spark_streaming.py (so it can be
SIGKILLed mid-batch); several queries share its one SparkSession (one JVM start for all of them):

    python spark_job.py --bootstrap B --topic T --jars a.jar,b.jar [--max-offsets N]
                        --query FORMAT,ISOLATION,OUT,CHECKPOINT[,MAX_OFFSETS] [--query ...]

FORMAT is parquet or delta; ISOLATION is read_committed, or `default` for Spark's own (the Java consumer's
read_uncommitted). Each query reads the topic from the earliest offset and processes what it holds now
(Trigger.AvailableNow, at most N records a batch, or the query's own MAX_OFFSETS); the process exits 0
when every query is done.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

# Delta's quickstart configuration of a session; and one partition for the log's state (50 by default: 50
# tasks a batch on the job's one core, most of a batch's time).
DELTA = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
         "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
         "spark.databricks.delta.snapshotPartitions": "1"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--jars", required=True)
    ap.add_argument("--max-offsets", type=int, default=0)
    ap.add_argument("--query", action="append", required=True)
    a = ap.parse_args()
    queries = [(q.split(",") + [""])[:5] for q in a.query]

    builder = (SparkSession.builder.master("local[1]").appName("eosctl-test-stream")
               .config("spark.driver.memory", "768m")
               .config("spark.jars", a.jars)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1"))
    if any(q[0] == "delta" for q in queries):
        for key, value in DELTA.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    started = []
    for fmt, isolation, out, checkpoint, rate in queries:
        reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", a.bootstrap)
                  .option("subscribe", a.topic).option("startingOffsets", "earliest"))
        if isolation != "default":
            reader = reader.option("kafka.isolation.level", isolation)
        if rate or a.max_offsets:
            reader = reader.option("maxOffsetsPerTrigger", rate or str(a.max_offsets))
        rows = reader.load().selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key",
                                        "CAST(value AS STRING) AS value")
        started.append(rows.writeStream.format(fmt).option("checkpointLocation", checkpoint)
                       .trigger(availableNow=True).start(out))
    for query in started:
        query.awaitTermination()
        print(f"done {query.lastProgress and query.lastProgress['batchId']}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
