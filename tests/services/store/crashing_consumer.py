"""A trainer stand-in run as a subprocess by the stream tests, to be SIGKILLed in the middle of a batch.

It reads one batch and "trains" it in mini-batches: each step appends the step's experience ids to a
journal (``{"event": "stepped", ...}``), then acknowledges them (``{"event": "acked", ...}``). After
``--ack-steps`` acknowledged steps it takes one more step, prints ``STEPPED`` and waits to be killed:
a crash between an optimizer step and its ack, with later mini-batches of the batch still unread.

    python -m tests.services.store.crashing_consumer --url URL --prefix P --journal FILE ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from azr.services.config import RedisConfig, StreamConfig
from azr.services.store import connect
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys


def _journal(path: Path, event: str, ids: list[str]) -> None:
    with path.open("a") as f:
        f.write(json.dumps({"event": event, "ids": ids}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--stream-config", required=True, help="StreamConfig as JSON")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--mini-batch", type=int, required=True)
    parser.add_argument("--ack-steps", type=int, required=True)
    args = parser.parse_args()

    client = connect(RedisConfig(url=args.url, persistence="ignore"))
    config = StreamConfig.model_validate_json(args.stream_config)
    stream = ExperienceStream(client, Keys(args.prefix), config, consumer="doomed")
    batch = stream.read(current_version=0, n=args.batch, block_ms=5_000)
    steps = [batch.deliveries[i : i + args.mini_batch] for i in range(0, len(batch), args.mini_batch)]
    for step, deliveries in enumerate(steps):
        ids = [d.experience.id for d in deliveries]
        _journal(args.journal, "stepped", ids)
        if step == args.ack_steps:
            print("STEPPED", flush=True)
            time.sleep(600)
        stream.ack(deliveries)
        _journal(args.journal, "acked", ids)
    sys.exit("the consumer was expected to be killed before finishing its batch")


if __name__ == "__main__":
    main()
