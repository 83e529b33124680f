"""A checkpoint path checked before transformers reads it: a missing folder is not a malformed hub id.

transformers takes any string that is not a directory for a hub id, so a typo
in a local path comes back as ``Repo id must be in the form 'repo_name'...``,
and a folder without a config as a hub lookup. Each is one sentence here, with
the fix; a plausible hub id goes on to transformers unchanged.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from .errors import CheckpointNotFound, DeviceMapInvalid

#: a hub id: a name, or an owner and a name, of letters, digits, ``-``, ``_`` and ``.``
HUB_ID = re.compile(r"^[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?(?:/[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?)?$")


def check_checkpoint(model: str) -> None:
    """Raise ``CheckpointNotFound`` unless ``model`` is a directory with a config or a plausible hub id."""
    if os.path.isdir(model):
        if not os.path.isfile(os.path.join(model, "config.json")):
            raise CheckpointNotFound(
                f"{model!r} is a directory without a config.json, so it holds no saved checkpoint; pass the folder "
                "save_pretrained wrote (config.json beside the weights), or save one there with model.save_pretrained(...)"
            )
        return
    if os.path.exists(model):
        raise CheckpointNotFound(
            f"{model!r} is a file, not a checkpoint; pass the directory that holds it and its config.json"
        )
    if HUB_ID.match(model) and "--" not in model and ".." not in model and len(model) <= 96:
        return
    raise CheckpointNotFound(
        f"{model!r} is no directory (a relative path is read from the current one) and no hub id "
        "(those read 'organization/name'); check the path for a typo, or give the hub id"
    )


def first_on_disk(device_map: object) -> str:
    """Why a ``device_map`` whose first entry is ``"disk"`` cannot run, and the fix."""
    if isinstance(device_map, dict):
        fix = (
            "keep at least the embedding on a device and list it first (on a Llama, {'model.embed_tokens': 'cpu', ...}): "
            "transformers reads the map in its order"
        )
    else:
        fix = "give max_memory room for the embedding on the first device, or pass an explicit device_map that starts on a device"
    return (
        f"device_map={device_map!r} puts the first module on 'disk': transformers' pipeline sends the inputs to the device "
        f"of the map's first entry, and 'disk' holds weights, not tensors being computed; {fix}"
    )


@contextlib.contextmanager
def device_map_checked(kwargs: dict) -> Iterator[None]:
    """Around a load: ``DeviceMapInvalid`` for a ``device_map`` that starts on ``"disk"``.

    An explicit map is refused before anything loads; with ``"auto"`` the
    placement is transformers', so its pipeline's ``torch.device("disk")``
    error is the first sign, and is replaced by the same message.
    """
    device_map = kwargs.get("device_map")
    if isinstance(device_map, dict) and device_map and next(iter(device_map.values())) == "disk":
        raise DeviceMapInvalid(first_on_disk(device_map))
    try:
        yield
    except RuntimeError as error:
        if "device string: disk" not in str(error):
            raise
        raise DeviceMapInvalid(first_on_disk(device_map)) from error
