"""The ``model`` a vision family's test file reads outside its test classes: each checkpoint its classes name."""

import pytest
from nnterp_vision.testing import VisionFamilyTests


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
