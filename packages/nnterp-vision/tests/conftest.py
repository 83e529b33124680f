"""The ``model`` a vision family's test file reads outside its test class: the checkpoint that class names."""

import pytest
from nnterp_vision.testing import VisionFamilyTests


@pytest.fixture(scope="module")
def model(request, tiny_model):
    """The tiny model of the file's one ``VisionFamilyTests`` subclass, loaded once a session (the class's own tests
    get the same one); a file of several checkpoints parametrizes a ``model`` of its own."""
    classes = [tests for tests in vars(request.module).values() if isinstance(tests, type) and issubclass(tests, VisionFamilyTests)]
    classes = [tests for tests in classes if tests is not VisionFamilyTests]
    if len(classes) != 1:
        names = ", ".join(tests.__name__ for tests in classes) or "none"
        raise pytest.UsageError(f"{request.module.__name__}: one VisionFamilyTests subclass names the model, not {names}")
    return tiny_model(classes[0].checkpoint)
