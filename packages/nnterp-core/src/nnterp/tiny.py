"""How a family declares its tiny checkpoint: a model type and the config fields that shrink it.

A family package lists each under the ``nnterp.checkpoints`` entry-point group
(one ``TinyConfig``, named as the checkpoint, or a table of them), so the
conformance kit writes and checks it without knowing the family by name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: the sizes every tiny checkpoint shares, by config field; a config gets those it declares
SIZES: dict[str, Any] = {
    "vocab_size": 320,
    "hidden_size": 64,
    "n_embd": 64,
    "d_model": 64,
    "intermediate_size": 128,
    "n_inner": 128,
    "ffn_dim": 128,
    "ffn_hidden_size": 128,
    "num_hidden_layers": 2,
    "n_layer": 2,
    "num_layers": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 256,
    "n_positions": 256,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "pad_token_id": 0,
}
#: fields whose class default of None means "derived", which a size would override wrongly
KEEP_NONE = {"head_dim", "num_key_value_heads", "q_lora_rank"}
#: per-layer lists a tiny model keeps one layer of each kind of
PER_LAYER = ("layer_types", "mlp_layer_types")


@dataclass(frozen=True)
class TinyConfig:
    """A checkpoint small enough for a CPU test: ``model_type``'s config shrunk, with ``fields`` on top.

    With ``shrink`` (the default) every field of ``SIZES`` the config class
    declares is set first (a width of 64, two layers, four heads, a vocabulary
    of 320 ...), and per-layer lists (``layer_types``) keep one layer of each
    kind; ``fields`` then override (a dict for a nested config, such as
    ``text_config``, overrides its shrunk sizes). The config is built through its class, so
    the fields it derives follow. ``load`` holds keyword arguments the
    checkpoint is meant to be loaded with (eager attention by default).
    """

    model_type: str
    fields: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=lambda: {"attn_implementation": "eager"})
    shrink: bool = True

    def config(self) -> Any:
        """The shrunk config."""
        from transformers import CONFIG_MAPPING, AutoConfig

        if not self.shrink:
            return AutoConfig.for_model(self.model_type, **self.fields)
        cls = CONFIG_MAPPING[self.model_type]
        merged = shrunk_fields(cls)
        for name, value in self.fields.items():
            shrunk = merged.get(name)
            if isinstance(value, dict) and shrunk is not None and hasattr(shrunk, "to_diff_dict"):
                # fields of a nested config (text_config=...) go on top of its own shrunk sizes, those of the
                # model type the fields name where they name one
                sub = CONFIG_MAPPING[value["model_type"]] if "model_type" in value else type(shrunk)
                value = sub(**{**shrunk_fields(sub), **value})
            merged[name] = value
        layers = merged.get("num_hidden_layers", merged.get("num_layers"))
        for name in PER_LAYER:
            kinds = merged.get(name)
            if name not in self.fields and kinds and layers and len(kinds) != layers:
                merged[name] = [kinds[index % len(kinds)] for index in range(layers)]
        return cls(**merged)


def shrunk_fields(cls: type) -> dict[str, Any]:
    """The ``SIZES`` a config class declares (not through an alias), and its per-layer lists cut to one of each kind."""
    declared = {item.name for item in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    aliases = set(getattr(cls, "attribute_map", {}))
    default = cls()
    sizes = {
        name: value
        for name, value in SIZES.items()
        if name in declared and name not in aliases and not (name in KEEP_NONE and _default(default, name) is None)
    }
    for name, sub in getattr(cls, "sub_configs", {}).items():
        # a wrapper's nested configs (text_config, vision_config ...) shrink the same way; one declared through
        # AutoConfig shrinks as the class its default instance holds
        if not dataclasses.is_dataclass(sub):
            sub = type(_default(default, name))
        if isinstance(sub, type) and dataclasses.is_dataclass(sub) and name in declared:
            sizes[name] = sub(**shrunk_fields(sub))
    for name in PER_LAYER:
        kinds = _default(default, name)
        # a per-layer list a config only derives (a read-only property, Mamba's layer_types) is not set
        if isinstance(kinds, (list, tuple)) and kinds and name in declared and name not in aliases:
            distinct = list(dict.fromkeys(kinds))
            while len(distinct) < sizes.get("num_hidden_layers", 2):
                distinct.append(distinct[-1])
            sizes[name] = distinct
            for layers in ("num_hidden_layers", "num_layers"):
                if layers in sizes:
                    sizes[layers] = len(distinct)
    return sizes


def _default(config: Any, name: str) -> Any:
    """A config's value for ``name``, or None: also where a per-layer config refuses one global value."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - transformers' AmbiguousGlobalPerLayerAttributeError and kin
        return None
