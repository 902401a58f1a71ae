"""pytest setup: the gearbox module and CLI of one build (default build/, or
$GEARBOX_BUILD_DIR), so `pytest tests/python` works without PYTHONPATH."""
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GEARBOX_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(BUILD / "python"))


@pytest.fixture
def repo():
    return REPO


@pytest.fixture
def cli():
    return str(BUILD / "bin" / "gearbox")


@pytest.fixture
def env():
    """The environment for subprocesses: the module on PYTHONPATH."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(BUILD / "python") + os.pathsep + e.get("PYTHONPATH", "")
    return e
