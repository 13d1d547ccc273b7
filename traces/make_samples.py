"""Write the sample traces in this folder: made-up requests in the two formats TRACE replays (not recordings).

    python traces/make_samples.py            # traces/sample.mooncake.jsonl and traces/sample.azure.csv
    python traces/make_samples.py --rows 10000 --out /tmp/big   # bench/trace_bench.py's 10,000-row trace

The Mooncake sample is shaped like Mooncake's traces: bursty arrivals; a third of the requests continue an earlier
conversation (its hash_ids, then new blocks: its prompt grows as a chat's history does); most new ones start with one
of four shared system blocks; the last block of each prompt partial. The Azure sample has the Azure LLM inference
trace's columns and timestamp form. Seeded: the same arguments write the same bytes. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
from datetime import datetime, timedelta
from pathlib import Path

BLOCK_TOKENS = 512
HERE = Path(__file__).resolve().parent


def _arrival_gaps_s(rng: random.Random, rate_rps: float):
    """Gamma gaps of shape 0.5 (burstier than Poisson, coefficient of variation 1.4) and mean 1/rate_rps."""
    while True:
        yield rng.gammavariate(0.5, 1.0 / (rate_rps * 0.5))


def _output_tokens(rng: random.Random, median: float) -> int:
    return max(1, min(4096, round(rng.lognormvariate(math.log(median), 0.7))))


def mooncake_rows(rows: int, rate_rps: float, seed: int, max_blocks: int = 8) -> list[dict]:
    """``rows`` Mooncake rows: timestamp (ms), input_length, output_length, hash_ids."""
    rng = random.Random(seed)
    systems = [[0], [1, 2], [3], [4, 5, 6]]  # shared system blocks
    next_hash = 7
    conversations: list[list[int]] = []
    gaps = _arrival_gaps_s(rng, rate_rps)
    now_s, out = 0.0, []
    for _ in range(rows):
        if conversations and rng.random() < 1 / 3:
            ids = rng.choice(conversations)
            grown = ids + list(range(next_hash, next_hash + rng.randint(1, 2)))
            conversations.remove(ids)
        else:
            start = rng.choice(systems) if rng.random() < 0.7 else []
            grown = start + list(range(next_hash, next_hash + rng.randint(1, max(1, max_blocks // 2))))
        grown = grown[:max_blocks]
        next_hash = max(next_hash, max(grown) + 1)
        if len(grown) < max_blocks:
            conversations.append(grown)
        input_length = BLOCK_TOKENS * (len(grown) - 1) + rng.randint(1, BLOCK_TOKENS)
        out.append({"timestamp": round(now_s * 1000), "input_length": input_length,
                    "output_length": _output_tokens(rng, 250), "hash_ids": grown})
        now_s += next(gaps)
    return out


def azure_rows(rows: int, rate_rps: float, seed: int) -> list[tuple[str, int, int]]:
    """``rows`` Azure rows: TIMESTAMP (as the 2023 trace writes it, 7 decimals), ContextTokens, GeneratedTokens."""
    rng = random.Random(seed)
    start = datetime(2023, 11, 16, 18, 15, 46, 680590)
    gaps = _arrival_gaps_s(rng, rate_rps)
    now_s, out = 0.0, []
    for _ in range(rows):
        stamp = (start + timedelta(seconds=now_s)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
        out.append((stamp, max(1, min(8000, round(rng.lognormvariate(math.log(1000), 0.9)))), _output_tokens(rng, 200)))
        now_s += next(gaps)
    return out


def write_samples(out: Path, rows: int, rate_rps: float, seed: int, max_blocks: int) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    mooncake, azure = out / "sample.mooncake.jsonl", out / "sample.azure.csv"
    mooncake.write_text("".join(json.dumps(row) + "\n" for row in mooncake_rows(rows, rate_rps, seed, max_blocks)))
    with azure.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
        writer.writerows(azure_rows(rows, rate_rps, seed))
    return mooncake, azure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--rate", type=float, default=4.0, help="mean requests per second")
    parser.add_argument("--max-blocks", type=int, default=8, help="the longest prompt, in 512-token blocks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for path in write_samples(args.out, args.rows, args.rate, args.seed, args.max_blocks):
        print(path)


if __name__ == "__main__":
    main()
