"""The decoder block: the residual stream entering it, between its sublayers, and leaving it."""

from typing import Any, ClassVar

from torch import Tensor

from ..descriptors import EProperty
from ..errors import MissingModule
from ..layouts import Residual
from .standard import Standard


class Layer(Standard):
    """A decoder block. Its hidden states are ``layer_output``, whatever the block returns.

    Its children under their standard names: ``self_attn`` (an ``Attention``),
    ``mlp`` (an ``Mlp``) and the norms ``input_layernorm`` and
    ``post_attention_layernorm`` where the family has them. The boundaries
    between ``layer_input`` and ``layer_output`` are defined on the pre-norm
    block, ``x + attn(norm1(x))`` then ``+ mlp(norm2(.))``; a family built
    otherwise points them at its own modules or marks them unavailable.
    """

    #: whether the block returns a tuple whose first element is the stream
    returns_tuple: ClassVar[bool] = False
    #: the standard sublayers a block may lack, in the order the block calls them: a hybrid's blocks have one
    #: mixer or the other (a parallel hybrid's both), an SSM's no MLP
    SUBLAYERS: ClassVar[tuple[str, ...]] = ("self_attn", "linear_attn", "mlp")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mixer = self.__dict__.get("self_attn")
        if mixer is not None and mixer is self.__dict__.get("linear_attn"):
            # a recurrent mixer the model itself calls self_attn (Kimi's delta blocks) goes by linear_attn alone,
            # so a block has one mixer or the other, as on every hybrid
            del self.__dict__["self_attn"]

    def __getattr__(self, name: str) -> Any:
        if name == "self_attn" and "linear_attn" in self.__dict__:
            raise MissingModule(self.path, name, f"no {name} module on this block")
        try:
            found = super().__getattr__(name)
        except AttributeError:
            if name in self.SUBLAYERS:
                raise MissingModule(self.path, name, f"no {name} module on this block") from None
            raise
        if found is None and name in self.SUBLAYERS:
            # a block that keeps the mixer it does not run as None (GraniteMoeHybrid's self_attn on a Mamba block)
            raise MissingModule(self.path, name, f"no {name} module on this block")
        return found

    @EProperty("input", "The residual stream entering this block")
    def layer_input(self, value: Tensor) -> Residual:
        """The residual stream entering this block, before any of its norms, ``[batch, seq, hidden_size]``.

        The block's first argument. With the contributions it is the identity
        the values are defined by:
        ``layer_input + self_attn.attention_output + mlp.mlp_output == layer_output``.
        In-place edits and assignment reach the model.
        """
        return value

    @EProperty("input_layernorm.output", "What the attention is called with: its pre-norm's output")
    def attention_norm_output(self, value: Tensor) -> Residual:
        """The attention's pre-norm output, ``[batch, seq, hidden_size]``: ``input_layernorm.output``."""
        return value

    @EProperty("post_attention_layernorm.input", "The stream between the attention and the MLP", assign_in_place=True)
    def layer_mid(self, value: Tensor) -> Residual:
        """The residual stream between the two sublayers, ``[batch, seq, hidden_size]``.

        ``layer_input + attention_output``, read where the MLP's pre-norm is
        called with it. A parallel block has no such stream and marks it
        unavailable. In-place edits and assignment reach the model: the block
        holds the stream twice (the residual it adds the MLP to, and the
        norm's input), so an assignment is copied into the live tensor and
        reaches both, as an in-place edit does.
        """
        return value

    @EProperty("post_attention_layernorm.output", "What the MLP's pre-norm hands on")
    def mlp_norm_output(self, value: Tensor) -> Residual:
        """The MLP's pre-norm output, ``[batch, seq, hidden_size]``: ``post_attention_layernorm.output``."""
        return value

    @EProperty("mlp.input", "What the MLP is called with")
    def mlp_input(self, value: Tensor) -> Residual:
        """The MLP's input, ``[batch, seq, hidden_size]``; ``mlp_norm_output`` where nothing sits between them."""
        return value

    @EProperty("output", "The residual stream leaving this block", select=0)
    def layer_output(self, value: Tensor) -> Residual:
        """The residual stream leaving this block, ``[batch, seq, hidden_size]``.

        What the next block's ``layer_input`` receives. In-place edits and
        assignment reach the model; a tuple-returning block keeps its other
        elements.
        """
        return value

    def skip(self, hidden: Tensor) -> None:
        """Skip this block, handing ``hidden`` on as its residual stream.

        The block does not run; ``hidden`` takes the place of its
        ``layer_output``, packed the way the block returns it. Call it inside
        a trace, before anything in the block is read.
        """
        super().skip((hidden, None) if self.returns_tuple else hidden)


