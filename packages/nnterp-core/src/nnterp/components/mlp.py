"""The feed-forward: its contribution, its activation and its neurons."""

from typing import Any

from torch import Tensor

from ..descriptors import EProperty
from ..layouts import Neurons, Residual
from .standard import Standard

DENSE = "this block's MLP is dense: it has no experts module, so nothing is routed"
MIXTURE = (
    "a mixture of experts: each routed expert has its own activation and neurons, so no one "
    "tensor is this block's; the routing values are the Moe component's"
)


def no_dense_neurons(envoy: Any) -> str | None:
    """Why an MLP has no one activation and neuron tensor: it is a mixture of experts; else None."""
    return MIXTURE if "experts" in envoy.__dict__ else None


class Mlp(Standard):
    """A feed-forward module. Its contribution is ``mlp_output``; its width is ``intermediate_size``.

    The activation is ``act_fn`` and the down projection ``down_proj``, a
    family aliasing its own spellings (``act``, ``c_proj``, ``fc2`` ...) in
    its ``rename``.
    """

    lacks = DENSE

    @EProperty("output", "What the MLP adds to the residual stream", select=0)
    def mlp_output(self, value: Tensor) -> Residual:
        """The MLP's contribution to the residual stream, ``[batch, seq, hidden_size]``. In-place edits and assignment reach the model."""
        return value

    @EProperty("act_fn.output", "The activation's output", no_dense_neurons)
    def mlp_activation(self, value: Tensor) -> Neurons:
        """The activation's output, ``[batch, seq, intermediate_size]``.

        ``act(gate_proj(x))`` on a gated MLP, ``act(up_proj(x))`` on a plain
        one. In-place edits and assignment reach the model.
        """
        return value

    @EProperty("down_proj.input", "The neurons the down projection sums", no_dense_neurons)
    def mlp_neurons(self, value: Tensor) -> Neurons:
        """The neurons' values the down projection sums, ``[batch, seq, intermediate_size]``.

        ``act(gate_proj(x)) * up_proj(x)`` on a gated MLP; the same tensor as
        ``mlp_activation`` on a plain one. ``down_proj(mlp_neurons)`` is
        ``mlp_output`` up to what follows the projection (dropout, in eval a
        no-op). In-place edits and assignment reach the model.
        """
        return value

    @property
    def intermediate_size(self) -> int:
        """Width of this MLP's hidden layer, read off the module, else the down projection's input width."""
        for name in ("intermediate_size", "ffn_dim", "ffn_hidden_size"):
            value = getattr(self._module, name, None)
            if isinstance(value, int):
                return value
        down = self.down_proj._module
        weight = down.weight
        # nn.Linear keeps [out, in]; GPT-2's Conv1D keeps [in, out].
        return int(getattr(down, "in_features", None) or weight.shape[0])
