"""The compose cluster fixture: skipped with the reason when the engine, Compose v2 or the images of this
tree are missing (``make images`` builds them once; a test run never builds them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compose.cluster import Cluster, missing_prerequisite

# A smaller tiny preset, as in tests/services/test_selfplay_run.py, so that a step takes seconds: the
# random-weight tiny model (the cluster is under test, not the warm start), and a checkpoint every step,
# so that a restarted learner resumes from the step it was killed in.
SMALL_RUN = (
    "--set model=tiny --set selfplay.batch_size=1 --set rollout.max_new_tokens=16 "
    "--set roles.n_learnability_rollouts=2 "
    "--set trainer.checkpoint_interval=1"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = missing_prerequisite()
    if reason is not None:
        pytest.skip(reason)
    workdir: Path = tmp_path_factory.mktemp("compose")
    cluster = Cluster.create(
        workdir,
        project=f"azr-test-{os.getpid()}",
        # More steps than the module ever reaches: a run that finished stays stopped, and the fault tests
        # need a live one.
        settings={"AZR_STEPS": "100000", "AZR_SELFPLAY_ARGS": SMALL_RUN, "AZR_RAY_WORKERS": "1"},
    )
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
