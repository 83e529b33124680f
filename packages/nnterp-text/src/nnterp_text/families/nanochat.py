"""nanochat: the default block with a plain MLP (``fc1``, ``activation_fn``, ``fc2``), and softcapped logits."""

from nnterp import TinyConfig
from nnterp.families import default
from nnterp.logits import softcapped

FAMILY = default.FAMILY.replace(
    name="nanochat",
    model_types=("nanochat",),
    rename={
        **default.FAMILY.rename,
        "mlp.fc1": "mlp.up_proj",
        "mlp.activation_fn": "mlp.act_fn",
        "mlp.fc2": "mlp.down_proj",
    },
    project_on_vocab=softcapped,
    tiny={"nanochat": TinyConfig("nanochat")},
)
