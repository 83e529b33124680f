"""Blocks that rescale the residual stream itself before adding a sublayer to it.

``layer_mid = a(layer_input) + attention`` and ``layer_output = b(layer_mid) + mlp``
with ``a``, ``b`` the block's rescalings (a learned vector, a depth-dependent
constant, an affine map). The contributions stay the sublayers' own outputs, as
the block adds them, and what each rescaling changes in the stream is a term of
its own, ``layer_input_rescaling = a(layer_input) - layer_input`` and
``layer_mid_rescaling = b(layer_mid) - layer_mid``, so
``layer_input + layer_input_rescaling + attention_output + layer_mid_rescaling
+ mlp_output == layer_output``. A family says what ``a`` and ``b`` are
(``rescaled_input``, ``rescaled_mid``); Doge's, Beam's and ZAYA's blocks are such.
"""

from torch import Tensor

from .layer import Layer


class RescaledLayer(Layer):
    """A block that adds each sublayer to a rescaled stream: a family overrides ``rescaled_input`` and ``rescaled_mid``."""

    def rescaled_input(self, stream: Tensor) -> Tensor:
        """What the block makes of ``layer_input`` before adding its mixers' outputs (``input_residual * stream`` on Doge)."""
        raise NotImplementedError

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        """What the block makes of ``layer_mid`` before adding its MLP's output."""
        raise NotImplementedError

    def _input_rescaling(self) -> Tensor:
        stream = self.layer_input
        return self.rescaled_input(stream) - stream

    def _mid_rescaling(self) -> Tensor:
        stream = self.layer_mid
        return self.rescaled_mid(stream) - stream

    layer_input_rescaling = Layer.layer_input_rescaling.derived(_input_rescaling)
    layer_mid_rescaling = Layer.layer_mid_rescaling.derived(_mid_rescaling)


class ScaledOutputLayer(Layer):
    """A block that multiplies its summed stream by ``output_scale()`` before returning it (Gemma 4's ``layer_scalar``).

    Every other term keeps the value the block adds, and ``layer_output_rescaling``
    is ``(output_scale - 1)`` times their sum, read off ``layer_output`` (the
    multiplication is in place, so the sum itself is never held apart). A term
    added before the multiplication reaches ``layer_output`` times the scale:
    its gradient is ``output_scale * layer_output.grad``.
    """

    def output_scale(self) -> Tensor:
        """The factor the summed stream is multiplied by, broadcastable against it."""
        raise NotImplementedError

    def _output_rescaling(self) -> Tensor:
        return (1 - 1 / self.output_scale()) * self.layer_output

    layer_output_rescaling = Layer.layer_output_rescaling.derived(_output_rescaling)
