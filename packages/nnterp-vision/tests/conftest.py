"""The ``model`` a vision family's test file reads outside its test classes: each checkpoint its classes name.

Puts this folder on ``sys.path`` for ``vision_harness``, the tests' own base and breaks (pytest imports test files
with ``--import-mode=importlib``, which adds no folder to the path).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vision_harness import VisionFamilyTests  # noqa: E402 - importable once the folder is on the path


def checkpoints_tested(module) -> list[str]:
    """The checkpoints of a test file's ``VisionFamilyTests`` subclasses, in the order the file declares them."""
    classes = [tests for tests in vars(module).values() if isinstance(tests, type) and issubclass(tests, VisionFamilyTests)]
    return [tests.checkpoint for tests in classes if getattr(tests, "checkpoint", None)]


def pytest_generate_tests(metafunc):
    """A file's module-level tests run once on each checkpoint its classes test (the classes parametrize themselves)."""
    if metafunc.cls is not None or "model" not in metafunc.fixturenames:
        return
    checkpoints = checkpoints_tested(metafunc.module)
    if not checkpoints:
        raise pytest.UsageError(f"{metafunc.module.__name__}: no VisionFamilyTests subclass names a checkpoint to test")
    metafunc.parametrize("model", checkpoints, indirect=True, scope="module")


@pytest.fixture(scope="module")
def model(request, tiny_model):
    """The tiny model of one checkpoint the file tests, loaded once a session (the classes' own tests get the same one)."""
    return tiny_model(request.param)
