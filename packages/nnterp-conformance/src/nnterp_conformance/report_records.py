"""What a families-report record says: its statuses, and the reads over a list of records the report and its files share."""

from __future__ import annotations

from typing import Any

#: the statuses a record can have
PASS, FAIL, OUT_OF_REACH = "pass", "fail", "out_of_reach"

#: the identities by which every block's stream is a sum of named terms: one stream's (``layer_input`` plus the
#: block's ``contributions()``), or several streams' (a hyper-connection's mixing)
DECOMPOSITIONS = ("contribution", "streams_follow_from_mixing")
#: the values whose reasons say why a block does not decompose, in the order they are looked at
STREAM_TERMS = (
    "layer_input",
    "self_attn.attention_output",
    "linear_attn.attention_output",
    "mlp.mlp_output",
    "layer_output",
)

#: the dtype of the report's half-precision profile
HALF = "bfloat16"


def decomposes(entry: dict[str, Any]) -> bool:
    """Whether a checkpoint's record holds a decomposition identity: every block's stream is the sum of its named terms."""
    return any(entry["checks"].get(name) == PASS for name in DECOMPOSITIONS)


def weak_passes(records: list[dict[str, Any]]) -> dict[str, str]:
    """The passing model types some of whose checkpoints do not decompose, each with why (a value's reason)."""
    found = {}
    for entry in records:
        if entry["status"] != PASS:
            continue
        for one in [entry, *entry.get("variants", [])]:
            if not decomposes(one):
                reasons = [one["unavailable"][name] for name in STREAM_TERMS if name in one["unavailable"]]
                found[entry["model_type"]] = reasons[0] if reasons else one["skipped"].get("contribution", "")
                break
    return found


def checkpoint_records(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each checked checkpoint's own record, by checkpoint name, out of the merged records."""
    found = {}
    for entry in records:
        for one in [entry, *entry.get("variants", [])]:
            if "checkpoint" in one:
                found[one["checkpoint"]] = {key: value for key, value in one.items() if key != "variants"}
    return found
