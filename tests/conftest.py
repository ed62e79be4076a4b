"""Suite-wide options: ``--skip-slow`` skips end-to-end tests marked ``slow`` (CI runs them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from azr.trainer.tiny import build_tiny_model


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skip-slow", action="store_true", help="skip tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--skip-slow"):
        return
    skip = pytest.mark.skip(reason="--skip-slow given")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's tiny model (random weights, its own tokenizer), built once per test session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
