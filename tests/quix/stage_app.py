"""A stateless Quix Streams stage: INPUT -> value upper-cased -> OUTPUT, each record's key kept.

Run with the Quix venv (`make test` builds .venv-quix; quixstreams pins a confluent-kafka older than the
project's), never the project's:

    .venv-quix/bin/python tests/quix/stage_app.py --bootstrap HOST:PORT --group G --input IN --output OUT \
        [--guarantee exactly-once|at-least-once] [--commit-interval SECONDS] [--delay SECONDS]

Topics must exist (auto_create_topics=False: the stage never creates or reconfigures them). The stage keeps
no state: its state directory stays empty and it has no changelog topics. It prints `processed N` to stdout
after each record, so a log shows how far a run got.
"""

from __future__ import annotations

import argparse
import sys
import time


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--guarantee", choices=["exactly-once", "at-least-once"], default="exactly-once")
    p.add_argument("--commit-interval", type=float, default=0.5)
    p.add_argument("--delay", type=float, default=0.0,
                   help="seconds to sleep per record: a slow stage, so a test can kill it mid-stream")
    p.add_argument("--loglevel", default="INFO")
    p.add_argument("--state-dir", default="state",
                   help="Quix makes it even for a stateless stage (empty); relative to the working directory")
    p.add_argument("--transactional-id", default=None,
                   help="default GROUP.tx: a stable id, so a restart fences a killed run's open transaction")
    return p.parse_args(argv)


def main(argv: list[str]) -> None:
    from quixstreams import Application

    args = parse(argv)
    producer_config = {}
    if args.guarantee == "exactly-once":
        # Quix picks a random transactional.id per start unless given one: a SIGKILLed run's open
        # transaction then stays open until the broker's transaction timeout (which the sandbox never
        # enforces), holding the output's LSO, and an audit finds every later output lost (measured). A
        # stable id makes the restart fence and abort it, as Kafka Streams does with its per-task ids.
        producer_config["transactional.id"] = args.transactional_id or f"{args.group}.tx"
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        commit_interval=args.commit_interval,
        auto_create_topics=False,
        use_changelog_topics=False,
        state_dir=args.state_dir,
        # Static membership: the sandbox broker can hang a JoinGroup after a SIGKILLed dynamic member.
        consumer_extra_config={"group.instance.id": f"{args.group}.member"},
        producer_extra_config=producer_config,
        loglevel=args.loglevel,
    )
    source = app.topic(args.input, key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(args.output, key_serializer="bytes", value_serializer="bytes")
    processed = 0

    def report(value: bytes) -> bytes:
        nonlocal processed
        processed += 1
        if args.delay:
            time.sleep(args.delay)
        print(f"processed {processed}", flush=True)
        return value

    app.dataframe(source).apply(lambda value: value.upper()).update(report).to_topic(sink)
    app.run()


if __name__ == "__main__":
    main(sys.argv[1:])
