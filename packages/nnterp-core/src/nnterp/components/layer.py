"""The decoder block: the residual stream entering it, between its sublayers, and leaving it."""

import ast
import inspect
import textwrap
from functools import cache
from typing import Any, ClassVar

from torch import Tensor, nn

from ..descriptors import EProperty
from ..errors import MissingModule
from ..layouts import Residual
from ..reasons import ABSENT_TERMS, INPUT_NOT_RESCALED, MID_NOT_RESCALED, NO_PER_LAYER_INPUT, OUTPUT_NOT_RESCALED
from .standard import Standard

#: the residual terms a block may add besides its sublayers' contributions, in the order its forward makes them
RESIDUAL_TERMS = ("layer_input_rescaling", "layer_mid_rescaling", "per_layer_input_output", "layer_output_rescaling")


class Layer(Standard):
    """A decoder block. Its hidden states are ``layer_output``, whatever the block returns.

    Its children under their standard names: ``self_attn`` (an ``Attention``),
    ``mlp`` (an ``Mlp``) and the norms ``input_layernorm`` and
    ``post_attention_layernorm`` where the family has them. The boundaries
    between ``layer_input`` and ``layer_output`` are defined on the pre-norm
    block, ``x + attn(norm1(x))`` then ``+ mlp(norm2(.))``; a family built
    otherwise points them at its own modules or marks them unavailable.
    """

    lacks = "a block's own values are its residual stream's"

    #: whether the block returns a tuple whose first element is the stream, where its forward's return statements
    #: do not say (``returns_a_tuple`` reads them first, so a release that changes the return moves with it).
    #: False here; a family whose block's return the source leaves unclear sets it (BLOOM, Falcon, MPT ...)
    returns_tuple: ClassVar[bool] = False
    #: the standard sublayers a block may lack, in the order the block calls them: a hybrid's blocks have one
    #: mixer or the other (a parallel hybrid's both), an SSM's no MLP. A family whose block calls them in another
    #: order says so (Falcon-H1: ``linear_attn`` first)
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
            raise MissingModule(self, name, f"no {name} module on this block")
        try:
            found = super().__getattr__(name)
        except AttributeError:
            if name in self.SUBLAYERS:
                raise MissingModule(self, name, f"no {name} module on this block") from None
            raise
        if found is None and name in self.SUBLAYERS:
            # a block that keeps the mixer it does not run as None (GraniteMoeHybrid's self_attn on a Mamba block)
            raise MissingModule(self, name, f"no {name} module on this block")
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

    @EProperty("input", "What rescaling layer_input changes in the stream", unavailable=INPUT_NOT_RESCALED)
    def layer_input_rescaling(self, value: Tensor) -> Residual:
        """What the block's rescaling of ``layer_input`` adds to the stream, ``[batch, seq, hidden_size]``.

        On a block that adds its mixer to ``s * layer_input`` (Doge's learned
        ``input_residual``, Beam's depth scale, ZAYA's affine ResidualScaling)
        it is ``s * layer_input - layer_input``, so that
        ``layer_mid == layer_input + layer_input_rescaling + attention_output``.
        Derived from ``layer_input`` and the block's scale where the block
        starts: read-only (write ``layer_input`` or the contribution instead).
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

    @EProperty(
        "post_attention_layernorm.input", "What rescaling layer_mid changes in the stream", unavailable=MID_NOT_RESCALED
    )
    def layer_mid_rescaling(self, value: Tensor) -> Residual:
        """What the block's rescaling of ``layer_mid`` adds to the stream, ``[batch, seq, hidden_size]``.

        ``s * layer_mid - layer_mid`` on a block that adds its MLP to
        ``s * layer_mid``, so that ``layer_output == layer_mid +
        layer_mid_rescaling + mlp_output`` there. Derived where ``layer_mid``
        is read: read-only.
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

    @EProperty("output", "What the per-layer input adds to the stream", unavailable=NO_PER_LAYER_INPUT)
    def per_layer_input_output(self, value: Tensor) -> Residual:
        """What the block's per-layer-input branch adds to the stream, ``[batch, seq, hidden_size]``.

        Gemma 3n and Gemma 4 feed every block a per-layer input made from the
        token ids and the embeddings; after the MLP the block gates it by the
        stream, projects it to the hidden size, norms it and adds it: this is
        that norm's output, a term of ``layer_output`` like the contributions
        (on Gemma 3n's several streams, added to every stream but the first).
        In-place edits and assignment reach the model.
        """
        return value

    @EProperty("output", "What rescaling the summed stream changes in it", unavailable=OUTPUT_NOT_RESCALED)
    def layer_output_rescaling(self, value: Tensor) -> Residual:
        """What the block's rescaling of its summed stream adds to it, ``[batch, seq, hidden_size]``.

        Gemma 4 multiplies the stream by ``layer_scalar`` after adding every
        term: this is ``layer_scalar - 1`` times that sum, so the other terms
        keep their own values and ``layer_output`` is still their sum with
        this one. Derived where the sum is made: read-only.
        """
        return value

    @EProperty("output", "The residual stream leaving this block", select=0)
    def layer_output(self, value: Tensor) -> Residual:
        """The residual stream leaving this block, ``[batch, seq, hidden_size]``.

        What the next block's ``layer_input`` receives. In-place edits and
        assignment reach the model; a tuple-returning block keeps its other
        elements.
        """
        return value

    # -- settings naming the values above (read off them, so a renamed value cannot leave one behind) ------------

    #: the first block value the forward serves after the mixers: where ``toolkit.cache.block_order`` places the
    #: mixers' own values. ``layer_mid`` here; a block whose values come in another order names its own
    AFTER_MIXERS: ClassVar[str] = layer_mid.name
    #: the first block value the forward serves after the MLP: where ``block_order`` places the MLP's own values.
    #: ``per_layer_input_output`` here; ``StreamLayer`` (``layer_output``) and Gemma 3n's AltUp block set their own
    AFTER_MLP: ClassVar[str] = per_layer_input_output.name
    #: what reads each norm's output, by the norm output's value name, as a path from the block (``{mixer}`` is its
    #: ``self_attn`` or ``linear_attn``): the kit's ``norm_outputs_feed_the_sublayers`` holds each norm output equal to
    #: that input. The default is the pre-norm block's, which calls its sublayers with them; a family whose norm sits
    #: inside a sublayer (pre-LN BERT, LongCat-Flash) names the module the norm hands on to
    norm_readers: ClassVar[dict[str, str]] = {
        attention_norm_output.name: "{mixer}.input",
        mlp_norm_output.name: "mlp.input",
    }

    def skip(self, hidden: Tensor) -> None:
        """Skip this block, handing ``hidden`` on as its residual stream.

        The block does not run; ``hidden`` takes the place of its
        ``layer_output``, packed the way the block returns it. Call it inside
        a trace, before anything in the block is read.
        """
        super().skip((hidden, None) if self.returns_a_tuple() else hidden)

    def skip_breaks(self) -> str | None:
        """Why skipping this block breaks a later one (a later block reuses keys and values its attention stores), or
        None: the kit's ``skip_hands_on_hidden`` skips another block instead."""
        return None

    def carries(self) -> str | None:
        """What this block hands the next one beside the stream (a top-k selection later layers reuse), or None.

        Its ``skip`` hands on what it was given instead; a run that skips it
        together with every block before it would hand on nothing, so the
        toolkit's packed sweeps run such blocks rather than skip them.
        """
        return None

    def read_beside_the_stream(self) -> str | None:
        """Why later blocks read this block's input by another way than the stream (a state it hands on, the embeddings
        every block takes), or None.

        Where one does, the gradient reaching ``layer_input`` is more than what
        flows back through the block from ``layer_output``, and the kit's
        ``gradient_flows_back_through_each_block`` says so instead of holding it.
        """
        return None

    def contributions(self) -> tuple[str, ...]:
        """The terms ``layer_output`` is the sum of besides ``layer_input``, in the order the block computes them.

        Each mixer's ``attention_output`` (a parallel hybrid's block, Falcon-H1's,
        has two), then ``mlp.mlp_output`` where it has an MLP, and between them
        the residual terms the block has (``RESIDUAL_TERMS``: a rescaling of the
        stream, a per-layer input). ``layer_input`` plus them is
        ``layer_output``: the identity the kit's ``contribution`` and the proof
        at load hold, and the terms ``decompose_resid`` splits the stream into.
        """
        input_term, mid_term, *last_terms = RESIDUAL_TERMS
        mixers = tuple(f"{name}.attention_output" for name in self.SUBLAYERS if name != "mlp" and hasattr(self, name))
        mlp = ("mlp.mlp_output",) if hasattr(self, "mlp") else ()
        order = (input_term, *mixers, mid_term, *mlp, *last_terms)
        return tuple(name for name in order if name not in RESIDUAL_TERMS or self.has_term(name))

    def mid_terms(self) -> tuple[str, ...]:
        """The terms ``layer_mid`` is the sum of besides ``layer_input``: the rescaling of ``layer_input`` where the
        block has one, then each mixer's ``attention_output``."""
        return tuple(
            name for name in self.contributions() if name == RESIDUAL_TERMS[0] or name.endswith(".attention_output")
        )

    def read_again(self) -> tuple[str, ...]:
        """The terms (besides the mixers', which ``layer_mid`` holds) that a later part of the block reads back.

        Added to a stream no value serves, which the block then computes from,
        so their gradient is not ``layer_output``'s: the MLP's where a
        per-layer-input branch gates on the stream after it (Gemma 4),
        LongCat-Flash's first MLP and second attention. The kit's
        ``gradients_follow_the_stream`` leaves them out.
        """
        terms = self.contributions()
        if "per_layer_input_output" not in terms:
            return ()
        return tuple(
            term for term in terms[: terms.index("per_layer_input_output")] if not term.endswith(".attention_output")
        )

    def has_term(self, name: str) -> bool:
        """Whether this block adds the residual term ``name`` (one of ``RESIDUAL_TERMS``), served or not."""
        return type(self).values()[name].reason(self) not in ABSENT_TERMS

    @property
    def index(self) -> int:
        """This block's position in the model's block list."""
        return int(self.path.rsplit(".", 1)[-1])

    def returns_a_tuple(self) -> bool:
        """Whether this block returns a tuple led by the stream: what its forward's return statements say, else ``returns_tuple``."""
        said = returned_tuple(type(self._module))  # type: ignore[arg-type]  # mypy reads a class's __hash__ as unbound: no class is Hashable to it
        return self.returns_tuple if said is None else said


@cache
def returned_tuple(block: type[nn.Module]) -> bool | None:
    """What ``block.forward``'s return statements say: a tuple (True), a bare tensor (False), or nothing clear (None).

    Read off the installed release's source, so a release that changes what the
    block returns moves with it (return annotations are no guide: Doge's says a
    tuple and returns a tensor). ``return (hidden, weights)``, ``return (x,) +
    rest`` and a name last bound to such a container are tuples; a name last
    bound to arithmetic (``hidden = residual + hidden``) is a tensor; a call, or
    returns that disagree, say nothing.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(block.forward)))
    except (OSError, TypeError, SyntaxError):
        return None
    bound: dict[str, ast.expr] = {}
    kinds = set()
    for node in sorted(ast.walk(tree), key=lambda node: (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound[node.targets[0].id] = node.value
        elif isinstance(node, ast.Return) and node.value is not None:
            value: ast.expr | None = node.value
            if isinstance(value, ast.Name):
                value = bound.get(value.id)
            kinds.add(_kind(value))
    return kinds.pop() if len(kinds) == 1 else None


def _kind(value: ast.expr | None) -> bool | None:
    """A container (True), arithmetic without calls (False), or anything else (None)."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return True
    if isinstance(value, ast.BinOp):
        sides = {_kind(value.left), _kind(value.right)}
        if True in sides:
            return True
        return None if _calls(value) else False
    return None


def _calls(value: ast.expr) -> bool:
    return any(isinstance(node, ast.Call) for node in ast.walk(value))
