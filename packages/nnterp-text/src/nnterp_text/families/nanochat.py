"""nanochat: the default block with a plain MLP (``fc1``, ``activation_fn``, ``fc2``), and softcapped logits."""

from nnterp.families import default
from nnterp.families.default import ENVOYS  # noqa: F401 - the default block
from nnterp.logits import softcapped as project_on_vocab  # noqa: F401 - the family's logits

RENAME = {**default.RENAME, "mlp.fc1": "mlp.up_proj", "mlp.activation_fn": "mlp.act_fn", "mlp.fc2": "mlp.down_proj"}
