"""Trainer throughput: tokens/s and peak memory of ``Trainer.train_step``, torch vs DeepSpeed ZeRO-1/2.

Models (random weights; only the shapes matter here):

- ``tiny``: the tiny preset's model (~3.4 M parameters, ``azr.trainer.tiny``).
- ``qwen2-100m``: a Qwen2-style model of ~100 M parameters: hidden 768, 12 layers, 12 query / 2 KV heads,
  MLP 2048, vocabulary 32768, tied embeddings.

Batches are shaped like the paper's: six (role, task type) groups with ``per_group`` responses each, every
sequence ``prompt`` + ``response`` tokens long. The paper's batch is 6 x 64 responses with mini-batches of
128 on GPUs; to run in minutes on two CPU cores the 100M case uses 6 x 1 sequences of 192 + 64 = 256 tokens
and the tiny case 6 x 4 of them. One training step = scoring the batch for the old log-probs, then one
optimizer step over the whole batch (a single mini-batch) in micro-batches of ``micro`` rows. Gradient
checkpointing is off (on the CPU it only costs time). fp32 on the CPU.

Each case runs in its own process, so that the peak RSS (``ru_maxrss``, which never decreases) is that
case's alone. Reported: the median step time over the measured steps after one warm-up step, tokens/s
(real tokens of the batch / step time) and peak memory. The load average is recorded: other work on the
machine skews every number here.

    python -m bench.trainer            # all cases (a few minutes on 2 cores)
    python -m bench.trainer --quick    # tiny model only

(Run it as a module: ``python bench/trainer.py`` would put ``bench/`` first on the import path, where
``bench/queue.py`` shadows the standard library's ``queue``.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from azr.core.task import Role, TaskType

RESULTS = Path(__file__).parent / "results" / "trainer.json"
GROUPS = [(role, t) for role in Role for t in TaskType]


@dataclass(frozen=True)
class Case:
    model: str
    engine: str
    zero_stage: int
    per_group: int
    prompt: int
    response: int
    micro: int
    steps: int

    @property
    def name(self) -> str:
        engine = self.engine if self.engine == "torch" else f"deepspeed-z{self.zero_stage}"
        return f"{self.model}/{engine}"


def cases(quick: bool) -> list[Case]:
    engines = [("torch", 0), ("deepspeed", 1), ("deepspeed", 2)]
    out = [Case("tiny", e, z, per_group=4, prompt=192, response=64, micro=4, steps=3) for e, z in engines]
    if not quick:
        out += [
            Case("qwen2-100m", e, z, per_group=1, prompt=192, response=64, micro=2, steps=2)
            for e, z in engines
        ]
    return out


def build_model(name: str, root: Path) -> Path:
    from azr.trainer.tiny import build_tiny_model

    tiny = build_tiny_model(root / "tiny")
    if name == "tiny":
        return tiny
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    directory = root / name
    if (directory / "config.json").exists():
        return directory
    tok = AutoTokenizer.from_pretrained(tiny)
    config = Qwen2Config(
        vocab_size=32768,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def experiences(case: Case, vocab: int) -> list[Any]:
    from azr.core.experience import Experience

    rng = np.random.default_rng(0)
    return [
        Experience(
            id=f"{role}-{task_type}-{k}",
            run_id="bench",
            policy_version=0,
            role=role,
            task_type=task_type,
            prompt_ids=rng.integers(3, vocab, case.prompt, dtype=np.int32),
            response_ids=rng.integers(3, vocab, case.response, dtype=np.int32),
            behaviour_logprobs=-rng.random(case.response, dtype=np.float32) * 5,
            reward=float(rng.choice([-1.0, 0.0, 1.0])),
        )
        for role, task_type in GROUPS
        for k in range(case.per_group)
    ]


def run_case(case: Case, model_dir: Path) -> dict[str, Any]:
    """One case in this process: build the trainer, one warm-up step, ``case.steps`` measured steps."""
    from azr.trainer.config import TrainerConfig
    from azr.trainer.models import num_parameters
    from azr.trainer.trainer import Trainer

    n = len(GROUPS) * case.per_group
    cfg = TrainerConfig(
        model=str(model_dir),
        device="cpu",
        engine=case.engine,  # type: ignore[arg-type]
        zero_stage=max(case.zero_stage, 1),  # type: ignore[arg-type]
        gradient_checkpointing=False,
        mini_batch_size=n,
        micro_batch_size=case.micro,
        lr=1e-5,
    )
    trainer = Trainer(cfg)
    batch = experiences(case, vocab=len(trainer.tokenizer))
    trainer.train_step(batch)
    steps = [trainer.train_step(batch) for _ in range(case.steps)]
    step_s = statistics.median(m["perf/step_s"] for m in steps)
    tokens = n * (case.prompt + case.response)
    return {
        "case": case.name,
        **asdict(case),
        "params_m": num_parameters(trainer.engine.module) / 1e6,
        "sequences": n,
        "tokens": tokens,
        "step_s": step_s,
        "tokens_per_s": tokens / step_s,
        "peak_rss_mib": max(m["perf/peak_memory_bytes"] for m in steps) / 2**20,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'case':<26}{'params':>9}{'batch':>14}{'step s':>9}{'tokens/s':>10}{'peak RSS MiB':>14}"
    lines = [head, "-" * len(head)]
    for r in rows:
        shape = f"{r['sequences']}x{r['prompt'] + r['response']}"
        lines.append(
            f"{r['case']:<26}{r['params_m']:>8.1f}M{shape:>14}{r['step_s']:>9.2f}"
            f"{r['tokens_per_s']:>10.0f}{r['peak_rss_mib']:>14.0f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny model only")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case (JSON) and print its row
    parser.add_argument("--models", default=str(Path(tempfile.gettempdir()) / "azr-bench-models"))
    args = parser.parse_args()
    root = Path(args.models)
    if args.one:
        case = Case(**json.loads(args.one))
        print(json.dumps(run_case(case, build_model(case.model, root))))
        return
    load_start = os.getloadavg()
    rows = []
    for case in cases(args.quick):
        build_model(case.model, root)
        proc = subprocess.run(
            [sys.executable, "-m", "bench.trainer", "--models", str(root), "--one", json.dumps(asdict(case))],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(f"{case.name} failed:\n{proc.stderr[-3000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"done {case.name}: {rows[-1]['step_s']:.2f} s/step", file=sys.stderr)
    print(table(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "cpus": os.cpu_count(),
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(payload, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
