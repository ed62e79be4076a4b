"""Task suites to score a checkpoint on: the built-in ones, and any file of executor job lines.

Built-in suites:

- ``heldout``: 100 tasks of each type from the project's program families (``azr.warmstart.programs``),
  drawn from the stream labelled "heldout", which nothing else draws from, and fixed in the repository
  as ``suites/heldout.jsonl``; the warm start drops every task that shares a program and an input with
  it. It is data the project generated, not data to regenerate: changing the families does not change
  it. Its first 20 tasks of each type were the whole suite of the first learning runs; the stream was
  drawn further, unchanged, because at 20 tasks a type one task is 5 points and the standard error of an
  accuracy near one half is 11, larger than the gains to be measured.
- ``zero-seed``: the zero-seed triplet of every task type (the identity program), a sanity check.

``without_messages`` turns any suite into its ablation without the induction messages (``azr eval
--without-messages``): what a solver then gets right it inferred from the input/output pairs alone, so the
two scores tell how much of its induction accuracy the message carries.

Files (``--tasks FILE.jsonl``) hold one JSON object per line: an executor job (its ``task`` object is
read, as ``azr executor run`` takes it) or a bare task object. Outputs in a file are ignored: the gold
answers are what the executor computes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from azr.core.task import Task, TaskType, zero_seed

BUILT_IN = ("heldout", "zero-seed")


def load_suite(name: str) -> list[Task]:
    """The tasks of a built-in suite, without gold outputs."""
    if name == "zero-seed":
        return [zero_seed(t).with_outputs(()) for t in TaskType]
    if name == "heldout":
        text = resources.files("azr.eval").joinpath("suites/heldout.jsonl").read_text(encoding="utf-8")
        return parse_task_lines(text, source="heldout")
    raise ValueError(f"unknown suite {name!r}; choose one of {', '.join(BUILT_IN)} or pass --tasks FILE")


def load_tasks_file(path: Path) -> list[Task]:
    return parse_task_lines(path.read_text(encoding="utf-8"), source=str(path))


def parse_task_lines(text: str, *, source: str) -> list[Task]:
    """Tasks from JSON lines (jobs or bare tasks); blank lines are skipped, outputs dropped."""
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            body = data["task"] if isinstance(data, dict) and "task" in data else data
            tasks.append(Task.from_dict(body).with_outputs(()))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{source}:{number}: not a task or an executor job: {exc}") from exc
    if not tasks:
        raise ValueError(f"{source} holds no task")
    return tasks


def without_messages(tasks: Sequence[Task]) -> list[Task]:
    """``tasks`` with every induction message removed: the solver prompt then has no message block."""
    return [t.without_message() if t.type is TaskType.INDUCTION else t for t in tasks]


def task_line(task: Task) -> str:
    """``task`` as an executor ``validate`` job line (the suite file format)."""
    body = {"type": task.type.value, "program": task.program, "inputs": list(task.inputs)}
    if task.message:
        body["message"] = task.message
    return json.dumps({"id": task.id, "op": "validate", "task": body}, ensure_ascii=True)
