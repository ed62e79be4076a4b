"""``bench.answers`` counts held-out answers by family and reads whether each restates its given value."""

from __future__ import annotations

import json
from pathlib import Path

from azr.core.task import Task, TaskType
from azr.solver.gold import gold_completion
from bench.answers import restates, score

AFFINE = Task(
    type=TaskType.DEDUCTION, program="def f(x):\n    return 2 * x + 7", inputs=("13",), outputs=("33",)
)
LAST = Task(
    type=TaskType.ABDUCTION, program="def f(xs):\n    return xs[-1]", inputs=("[3, 4]",), outputs=("4",)
)


def test_the_gold_answer_restates_and_a_miscopy_does_not() -> None:
    gold = gold_completion(AFFINE)
    assert restates(AFFINE, gold)
    assert not restates(AFFINE, gold.replace("\n13\n", "\n14\n", 1))
    assert not restates(AFFINE, "<think> 13 </think> <answer>\n```output\n33\n```\n</answer>")


def test_answers_are_counted_by_type_family_and_restatement(tmp_path: Path) -> None:
    def line(task: Task, text: str, correct: bool) -> str:
        return json.dumps({"task": task.to_dict(), "correct": int(correct), "responses": [{"text": text}]})

    miscopied = gold_completion(LAST).replace("\n4\n", "\n5\n", 1)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "\n".join([line(AFFINE, gold_completion(AFFINE), True), line(LAST, miscopied, True)]) + "\n"
    )
    scores = score(answers)
    assert scores.tasks == {"deduction/int_affine": 1, "abduction/list_reduce": 1}
    assert scores.solved == {"deduction/int_affine": 1, "abduction/list_reduce": 1}
    assert (scores.restated["deduction"], scores.restated_solved["deduction"]) == (1, 1)
    assert (scores.restated["abduction"], scores.other_solved["abduction"]) == (0, 1)
