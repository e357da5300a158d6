"""Benchmark: a transactions-v2 producer (kafka-clients 4.4, KIP-890) crossing its producer-id rotation
(KAFKA-18660) on Apache Kafka 4.4, and what eosctl reads from the log it leaves.

    python benchmarks/rotation_bench.py [--commits N] [--bootstrap HOST:PORT]

Under transactions v2 every commit bumps the epoch; the transaction that ends at an exhausted epoch
(32766: TransactionMetadata.isEpochExhausted) gets its markers at 32767 and the transactional id moves to
a new producer id at epoch 0 (TransactionCoordinator.endTransaction, prepareComplete). Crossing it takes
~32,767 commits, too many for the suite on a 2-core machine (docs/benchmarks.md), so the crossing is here:
one Java producer commits one-record transactions to one partition (linger.ms 0, acks=all) in a tight
loop until it has rotated and written a few more, then eosctl's `producers`, `log` and an `explain` of the
record after the rotation are run on it and checked to read one producer session continuing. Prints the
commit rate, the time to the rotation, the producer ids and epochs the Java client saw, and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SOURCE = r"""
import java.lang.reflect.*;
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class RotatingProducer {
    // args: bootstrap topic txnId commits reportEvery
    // prints RATE n ms every reportEvery commits, PID id epoch whenever the producer id changes
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("transactional.id", a[2]);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "0");
        p.put("acks", "all");
        p.put("retry.backoff.ms", a.length > 5 ? a[5] : "100");
        int n = Integer.parseInt(a[3]), every = Integer.parseInt(a[4]);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", a[0]);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(ap)) {
            org.apache.kafka.clients.admin.FinalizedVersionRange tv =
                admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("transaction.version");
            System.out.println("FEATURE transaction.version " + (tv == null ? "none" : tv.maxVersionLevel()));
        }
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        Object tm = f.get(producer);
        Method pe = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
        pe.setAccessible(true);
        producer.initTransactions();
        long start = System.nanoTime(), lastPid = -2;
        for (int t = 0; t < n; t++) {
            Object ide = pe.invoke(tm);
            long pid = (Long) ide.getClass().getField("producerId").get(ide);
            short epoch = (Short) ide.getClass().getField("epoch").get(ide);
            if (pid != lastPid) { System.out.println("PID " + t + " " + pid + " " + epoch); lastPid = pid; }
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(a[1], 0, "k" + t, "v" + t));
            producer.commitTransaction();
            if ((t + 1) % every == 0) {
                System.out.println("RATE " + (t + 1) + " " + (System.nanoTime() - start) / 1_000_000);
                System.out.flush();
            }
        }
        Object ide = pe.invoke(tm);
        System.out.println("PID " + n + " " + ide.getClass().getField("producerId").get(ide) + " "
                           + ide.getClass().getField("epoch").get(ide));
        System.out.println("DONE " + (System.nanoTime() - start) / 1_000_000);
        producer.close();
    }
}
"""

EXHAUSTED = 32766  # the last transaction's epoch before the rotation (TransactionMetadata.isEpochExhausted)
TXN_ID = "rotation-bench"
TOPIC = "rotation-bench"


def eosctl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "240"}
    return subprocess.run([sys.executable, "-m", "eosctl", *args], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)


def pid_lines(stdout: str) -> list[tuple[int, int, int]]:
    """(commit index, producer id, epoch) each time the Java client's producer id changed."""
    return [(int(t), int(p), int(e)) for _, t, p, e in (ln.split() for ln in stdout.splitlines()
                                                       if ln.startswith("PID "))]


def check(failures: list[str], ok: bool, what: str, shown: str = "") -> None:
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)
        print(shown[-3000:])


def read_as_one_session(bootstrap: str, old: int, new: int, failures: list[str]) -> None:
    """What a user sees after the rotation: `producers`, `log` and `explain` read one session going on."""
    r = eosctl("producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--format", "json")
    rows = [(p["producer_id"], p["transactional_id"], p["continues_producer_id"], p["fencing_events"],
             p["zombie_writes"]) for p in json.loads(r.stdout)["producers"]] if r.returncode == 0 else []
    check(failures, rows == [(old, TXN_ID, None, 0, 0), (new, TXN_ID, old, 0, 0)],
          f"producers --format json: {new} continues {old}, one transactional id, no fencing: {rows}",
          r.stdout + r.stderr)
    r = eosctl("producers", "--bootstrap", bootstrap, "--topic", TOPIC)
    check(failures, f"{new} (continues {old})" in r.stdout and "FENCED" not in r.stdout,
          f"producers: \"{new} (continues {old})\", nothing FENCED", r.stdout + r.stderr)
    r = eosctl("log", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0", "--no-batches")
    check(failures, f"producer-id rotation: continues producer id {old}" in r.stdout
          and "TAKEOVER" not in r.stdout and "took the id over" not in r.stdout,
          "log: the epoch timeline tells the rotation, no take-over", r.stdout + r.stderr)
    # The new id's first record: one transaction of one record and its marker per commit, so offset 2 * N.
    first_new = 2 * (EXHAUSTED + 1)
    r = eosctl("explain", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0", "--offset",
               str(first_new), "--format", "json")
    summary = json.loads(r.stdout)["summary"] if r.returncode == 0 else ""
    print("  explain's summary:", summary)
    check(failures, f"Producer {new} continues producer id {old}" in summary
          and "took the id over" not in r.stdout and "TAKEOVER" not in r.stdout,
          f"explain --offset {first_new}: producer {new} continues {old}, no take-over", r.stdout + r.stderr)


def fenced_after(bootstrap: str, work: Path, new: int, failures: list[str]) -> None:
    """Fencing is still recognised after the rotation: a second instance of the transactional id while the
    first holds a transaction open (TransactionCoordinator.handleInitProducerId: fence and abort)."""
    from tests.support import jvm
    from tests.support.txnjava import TxnJava

    producer = TxnJava(work)
    held = producer.start(bootstrap, TOPIC, TXN_ID, "open", 1)
    try:
        producer.run(bootstrap, TOPIC, TXN_ID, "commit", 1)
    finally:
        jvm.stop(held)
    r = eosctl("producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--format", "json")
    rows = {p["producer_id"]: p for p in json.loads(r.stdout)["producers"]} if r.returncode == 0 else {}
    check(failures, new in rows and rows[new]["continues_producer_id"] is not None,
          f"producers after the take-over: {new} still continues the old id", r.stdout + r.stderr)
    # One partition of a transactions-v2 id: the take-over's ABORT at E+1 and the new instance at E+2 are
    # also what the id's own abort and a restart leave, so eosctl says both (TAKEOVER?, not counted;
    # docs/kafka.md), as it does for an id that never rotated.
    r = eosctl("log", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0", "--no-batches",
               "--from", str(2 * (EXHAUSTED + 1)), "--format", "json")
    doc = json.loads(r.stdout) if r.returncode == 0 else {"producers": []}
    bumps = [(b["offset"], b["old_epoch"], b["new_epoch"], b["fencing"], b["why"][:60])
             for p in doc["producers"] if p["producer_id"] == new for b in p["epoch_bumps"]]
    print("  the new id's epoch bumps after the take-over:", bumps)
    check(failures, any(b[4].startswith("TAKEOVER?") or b[3] for b in bumps),
          f"log: the take-over after the rotation is told on producer {new} (TAKEOVER? or fencing)",
          r.stdout + r.stderr)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=EXHAUSTED + 1 + 20,
                    help="transactions to commit (default: past the rotation by 20)")
    ap.add_argument("--bootstrap", help="HOST:PORT of a cluster to use (default: start Apache Kafka)")
    opts = ap.parse_args()

    import benchbroker

    from eosctl.sandbox import maven
    from tests.support import jvm

    jars = maven.jars("kafka")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="eosctl-rotation-bench-") as tmp, \
            benchbroker.broker(bootstrap=opts.bootstrap) as b:
        work = Path(tmp)
        classes = jvm.compile_java(work / "rot", "RotatingProducer", SOURCE, jars)
        t0 = time.monotonic()
        done = jvm.run_java(classes, "RotatingProducer", [jars],
                                [b.bootstrap, TOPIC, TXN_ID, str(opts.commits), "2000"], timeout=1800,
                                heap="128m")
        wall = time.monotonic() - t0
        if done.returncode != 0 or "DONE" not in done.stdout:
            print(done.stdout[-3000:], done.stderr[-3000:])
            return 1
        java_ms = int(done.stdout.split("DONE ")[1].split()[0])
        ids = pid_lines(done.stdout)
        rate = opts.commits / (java_ms / 1000)
        feature = next((ln for ln in done.stdout.splitlines() if ln.startswith("FEATURE")), "FEATURE ?")
        print(f"{b.name}, {feature[8:]}: {opts.commits} one-record transactions (one partition, linger.ms 0, "
              f"acks=all) in {java_ms / 1000:.1f} s: {rate:.0f} commits/s ({wall:.1f} s with the JVM's "
              f"start); load average {os.getloadavg()[0]:.1f} at the end")
        print("per 2,000 commits (ms):", " ".join(ln.split()[2] for ln in done.stdout.splitlines()
                                                 if ln.startswith("RATE ")))
        print("producer id, epoch the client held (commit index: id epoch):",
              ", ".join(f"{t}: {p} {e}" for t, p, e in ids))
        old = ids[0][1]
        rotated = [(t, p, e) for t, p, e in ids if p != old]
        check(failures, bool(rotated) and rotated[0][0] == EXHAUSTED + 1 and rotated[0][2] == 0,
              f"the client moved to a new producer id at epoch 0 after commit {EXHAUSTED + 1} "
              "(its transaction at epoch 32766 was the last of the old id)", done.stdout)
        if rotated:
            new = rotated[0][1]
            print(f"rotation: producer id {old} -> {new} after {rotated[0][0]} commits, "
                  f"~{rotated[0][0] / rate:.0f} s at this rate")
            read_as_one_session(b.bootstrap, old, new, failures)
            fenced_after(b.bootstrap, work, new, failures)
    print("FAILED: " + "; ".join(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
