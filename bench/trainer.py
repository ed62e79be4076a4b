"""Trainer throughput and memory: ``Trainer.train_step`` against TRL's GRPO loss, one rank against two,
and the LM head over the whole sequence against the response only.

Models (random weights; only the shapes matter here):

- ``tiny``: the tiny preset's model (~3.4 M parameters, ``azr.trainer.tiny``).
- ``qwen2-100m``: a Qwen2-style model of ~100 M parameters: hidden 768, 12 layers, 12 query / 2 KV heads,
  MLP 2048, vocabulary 32768, tied embeddings.
- ``wide-vocab``: Qwen2.5's vocabulary (152,064 tokens) on a thin decoder (hidden 64, 2 layers), so that
  the LM head and its logits dominate memory as they do for a real model at long sequence lengths.

Sections (each case runs in its own process, so that the peak RSS, ``ru_maxrss``, is that case's alone):

1. engines: torch vs DeepSpeed ZeRO-1/2 on the tiny model (and on the 100M model without ``--quick``);
2. ours vs TRL: the same batch shape on the same tiny model, through ``Trainer.train_step`` and through
   ``trl.GRPOTrainer.compute_loss`` (TRL's GRPO loss, ``loss_type="bnpo"``: token-mean, like ours), each
   followed by gradient clipping and one AdamW step, micro-batches of the same size. "ours (same work)"
   takes the PPO ratio's denominator from the batch (``old_logprobs="behaviour"``), as TRL does with one
   iteration per generation; "ours (default)" first recomputes the old log-probs (one more forward pass);
3. ranks: the same global batch on one rank and on two (gloo, torch DDP and ZeRO-2, one thread each);
4. memory: ``wide-vocab`` at two sequence lengths, with and without the response-only LM head; the growth
   of the peak over the loaded model is fitted linearly in tokens and extrapolated to 8 sequences of 8k
   tokens (half prompt, half response). It covers the logits and the thin decoder's activations, not a
   real decoder's, which come on top and are the same in both modes. It is an upper bound: at these small
   sizes every token falls in one scoring chunk, whereas at 8k tokens the float32 working copies of the
   log-prob and entropy computation are bounded by ``azr.trainer.logprobs.DEFAULT_CHUNK_TOKENS`` rows.

Batches are shaped like the paper's: six (role, task type) groups with ``per_group`` responses each, every
sequence ``prompt`` + ``response`` tokens long. fp32 on the CPU, gradient checkpointing off. Reported: the
median step time over the measured steps after one warm-up step, tokens/s (real tokens of the batch / step
time) and peak memory. The load average is recorded: other work on the machine skews every number here.
TRL is an optional extra (``pip install -e .[trl]``); without it the TRL row is skipped.

    python -m bench.trainer            # all cases (several minutes on 2 cores)
    python -m bench.trainer --quick    # without the 100M model

(Run it as a module: ``python bench/trainer.py`` would put ``bench/`` first on the import path, where
``bench/queue.py`` shadows the standard library's ``queue``.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from azr.core.task import Role, TaskType

RESULTS = Path(__file__).parent / "results" / "trainer.json"
GROUPS = [(role, t) for role in Role for t in TaskType]
VERSUS = "ours vs TRL"
EXTRAPOLATE_TOKENS = 8 * 8192
"""The memory section extrapolates to 8 sequences of 8k tokens."""


@dataclass(frozen=True)
class Case:
    section: str
    label: str
    model: str
    per_group: int
    prompt: int
    response: int
    micro: int
    steps: int
    kind: str = "azr"
    """"azr" (``Trainer.train_step``) or "trl" (``GRPOTrainer.compute_loss`` + AdamW)."""
    engine: str = "torch"
    zero_stage: int = 1
    ranks: int = 1
    old_logprobs: str = "recompute"
    response_only: bool = True

    @property
    def sequences(self) -> int:
        return len(GROUPS) * self.per_group

    @property
    def tokens(self) -> int:
        return self.sequences * (self.prompt + self.response)


def cases(quick: bool) -> list[Case]:
    tiny = Case("engines", "", "tiny", per_group=4, prompt=192, response=64, micro=4, steps=3)
    out = [
        replace(tiny, label="tiny/torch"),
        replace(tiny, label="tiny/deepspeed-z1", engine="deepspeed", zero_stage=1),
        replace(tiny, label="tiny/deepspeed-z2", engine="deepspeed", zero_stage=2),
    ]
    if not quick:
        big = Case("engines", "", "qwen2-100m", per_group=1, prompt=192, response=64, micro=2, steps=2)
        out += [
            replace(big, label="qwen2-100m/torch"),
            replace(big, label="qwen2-100m/deepspeed-z1", engine="deepspeed", zero_stage=1),
            replace(big, label="qwen2-100m/deepspeed-z2", engine="deepspeed", zero_stage=2),
        ]
    versus = replace(tiny, section=VERSUS, steps=5)
    out += [
        replace(versus, label="ours (same work)", old_logprobs="behaviour"),
        replace(versus, label="ours (default)"),
    ]
    if importlib.util.find_spec("trl") is not None:
        out.append(replace(versus, label="TRL GRPOTrainer", kind="trl"))
    ranks = replace(tiny, section="ranks", steps=2)
    out += [
        replace(ranks, label="torch, 1 rank"),
        replace(ranks, label="torch DDP, 2 ranks", ranks=2),
        replace(ranks, label="ZeRO-2, 1 rank", engine="deepspeed", zero_stage=2),
        replace(ranks, label="ZeRO-2, 2 ranks", engine="deepspeed", zero_stage=2, ranks=2),
    ]
    wide = Case("memory", "", "wide-vocab", per_group=1, prompt=0, response=0, micro=6, steps=1)
    for half in (32, 64):
        for response_only in (False, True):
            head = "response-only head" if response_only else "full head"
            out.append(
                replace(
                    wide,
                    label=f"{head}, 6x{2 * half}",
                    prompt=half,
                    response=half,
                    response_only=response_only,
                )
            )
    return out


MODEL_SHAPES: dict[str, dict[str, Any]] = {
    "qwen2-100m": {
        "vocab_size": 32768,
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
    },
    "wide-vocab": {
        "vocab_size": 152064,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
}


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
        **MODEL_SHAPES[name],
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


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@dataclass
class Runner:
    """One way of taking a training step on ``case``'s batch, ready to be timed."""

    params_m: float
    step: Callable[[], float]
    """Takes one step; returns its wall time in seconds."""


def ours(case: Case, model_dir: Path, rank: int = 0) -> Runner:
    """``case`` through ``Trainer.train_step``, this rank's shard of the batch."""
    from azr.trainer.batch import shard
    from azr.trainer.config import TrainerConfig
    from azr.trainer.models import num_parameters
    from azr.trainer.trainer import Trainer

    cfg = TrainerConfig(
        model=str(model_dir),
        device="cpu",
        engine=case.engine,  # type: ignore[arg-type]
        zero_stage=case.zero_stage,  # type: ignore[arg-type]
        gradient_checkpointing=False,
        mini_batch_size=case.sequences,
        micro_batch_size=case.micro,
        lr=1e-5,
        old_logprobs=case.old_logprobs,  # type: ignore[arg-type]
        response_only_lm_head=case.response_only,
    )
    trainer = Trainer(cfg)
    batch = shard(experiences(case, vocab=len(trainer.tokenizer)), rank, case.ranks)
    return Runner(
        num_parameters(trainer.engine.module) / 1e6, lambda: trainer.train_step(batch)["perf/step_s"]
    )


def trl(case: Case, model_dir: Path) -> Runner:
    """The same batch through TRL's GRPO loss: micro-batches of ``case.micro`` rows, clip, one AdamW step."""
    import torch
    from datasets import Dataset
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from azr.trainer.models import num_parameters

    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(
            output_dir=tmp, use_cpu=True, per_device_train_batch_size=case.micro, num_generations=case.micro,
            bf16=False, report_to=[], beta=0.0, loss_type="bnpo", save_strategy="no", learning_rate=1e-5,
        )  # fmt: skip
        grpo = GRPOTrainer(
            model=str(model_dir),
            reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["unused"] * case.micro}),
        )
    model: Any = grpo.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01)
    batch = experiences(case, vocab=int(model.config.vocab_size))
    rewards = torch.tensor([e.reward for e in batch])
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-6)  # (N,) as TRR++ gives them
    micro = []
    for i in range(0, len(batch), case.micro):
        rows = range(i, min(i + case.micro, len(batch)))
        prompt = torch.tensor(np.stack([batch[r].prompt_ids for r in rows]), dtype=torch.long)  # (n, P)
        completion = torch.tensor(np.stack([batch[r].response_ids for r in rows]), dtype=torch.long)  # (n, R)
        micro.append(
            {
                "prompt_ids": prompt,
                "prompt_mask": torch.ones_like(prompt),
                "completion_ids": completion,
                "completion_mask": torch.ones_like(completion),
                "advantages": advantages[list(rows)],
            }
        )
    grpo.current_gradient_accumulation_steps = len(micro)

    def step() -> float:
        start = time.perf_counter()
        for inputs in micro:
            grpo.compute_loss(model, inputs).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    return Runner(num_parameters(model) / 1e6, step)


def measure(case: Case, runner: Runner, loaded_bytes: int) -> dict[str, Any]:
    runner.step()  # warm-up
    step_s = statistics.median(runner.step() for _ in range(case.steps))
    return {
        "params_m": runner.params_m,
        "step_s": step_s,
        "peak_rss_bytes": peak_rss_bytes(),
        "growth_bytes": peak_rss_bytes() - loaded_bytes,
    }


def rank_main(rank: int, case_json: str, model_dir: str, port: int, out: str) -> None:
    """One of ``case.ranks`` processes; rank 0 writes its numbers to ``out``."""
    import torch

    case = Case(**json.loads(case_json))
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(case.ranks),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    torch.set_num_threads(1)  # the ranks share the machine's cores
    runner = ours(case, Path(model_dir), rank)
    result = measure(case, runner, peak_rss_bytes())
    if rank == 0:
        Path(out).write_text(json.dumps(result))


def run_ranks(case: Case, model_dir: Path) -> dict[str, Any]:
    from torch.multiprocessing.spawn import spawn

    from azr.trainer.distributed import free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rank0.json"
        spawn(  # type: ignore[no-untyped-call]
            rank_main,
            args=(json.dumps(asdict(case)), str(model_dir), free_port(), str(out)),
            nprocs=case.ranks,
        )
        return dict(json.loads(out.read_text()))


def run_versus(cases: list[Case], model_dir: Path) -> list[dict[str, Any]]:
    """Several ways of taking the same step, in one process, timed in turns: the same load for each."""
    runners = [trl(c, model_dir) if c.kind == "trl" else ours(c, model_dir) for c in cases]
    for r in runners:
        r.step()  # warm-up
    times: list[list[float]] = [[] for _ in cases]
    for _ in range(cases[0].steps):
        for t, r in zip(times, runners, strict=True):
            t.append(r.step())
    return [
        row(c, {"params_m": r.params_m, "step_s": statistics.median(t), "peak_rss_bytes": None})
        for c, r, t in zip(cases, runners, times, strict=True)
    ]


def row(case: Case, result: dict[str, Any]) -> dict[str, Any]:
    return {
        **asdict(case),
        **result,
        "sequences": case.sequences,
        "tokens": case.tokens,
        "tokens_per_s": case.tokens / result["step_s"],
    }


def run_case(case: Case, model_dir: Path) -> dict[str, Any]:
    if case.ranks > 1:
        return row(case, run_ranks(case, model_dir))
    loaded = peak_rss_bytes()
    return row(case, measure(case, ours(case, model_dir), loaded))


def memory_extrapolation(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode: the peak's growth over the loaded model, fitted linearly in tokens, at 8 x 8k tokens."""
    out = []
    for response_only in (False, True):
        points = sorted((r["tokens"], r["growth_bytes"]) for r in rows if r["response_only"] == response_only)
        if len(points) < 2:
            continue
        (t0, m0), (t1, m1) = points[0], points[-1]
        per_token = (m1 - m0) / (t1 - t0)
        out.append(
            {
                "mode": "response-only head" if response_only else "full head",
                "bytes_per_token": per_token,
                "extrapolated_gib": (m0 + per_token * (EXTRAPOLATE_TOKENS - t0)) / 2**30,
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'case':<28}{'params':>9}{'batch':>10}{'step s':>9}{'tokens/s':>10}{'peak RSS MiB':>14}"
    lines: list[str] = []
    for section in dict.fromkeys(r["section"] for r in rows):
        lines += ["", f"[{section}]", head, "-" * len(head)]
        for r in (r for r in rows if r["section"] == section):
            shape = f"{r['sequences']}x{r['prompt'] + r['response']}"
            # Rows timed together in one process share its peak (None).
            peak = "shared" if r["peak_rss_bytes"] is None else f"{r['peak_rss_bytes'] / 2**20:.0f}"
            lines.append(
                f"{r['label']:<28}{r['params_m']:>8.1f}M{shape:>10}{r['step_s']:>9.2f}"
                f"{r['tokens_per_s']:>10.0f}{peak:>14}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="without the 100M model")
    parser.add_argument("--only", help="run the sections whose name contains this text")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case (JSON) and print its row
    parser.add_argument("--models", default=str(Path(tempfile.gettempdir()) / "azr-bench-models"))
    args = parser.parse_args()
    root = Path(args.models)
    if args.one:
        group = [Case(**c) for c in json.loads(args.one)]
        model_dir = build_model(group[0].model, root)
        done = run_versus(group, model_dir) if len(group) > 1 else [run_case(group[0], model_dir)]
        print(json.dumps(done))
        return
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    selected = [c for c in cases(args.quick) if not args.only or args.only in c.section]
    versus = [c for c in selected if c.section == VERSUS]
    groups = [[c] for c in selected if c.section != VERSUS] + ([versus] if versus else [])
    for group in groups:
        build_model(group[0].model, root)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.trainer",
                "--models",
                str(root),
                "--one",
                json.dumps([asdict(c) for c in group]),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(f"{group[0].section} failed:\n{proc.stderr[-3000:]}")
        rows += json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"done {group[0].section}/{group[0].label}: {rows[-1]['step_s']:.2f} s/step", file=sys.stderr)
    print(table(rows))
    memory = memory_extrapolation([r for r in rows if r["section"] == "memory"])
    for m in memory:
        print(
            f"memory, {m['mode']}: {m['bytes_per_token'] / 2**10:.0f} KiB per token -> "
            f"{m['extrapolated_gib']:.1f} GiB at 8 x 8k tokens (152k vocabulary)"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "cpus": os.cpu_count(),
        "rows": rows,
        "memory_extrapolation": memory,
    }
    RESULTS.write_text(json.dumps(payload, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
