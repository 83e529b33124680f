"""A feed-forward written inline in its block, ``fc2(act(fc1(norm(x))))``, with no module of its own: XGLM, OPT, BioGPT.

The block still gets an ``mlp``, so ``model.layers[i].mlp.mlp_output`` means
what it means on every other family: an ``InlineMlp`` envoy over a stand-in
module that groups the block's own ``fc1``, activation and ``fc2`` under the
standard names. The stand-in belongs to no model (the checkpoint's weights and
the block's forward are untouched) and the model never calls it, so its values
are keyed from the block; ``up_proj``, ``act_fn`` and ``down_proj`` are the
block's own envoys, and their values are served as usual.
"""

from typing import Any, ClassVar

from nnterp import Layer, Mlp, Unavailable, unavailable

from torch import Tensor, nn

NO_MODULE = (
    "the MLP is arithmetic in the block's forward, not a module the model calls, so it has no input, "
    "output or skip of its own; read mlp_output, mlp_activation, mlp_neurons, or its up_proj, act_fn, down_proj"
)


class InlineMlpModules(nn.Module):
    """The block's own feed-forward modules, grouped under the standard names; the model never calls this."""

    #: the modules ``__init__`` adds by name (annotated only, so nn.Module still serves them)
    up_proj: nn.Module
    act_fn: nn.Module
    down_proj: nn.Module

    def __init__(self, **modules: nn.Module) -> None:
        super().__init__()
        for name, module in modules.items():
            self.add_module(name, module)

    def forward(self, hidden: Tensor) -> Tensor:
        """The feed-forward as the block computes it, without its dropouts: for calling ad hoc."""
        return self.down_proj(self.act_fn(self.up_proj(hidden)))


def _no_module_value(name: str) -> property:
    def read(self: Any) -> Any:
        raise Unavailable(self, name, NO_MODULE)

    return property(read)


class InlineMlp(Mlp):
    """An MLP that is arithmetic in its block: its contribution is an operation of the block's forward.

    A family's subclass points ``mlp_output`` at what the block adds
    (``Mlp.mlp_output.at("../source.<operation>.output", select=None)``);
    ``mlp_activation`` and ``mlp_neurons`` are the activation's output and
    ``down_proj``'s input, as on any plain MLP.
    """

    mlp_output = unavailable("no operation of the block's forward is named as the MLP's contribution for this family")
    output, input, inputs = (_no_module_value(name) for name in ("output", "input", "inputs"))

    def skip(self, replacement: Any) -> None:
        raise Unavailable(self, "skip", NO_MODULE)


class InlineMlpLayer(Layer):
    """A block holding its feed-forward's modules itself: its ``mlp`` is an ``InlineMlp`` over them.

    The class is the one a family's ``envoys`` give ``layers.*.mlp``. The block's
    forward is instrumented when it is built (``sourced``), since the MLP's
    contribution is read in it while it runs.
    """

    sourced = True
    #: the block's modules the feed-forward is made of, by standard name
    mlp_modules: ClassVar[dict[str, str]] = {"up_proj": "fc1", "act_fn": "activation_fn", "down_proj": "fc2"}

    mlp_input = Layer.mlp_input.at("mlp.up_proj.input")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        grouped = self._grouped()
        path = f"{self.path}.mlp"
        envoy_class = self._resolve_envoy_class(grouped, path)
        if not issubclass(envoy_class, InlineMlp):
            envoy_class = InlineMlp
        mlp = envoy_class(
            grouped, path=path, interleaver=self.interleaver, rename=self._rename, envoys=self._envoys, parent=self
        )
        object.__setattr__(self, "mlp", mlp)
        self._children.append(mlp)

    def _grouped(self) -> InlineMlpModules:
        return InlineMlpModules(**{name: getattr(self._module, native) for name, native in self.mlp_modules.items()})

    def _update(self, module: Any) -> None:
        # real weights replace meta ones: group the new modules
        super()._update(module)
        self.mlp._update(self._grouped())
