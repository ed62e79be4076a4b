"""What one solver rollout came to, as the proposer's learnability reward needs it."""

from __future__ import annotations

from enum import StrEnum


class SolveOutcome(StrEnum):
    SOLVED = "solved"  # judged correct
    UNSOLVED = "unsolved"  # judged wrong, rejected, or unparseable
    UNJUDGED = "unjudged"  # the executor could not judge it (infra error): it says nothing either way
