# nnsight must be imported before any transformers.models module in every test process.
import nnterp  # noqa: F401

pytest_plugins = ["pytester"]
