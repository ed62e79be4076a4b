"""Which held-out tasks a checkpoint gets wrong: accuracy by program family, and the restatement's copy rate.

Reads the files ``azr eval --suite heldout --answers FILE`` writes (one per checkpoint, labelled on the
command line) and prints, for each task type and warm-start program family (``azr.warmstart.programs``),
how many tasks each checkpoint solved. A second table reads the solver's reasoning: the gold answer
(``azr.solver.gold``) opens by restating the given value (deduction's input, abduction's output) on a line
of its own, and a model taught that format must copy it exactly before it can compute from it. It counts
the answers (each task's first, the greedy one by default) whose reasoning is that exact restatement, and
how many of those, and of the others, are correct: an answer that miscopies its input is wrong for a
reason no arithmetic explains.

    azr eval --checkpoint ~/.cache/azr/models/tiny-warm --suite heldout --answers warm.jsonl
    azr eval --checkpoint runs/a/checkpoints/latest --suite heldout --answers a.jsonl
    python -m bench.answers warm=warm.jsonl self-play=a.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

from rich.console import Console
from rich.table import Table

from azr.core.task import Task, TaskType
from azr.solver.gold import gold_completion
from azr.warmstart.programs import family_of

RESULTS = Path(__file__).parent / "results" / "answers.json"
RESTATED = (TaskType.DEDUCTION, TaskType.ABDUCTION)
"""The types whose gold reasoning restates a given value (induction's restates the message)."""


@dataclass
class Scores:
    """One checkpoint's answers, counted: ``solved[type/family]`` of ``tasks[type/family]``, and of the
    answers to ``RESTATED`` types, ``restated[type]`` copy the given value exactly (``restated_solved``
    of them are correct) while ``other_solved[type]`` of the rest are correct."""

    tasks: Counter[str] = field(default_factory=Counter)
    solved: Counter[str] = field(default_factory=Counter)
    restated: Counter[str] = field(default_factory=Counter)
    restated_solved: Counter[str] = field(default_factory=Counter)
    other_solved: Counter[str] = field(default_factory=Counter)


def restates(task: Task, response: str) -> bool:
    """Whether ``response`` opens with the gold answer's reasoning: the given value, copied exactly."""
    gold = gold_completion(task)
    return response.lstrip().startswith(gold[: gold.index("</think>") + len("</think>")])


def score(path: Path) -> Scores:
    scores = Scores()
    for line in path.read_text().splitlines():
        answer = json.loads(line)
        task = Task.from_dict(answer["task"])
        solved = answer["correct"] > 0
        key = f"{task.type.value}/{family_of(task.program) or 'other'}"
        scores.tasks[key] += 1
        scores.solved[key] += solved
        if task.type in RESTATED:
            kind = task.type.value
            if restates(task, answer["responses"][0]["text"]):
                scores.restated[kind] += 1
                scores.restated_solved[kind] += solved
            else:
                scores.other_solved[kind] += solved
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("answers", nargs="+", help="LABEL=FILE, a file of `azr eval --answers`")
    args = parser.parse_args()
    labelled = [item.partition("=") for item in args.answers]
    if bad := [label + sep + path for label, sep, path in labelled if not (label and sep and path)]:
        parser.error(f"give each file as LABEL=FILE: {', '.join(bad)}")
    runs = {label: score(Path(path)) for label, _, path in labelled}

    console = Console()
    by_family = Table(title="held-out tasks solved, by type and program family")
    for column in ("type/family", "tasks", *runs):
        by_family.add_column(column, justify="left" if column == "type/family" else "right")
    keys = sorted({key for scores in runs.values() for key in scores.tasks})
    for key in keys:
        tasks = max(scores.tasks[key] for scores in runs.values())
        by_family.add_row(key, str(tasks), *(str(scores.solved[key]) for scores in runs.values()))
    console.print(by_family)

    copying = Table(title="answers (each task's first) whose reasoning restates the given value exactly")
    for column in ("run", "type", "restated", "solved when restated", "solved otherwise"):
        copying.add_column(column, justify="left" if column in ("run", "type") else "right")
    for label, scores in runs.items():
        for kind in (t.value for t in RESTATED):
            answered = sum(n for key, n in scores.tasks.items() if key.startswith(f"{kind}/"))
            restated = scores.restated[kind]
            copying.add_row(
                label,
                kind,
                f"{restated}/{answered}",
                f"{scores.restated_solved[kind]}/{restated}",
                f"{scores.other_solved[kind]}/{answered - restated}",
            )
    console.print(copying)

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    counts = {label: {f.name: dict(getattr(s, f.name)) for f in fields(Scores)} for label, s in runs.items()}
    RESULTS.write_text(json.dumps(counts, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
