"""A family for a model nobody registered, read off its module tree.

When neither a checkpoint's ``model_type`` nor its classes name a family,
``StandardizedTransformer`` looks for the structure the families know: a list
of identical blocks, each with one attention and one MLP child and its norms,
an input embedding, a final norm beside the blocks and an output embedding.
The order in which a block's forward calls those children says its layout:
pre-norm (``norm, attention, norm, mlp``), parallel (the MLP called without a
norm of its own between the attention and it) or sandwich (a norm on each
sublayer's output too). The inferred family is the base components under the
names found; it is then proven on the checkpoint (``nnterp.proof``) before
anything is served, so a structure that looks right but computes otherwise
serves nothing wrong::

    model = StandardizedTransformer("someone/renamed-llama")   # warns: inferred, proven
    model.family.resolution      # 'inferred from the module tree: ...'
    model.proof                  # the identities, held or failed, and what they refuted
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from typing import Any, NoReturn

from torch import nn

from .components import Attention, Layer, Mlp, ParallelLayer, PostNormAttention, PostNormMlp, SandwichLayer
from .components.attention import needs_eager
from .errors import FamilyNotFound
from .family import Family

#: what a child's class name says it is
ATTENTION_CLASS = re.compile(r"attention|attn", re.I)
MLP_CLASS = re.compile(r"mlp|feedforward|feed_forward|ffn", re.I)
NORM_CLASS = re.compile(r"norm", re.I)
#: what the forward of an attention on transformers' shared interface says
ON_INTERFACE = re.compile(r"ALL_ATTENTION_FUNCTIONS|attention_interface")

#: by layout, the block component and the standard names of the block's norms in the order its forward calls them
LAYOUTS: dict[str, tuple[type, tuple[str, ...]]] = {
    "pre-norm": (Layer, ("input_layernorm", "post_attention_layernorm")),
    "parallel, one norm": (ParallelLayer, ("input_layernorm",)),
    "parallel, two norms": (ParallelLayer, ("input_layernorm", "post_attention_layernorm")),
    "sandwich": (
        SandwichLayer,
        ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"),
    ),
}
#: by layout, the call order of a block's children that means it (``n`` a norm, ``a`` the attention, ``m`` the MLP)
CALL_ORDERS = {"nanm": "pre-norm", "nam": "parallel, one norm", "nnam": "parallel, two norms", "nannmn": "sandwich"}
#: by layout, the family whose block the inferred one is (what the warning names as its sibling)
SIBLINGS = {
    "pre-norm": "the default family's pre-norm block (Llama's)",
    "parallel, one norm": "the parallel block of GPT-J and Phi",
    "parallel, two norms": "the parallel block of GPT-NeoX",
    "sandwich": "the sandwich block of Gemma-2",
}


class OwnAttention(Attention):
    """An inferred attention whose forward does not call transformers' shared interface: its contribution only."""

    def off_interface(self) -> str | None:
        return (
            f"{type(self._module).__name__}.forward computes its attention itself, not through transformers' shared "
            "interface, and the family was inferred: no operation inside it is known to be the scores or the pattern "
            "(write a family naming them: docs/adding-a-family.md)"
        )


class InferredAttention(Attention):
    """An inferred attention on the shared interface: every value as on the default family."""

    def off_interface(self) -> str | None:
        return needs_eager(self)


@dataclasses.dataclass(frozen=True)
class Structure:
    """What the module tree holds, by native path: the parts every family names."""

    blocks: str
    block_class: str
    embed_tokens: str
    norm: str
    lm_head: str
    #: the block's children: its attention, its MLP, its norms in the order the forward calls them
    attention: str
    mlp: str
    norms: tuple[str, ...]
    layout: str
    on_interface: bool
    #: the MLP's children the Mlp component reads: its down projection and its activation (None where not found)
    down_proj: str | None
    act_fn: str | None

    def describe(self) -> str:
        return (
            f"{self.layout} blocks {self.blocks}.* ({self.block_class}: attention {self.attention!r}"
            f"{' on the shared interface' if self.on_interface else ', its own softmax'}, MLP {self.mlp!r}, norms "
            f"{', '.join(map(repr, self.norms))}), embeddings {self.embed_tokens!r}, final norm {self.norm!r}, head {self.lm_head!r}"
        )


def infer(module: nn.Module, model_type: str) -> Family:
    """The family ``module``'s tree fits, named after ``model_type``; ``FamilyNotFound`` saying what was found and what was missing."""
    structure = find_structure(module, model_type)
    block, norm_names = LAYOUTS[structure.layout]
    attention: type[Attention] = InferredAttention if structure.on_interface else OwnAttention
    mlp: type[Mlp] = Mlp
    if structure.layout == "sandwich":
        attention = type(
            f"Inferred{PostNormAttention.__name__}", (PostNormAttention, attention), {"__module__": __name__}
        )
        mlp = PostNormMlp
    rename = {
        structure.blocks: "layers",
        structure.embed_tokens: "embed_tokens",
        structure.norm: "norm",
        structure.lm_head: "lm_head",
    }
    children = {structure.attention: "self_attn", structure.mlp: "mlp", **dict(zip(structure.norms, norm_names))}
    rename.update({native: standard for native, standard in children.items()})
    if structure.down_proj:
        rename[f"{structure.mlp}.{structure.down_proj}"] = f"{structure.mlp}.down_proj"
    if structure.act_fn:
        rename[f"{structure.mlp}.{structure.act_fn}"] = f"{structure.mlp}.act_fn"
    # a name the model already uses needs no alias (and nnsight refuses one that shadows it)
    rename = {native: standard for native, standard in rename.items() if native != standard}
    return Family(
        name=f"inferred:{model_type}",
        rename=rename,
        envoys={"layers.*": block, "layers.*.self_attn": attention, "layers.*.mlp": mlp},
        resolution=f"inferred from the module tree ({structure.describe()}), as {SIBLINGS[structure.layout]}",
    )


def sibling(family: Family) -> str:
    """The family an inferred family's block is, as its warning names it."""
    return next(
        (name for layout, name in SIBLINGS.items() if layout in (family.resolution or "")), "an existing family's block"
    )


def find_structure(module: nn.Module, model_type: str) -> Structure:
    """The parts of ``module``'s tree by native path; ``FamilyNotFound`` naming what was found and what was missing."""
    found: dict[str, str] = {}
    missing: list[str] = []
    listed = _block_list(module)
    if listed is None:
        _refuse(model_type, found, ["a list of identical blocks (an nn.ModuleList of one class)"])
    path, blocks = listed
    block = blocks[0]
    found["blocks"] = f"{path} ({len(blocks)} x {type(block).__name__})"
    names = _paths(module)
    vocab = getattr(getattr(module, "config", None), "vocab_size", None)
    embed = names.get(id(given)) if (given := _called(module, "get_input_embeddings")) is not None else None
    head = names.get(id(given)) if (given := _called(module, "get_output_embeddings")) is not None else None
    # a model that does not say which they are: the embedding and the linear layer as wide as the vocabulary, outside the blocks
    outside = [(name, child) for name, child in module.named_modules() if name and not name.startswith(f"{path}.")]
    embed = embed or next(
        (name for name, child in outside if isinstance(child, nn.Embedding) and child.num_embeddings == vocab), None
    )
    head = head or next(
        (name for name, child in reversed(outside) if isinstance(child, nn.Linear) and child.out_features == vocab),
        None,
    )
    parent = path.rpartition(".")[0]
    norm = next(
        (
            f"{parent}.{name}".lstrip(".")
            for name, child in _named_children(module.get_submodule(parent) if parent else module)
            if NORM_CLASS.search(type(child).__name__)
        ),
        None,
    )
    for what, value in (
        ("an input embedding (get_input_embeddings)", embed),
        ("an output embedding (get_output_embeddings)", head),
        (f"a final norm beside {path}", norm),
    ):
        if value is None:
            missing.append(what)
    children = dict(_named_children(block))
    attention = _child(children, ATTENTION_CLASS, lambda child: _has_projections(child, ("q", "k", "v")))
    mlp = _child(
        children,
        MLP_CLASS,
        lambda child: sum(isinstance(grand, nn.Linear) for grand in child.children()) >= 2 and attention is not child,
    )
    norms = [name for name, child in children.items() if NORM_CLASS.search(type(child).__name__)]
    for what, value in (
        ("an attention child (a class named *Attention*, or q/k/v projections)", attention),
        ("an MLP child (a class named *MLP*, or two linear layers)", mlp),
    ):
        if value is None:
            missing.append(what)
    if embed:
        found["embeddings"] = embed
    if head:
        found["head"] = head
    if norm:
        found["final norm"] = norm
    if attention:
        found["attention"] = f"{attention} ({type(children[attention]).__name__})"
    if mlp:
        found["mlp"] = f"{mlp} ({type(children[mlp]).__name__})"
    found["norms"] = ", ".join(norms) or "none"
    if missing or embed is None or head is None or norm is None or attention is None or mlp is None:
        _refuse(model_type, found, missing)  # each None is in missing: the checks name it for the reader
    roles = {attention: "a", mlp: "m", **{name: "n" for name in norms}}
    order = "".join(roles[name] for name in _call_order(type(block), roles))
    layout = CALL_ORDERS.get(order)
    if layout is None or len(norms) != order.count("n"):
        found["call order"] = order or "unreadable"
        _refuse(
            model_type,
            found,
            [
                f"a block layout the families know (call orders {', '.join(CALL_ORDERS)}: n a norm, a the attention, m the MLP)"
            ],
        )
    called = [name for name in _call_order(type(block), {name: "n" for name in norms})]
    mlp_module = children[mlp]
    return Structure(
        blocks=path,
        block_class=type(block).__name__,
        embed_tokens=embed,
        norm=norm,
        lm_head=head,
        attention=attention,
        mlp=mlp,
        norms=tuple(called),
        layout=layout,
        on_interface=bool(ON_INTERFACE.search(_source(type(children[attention]).forward))),
        down_proj=_down_projection(mlp_module, module),
        act_fn=next((name for name, child in mlp_module.named_children() if _is_activation(child)), None),
    )


def _refuse(model_type: str, found: dict[str, str], missing: list[str]) -> NoReturn:
    seen = "; ".join(f"{what}: {value}" for what, value in found.items()) or "nothing the families know"
    raise FamilyNotFound(
        f"no nnterp family serves model type {model_type!r}, by its type or its classes, and its module tree fits none: "
        f"found {seen}; missing {'; '.join(missing)}. Write a family for it (docs/adding-a-family.md) and register it "
        "under the 'nnterp.families' entry-point group, or pass family= to StandardizedTransformer"
    )


def _block_list(module: nn.Module) -> tuple[str, nn.ModuleList] | None:
    """The longest ``nn.ModuleList`` whose children are all one class, and its path."""
    best: tuple[str, nn.ModuleList] | None = None
    for path, child in module.named_modules():
        if (
            isinstance(child, nn.ModuleList)
            and len(child)
            and len({type(block) for block in child}) == 1
            and (best is None or len(child) > len(best[1]))
        ):
            best = (path, child)
    return best


def _paths(module: nn.Module) -> dict[int, str]:
    return {id(child): path for path, child in module.named_modules() if path}


def _called(module: nn.Module, method: str) -> Any:
    """``module.<method>()``; None where the model lacks the method or does not implement it."""
    try:
        return getattr(module, method)()
    except (NotImplementedError, AttributeError):
        return None


def _named_children(module: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name, child) for name, child in module.named_children() if child is not None]


def _child(children: dict[str, nn.Module], by_class: re.Pattern, by_shape: Any) -> str | None:
    named = [name for name, child in children.items() if by_class.search(type(child).__name__)]
    if len(named) == 1:
        return named[0]
    shaped = [name for name, child in children.items() if by_shape(child)]
    return shaped[0] if len(shaped) == 1 else None


def _has_projections(module: nn.Module, letters: tuple[str, ...]) -> bool:
    names = {name for name, child in module.named_children() if isinstance(child, nn.Linear)}
    return all(any(name.startswith(letter) for name in names) for letter in letters)


def _source(function: Any) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""


def _call_order(block: type[nn.Module], children: dict[str, str]) -> list[str]:
    """The children of ``children`` that ``block.forward`` calls as ``self.<name>(...)``, in the order they run.

    Statements in order, and within one the arguments before the call they are
    passed to: ``x + self.attn(self.norm(x))`` calls ``norm`` first.
    """
    try:
        tree = ast.parse(_source(block.forward))
    except SyntaxError:
        return []
    calls: list[str] = []

    class Calls(ast.NodeVisitor):
        def visit_Call(self, node: ast.Call) -> None:
            self.generic_visit(node)
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in children
            ):
                calls.append(func.attr)

    Calls().visit(tree)
    return calls


def _down_projection(mlp: nn.Module, root: nn.Module) -> str | None:
    """The MLP's linear child back to the stream's width, the last of them where several are."""
    width = getattr(getattr(root, "config", None), "hidden_size", None)
    linear = [
        name for name, child in mlp.named_children() if isinstance(child, nn.Linear) and child.out_features == width
    ]
    called = _call_order(type(mlp), {name: "p" for name in linear}) or linear
    return called[-1] if called else None


def _is_activation(module: nn.Module) -> bool:
    kind = type(module)
    return (
        kind.__module__.startswith(("torch.nn.modules.activation", "transformers.activations"))
        or "Activation" in kind.__name__
    )
