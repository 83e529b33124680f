"""A remote trace sends nnterp's classes by name, to a server checked to have the same nnterp.

nnsight's ``pull_env`` registers every module it finds outside site-packages for
pickling by value, which for an editable install is all of nnterp. By value,
nnsight rebuilds functions from their source, which loses the ``__class__`` cell
a zero-argument ``super()`` needs (``StandardizedTransformer._batch_size`` fails
on any server), and ships the functions that have no source (the ``__init__``,
``__eq__``, ``__hash__`` a dataclass writes, the ``__new__`` of a namedtuple) as
bytecode, which another Python runs as garbage: a ``Call`` left on the model by
an earlier trace crashed a 3.12 server with a segmentation fault while it
unpickled a 3.11 client's request. So every ``nnterp*`` module goes by
reference, and before a request leaves, the server's ``GET /env`` (read once
per host) must show the nnterp packages the request names, at this client's
versions; otherwise ``RemoteEnvironmentError`` says what differs and what to do.
"""

from __future__ import annotations

import contextlib
import pickletools
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from typing import TYPE_CHECKING, Any, cast

from .errors import RemoteEnvironmentError

if TYPE_CHECKING:
    from nnsight.intervention.backends.remote import RemoteBackend as _Backend
else:
    _Backend = object  # a mixin: the backend class comes second (checked_class)

#: by host, the ``/env`` each server answered (fetched once: a server's packages do not change under a session)
ENVIRONMENTS: dict[str, dict] = {}


def ours(module: str) -> bool:
    """Whether a module (dotted or not) belongs to one of nnterp's packages: ``nnterp``, ``nnterp_text`` ..."""
    return module.split(".", 1)[0].startswith("nnterp")


@contextlib.contextmanager
def by_reference() -> Iterator[None]:
    """nnterp's modules out of cloudpickle's by-value registry for the block, whatever registered them; put back after."""
    from cloudpickle.cloudpickle import _PICKLE_BY_VALUE_MODULES as registry

    held = {name for name in registry if ours(name)}
    registry.difference_update(held)
    try:
        yield
    finally:
        registry.update(held)


def globals_named(payload: bytes) -> set[tuple[str, str]]:
    """Every ``(module, qualname)`` a pickle stream loads by name (``GLOBAL``, ``STACK_GLOBAL``), memo lookups resolved."""
    memo: dict[int, Any] = {}
    pushed: list[Any] = []  # the last values pushed, enough for STACK_GLOBAL's two operands
    found = set()
    for opcode, arg, _ in pickletools.genops(payload):
        name = opcode.name
        if name in ("FRAME", "PROTO"):  # framing, no value: a frame may fall between a global's two strings
            continue
        if name == "GLOBAL":
            module, _, qualname = cast(str, arg).partition(" ")  # GLOBAL's argument is "module qualname"
            found.add((module, qualname))
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            if len(pushed) >= 2 and isinstance(pushed[-2], str) and isinstance(pushed[-1], str):
                found.add((pushed[-2], pushed[-1]))
            pushed.append(None)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[cast(int, arg)] = pushed[-1] if pushed else None  # the memo index
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(cast(int, arg)))
        else:
            pushed.append(arg if isinstance(arg, str) and "UNICODE" in name else None)
        del pushed[:-2]
    return found


def needed(payload: bytes) -> set[str]:
    """The top-level nnterp modules a payload names, and ``nnterp`` itself."""
    return {module.split(".", 1)[0] for module, _ in globals_named(payload) if ours(module)} | {"nnterp"}


def family_packages(family: Any) -> set[str]:
    """The top-level modules defining a family (and a wrapper's text family) in the registry: ``{"nnterp_text"}`` for llama.

    Llama's payload names only nnterp's own classes, yet a server without its package is not one that serves llama.
    A family the registry does not hold (one passed as ``family=``) adds nothing.
    """
    from .registry import catalog, families

    defined = [catalog().modules.get(family.name), families().get(family.text_family) if family.text_family else None]
    return {module.split(".", 1)[0] for module in defined if module and ours(module)}


@cache
def distribution(module: str) -> str:
    """The distribution a top-level module comes from: ``nnterp`` -> ``nnterp-core``, ``nnterp_text`` -> ``nnterp-text``.

    An editable install maps no import name to its distribution, so ours fall back to the workspace's naming.
    """
    found = _import_names().get(module)
    if found:
        return found[0]
    return "nnterp-core" if module == "nnterp" else module.replace("_", "-")


@cache
def _import_names() -> Mapping[str, list[str]]:
    return packages_distributions()  # a walk over every installed distribution: once


def installed(module: str) -> str | None:
    """This client's version of a top-level module's distribution, None where it is not installed as one."""
    try:
        return version(distribution(module))
    except PackageNotFoundError:
        return None


def served(packages: dict, module: str) -> str | None:
    """The server's version of a top-level module: by import name (a wheel), else by distribution (an editable install)."""
    return packages.get(module) or packages.get(distribution(module))


def environment(host: str) -> dict:
    """The server's ``GET /env`` (``python_version``, ``packages`` by import name), fetched once per host."""
    if host not in ENVIRONMENTS:
        import httpx

        try:
            response = httpx.get(f"{host}/env", timeout=httpx.Timeout(10.0, read=60.0))
            response.raise_for_status()
            ENVIRONMENTS[host] = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise RemoteEnvironmentError(
                f"nnterp did not send the request: it could not read {host}/env ({error}), which says whether the "
                "server has nnterp's packages at this client's versions. Check the host (remote=True uses "
                "nnsight's CONFIG.API.HOST or NDIF_HOST; a URL string names another) and that the server is up."
            ) from error
    return ENVIRONMENTS[host]


def require(host: str, modules: set[str]) -> None:
    """Refuse, naming both sides, unless the server at ``host`` has each of ``modules`` at this client's version."""
    env = environment(host)
    packages = env.get("packages", {})
    wrong = []
    for module in sorted(modules):
        mine, theirs = installed(module), served(packages, module)
        if theirs is None:
            wrong.append(f"it has no {distribution(module)} (import {module})")
        elif mine is not None and theirs != mine:
            major = module == "nnterp" and mine is not None and theirs.split(".")[0] != mine.split(".")[0]
            other = f" (probably PyPI's nnterp {theirs}, another library under the same import name)" if major else ""
            wrong.append(f"its {module} is {theirs}, this client's {distribution(module)} is {mine}{other}")
    if not wrong:
        return
    client = ", ".join(f"{distribution(m)} {installed(m) or 'not installed'}" for m in sorted(modules))
    server = ", ".join(f"{distribution(m)} {served(packages, m) or 'missing'}" for m in sorted(modules))
    pins = " ".join(f"{distribution(m)}=={installed(m)}" for m in sorted(modules) if installed(m))
    raise RemoteEnvironmentError(
        f"nnterp did not send the request: the server at {host} cannot run it: {'; '.join(wrong)}. "
        "nnterp's classes travel by name, so the server needs the same nnterp packages as this client.\n"
        f"  client: Python {sys.version.split()[0]}, nnsight {_version('nnsight')}, {client}\n"
        f"  server: Python {env.get('python_version', '?').split()[0]}, nnsight {packages.get('nnsight', 'missing')}, "
        f"{server}\n"
        f'Install these on the server ({pins}), or run where they are: remote=False here, or remote="http://host:port" '
        "for a server of your own with them installed."
    )


def _version(distribution_name: str) -> str:
    try:
        return version(distribution_name)
    except PackageNotFoundError:
        return "not installed"


class Checked(_Backend):
    """Mixed into nnsight's ``RemoteBackend``: the payload names nnterp by reference, and the server is checked before it is sent."""

    #: top-level modules the server needs beyond those the payload names (the model's family's package)
    nnterp_packages: frozenset[str] = frozenset()

    def _serialize(self, tracer: Any) -> bytes:
        from nnsight.ndif import pull_env

        pull_env()  # before the block: it registers once per process, and what it registers of nnterp is undone here
        with by_reference():
            blob = super()._serialize(tracer)
        payload = blob
        if self.compress:
            import zstandard

            payload = zstandard.ZstdDecompressor().decompress(blob)
        require(self.host, needed(payload) | self.nnterp_packages)
        return blob


@cache
def checked_class(backend_class: type) -> type:
    """``backend_class`` with ``Checked`` in front: one class per nnsight backend class."""
    return type(f"Checked{backend_class.__name__}", (Checked, backend_class), {"__module__": __name__})


def checked(backend: Any, family: Any) -> Any:
    """A ``RemoteBackend`` (``remote=True`` or a host URL) made ``Checked`` for ``family``; any other (``remote="local"``) as it is."""
    from nnsight.intervention.backends.remote import RemoteBackend

    if isinstance(backend, RemoteBackend):
        if not isinstance(backend, Checked):
            backend.__class__ = checked_class(type(backend))  # type: ignore[arg-type]  # mypy reads a class's __hash__ as unbound: no class is Hashable to it
        backend.nnterp_packages = frozenset(family_packages(family))
    return backend
