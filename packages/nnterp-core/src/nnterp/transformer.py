"""StandardizedTransformer: any causal LM under one vocabulary, on its own HuggingFace modules."""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nnsight.modeling.transformers import TransformersModel

from torch import Tensor

from . import _pitfalls as pitfalls
from . import _tensor_parallel as tensor_parallel
from ._cache import given_cache, restore, snapshot
from ._gradients import GUARD as GRAD_GUARD
from ._invokes import continues_a_cache, in_model_dtype, padded_processor_invoke
from ._loading import check_checkpoint, device_map_checked
from ._patches.nnsight import ALIASING, CACHE_KEYWORD
from ._prompts import check_invokes, check_tokens
from ._resolution import config_dict, resolve
from ._versions import unproven
from ._writes import Call
from .components.blocks import Blocks
from .components.standard import blocks_support
from .descriptors import EProperty, declared_values, refutation
from .errors import FamilyMismatch, Unavailable, UnprovenFamily
from .family import Family, as_family
from .inference import sibling
from .layouts import Logits
from .legacy import nnterp13
from .logits import unembed

if TYPE_CHECKING:
    from .proof import Proof


_PREPROCESSOR_FLAGS = {
    "tokenizer": "_load_tokenizer",
    "image_processor": "_load_image_processor",
    "feature_extractor": "_load_feature_extractor",
    "processor": "_load_processor",
}


def with_tensor_parallel(envoys: dict, model: Any, load_kwargs: dict, holder: Any = None) -> dict:
    """``envoys`` plus nnsight's tensor-parallel envoys when this load shards the model (``distributed_config=``, ``tp_plan=``).

    nnsight puts its ``TPEnvoy`` (whole tensors from a sharded linear called ad
    hoc, as ``project_on_vocab`` does) only on a load that passes no ``envoys``
    of its own; every nnterp load passes the family's, so they are merged here.
    They are keyed by module type and the family's by path, so neither hides
    the other. nnsight's tensor-parallel code is bridged to this transformers
    for the life of ``holder``, the model being built (``nnterp._tensor_parallel.bridge``).
    """
    from nnsight.modeling.tp.envoys import tp_envoys

    if not tensor_parallel.wanted(model, load_kwargs):
        return envoys
    if holder is not None:
        tensor_parallel.bridge(holder)
    return {**tp_envoys(), **envoys}


@nnterp13  # nnterp 1.3's names (layers_output, attentions_output ...), each warning once: nnterp/legacy.py
class StandardizedTransformer(TransformersModel):
    """A HuggingFace causal LM whose insides carry the same names and meanings on every family.

    ``model`` is a hub id, a local directory or a loaded ``nn.Module``. The
    ``Family`` serving its ``model_type`` is found through the ``nnterp.families``
    entry points (or passed as ``family=``); its ``rename`` and ``envoys`` are
    handed to nnsight, with any ``rename=``/``envoys=`` given here taking
    precedence, and it loads with its ``task`` and ``load_defaults``. The
    rest (``attn_implementation``, ``device_map``, ``dispatch``, ``dtype``,
    ``tokenizer`` ...) goes to nnsight's ``TransformersModel`` unchanged::

        model = StandardizedTransformer("meta-llama/Llama-3.2-1B", attn_implementation="eager")
        with model.trace("The Eiffel Tower is in"):
            stream = model.layers[5].layer_output.save()
            pattern = model.layers[5].self_attn.attention_probabilities.save()

    Root values: ``embed_tokens``, ``layers``, ``norm``, ``lm_head`` (the
    modules), ``logits``; sizes ``hidden_size``, ``num_layers``,
    ``num_heads``, ``vocab_size``; ``family`` (the ``Family`` it loaded with) and
    ``support()``.

    A hub id or a directory is built on the meta device, and the weights load
    at the first trace (or at ``model.dispatch()``; ``dispatch=True`` loads
    them here), which replaces the modules: a weight, a module or
    ``model._module`` taken before then is the empty meta one, and stays so.
    Take such handles after a trace or after ``model.dispatch()``;
    ``model.dispatched`` says whether the weights are in.
    """

    def __init__(
        self,
        model: Any,
        *args: Any,
        family: Family | ModuleType | str | None = None,
        rename: dict | None = None,
        envoys: dict | None = None,
        task: str | None = None,
        verify: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if isinstance(model, str):
            model = os.path.expanduser(model)
            check_checkpoint(model)
        family = as_family(family) or resolve(model, kwargs)
        if family.engine != "transformers":
            raise FamilyMismatch(
                f"the {family.name} family names {family.engine}'s modules (engine={family.engine!r}); "
                "StandardizedTransformer takes a family of transformers' modules (nnterp.vllm.StandardizedVLLM takes this one)"
            )
        # a family whose names depend on the checkpoint's config (LLaVA: a CLIP or a Pixtral tower) names the one serving it
        if family.for_config is not None:
            family = family.for_config(config_dict(model, kwargs)) or family
        # a wrapper takes its text family's block names, components and hooks, found through the registry
        family = family.with_text_family()
        self.family = family
        for key, value in family.load_defaults.items():
            kwargs.setdefault(key, value)
        task = task or family.task
        rename = {**family.rename, **(rename or {})}
        # nnsight takes the first matching path key, so the caller's come first
        envoys = {**(envoys or {}), **{key: value for key, value in family.envoys.items() if key not in (envoys or {})}}
        # block lists index as lists do, out of range an IndexError with the count
        envoys.setdefault("layers", Blocks)
        envoys = with_tensor_parallel(envoys, model, kwargs, holder=self)
        with ALIASING, device_map_checked(kwargs):
            super().__init__(model, *args, task=task, rename=rename, envoys=envoys, **kwargs)
        family.built(self)
        missing = [name for name in family.root_names if name not in self.__dict__]
        if missing:
            raise FamilyMismatch(
                f"the {family.name} family gives this {type(self._module).__name__} no {', '.join(missing)}: "
                "its rename does not fit this model's module names (print(model) shows them)"
            )
        #: the proof at load (``nnterp.proof.Proof``) where one ran, else None
        self.proof: Proof | None = None
        reasons = _verify_reasons(family, verify)
        if reasons:
            self.verify(reasons if reasons != [ASKED] else None)

    def verify(self, because: list[str] | None = None) -> Any:
        """Prove the family on this checkpoint now (``nnterp.proof``): the values an identity refutes become ``Unavailable``.

        A few short traces on a fixed prompt, on the real weights; returns the
        ``Proof`` (also kept as ``model.proof``). Warns (``UnprovenFamily``)
        with what it found when ``because`` says why the load asked for it.
        """
        from .proof import prove

        self.proof = prove(self)
        if because or not self.proof.holds:
            warnings.warn(_proof_message(self, because or [ASKED]), UnprovenFamily, stacklevel=3)
        return self.proof

    def _update(self, module: Any) -> None:
        super()._update(module)
        family = self.__dict__.get("family")
        if family is not None:
            family.built(self)

    def _loaded_preprocessors(self) -> set:
        # transformers 5.23 lists a task's pipeline class by its dotted name, which
        # nnsight 0.8.1 reads flags off as if it were the class, so it sources no
        # tokenizer for a meta build of a local directory; resolve the name first.
        from transformers.pipelines import check_task

        try:
            _, targeted, _ = check_task(self.task)
        except Exception:  # noqa: BLE001 - unknown task: nnsight's own fallback
            return super()._loaded_preprocessors()
        impl = targeted["impl"]
        if isinstance(impl, str):
            module, _, name = impl.rpartition(".")
            impl = getattr(importlib.import_module(module), name)
        return {attr for attr, flag in _PREPROCESSOR_FLAGS.items() if getattr(impl, flag, False)}

    def _batch_size(self, *inputs: Any, **kwargs: Any) -> int:
        # asked of each invoke as it is added, before anything is tokenized: the first place a prompt is seen
        check_invokes([(inputs, kwargs)])
        return super()._batch_size(*inputs, **kwargs)

    def _batch(self, invokes: list, fn: Any) -> tuple:
        # a family may rewrite an invoke before it is batched (PaliGemma's processor refuses text without an
        # image, so its text-only invokes go to the tokenizer): prepare_invoke(model, inputs, kwargs)
        prepare = self.family.prepare_invoke
        if prepare is not None:
            invokes = [prepare(self, inputs, kwargs) for inputs, kwargs in invokes]
        generating = "generate" in (fn if isinstance(fn, str) else getattr(fn, "__name__", ""))
        prompts = _prompts_of(invokes)
        invokes = [padded_processor_invoke(self, inputs, kwargs, generating) for inputs, kwargs in invokes]
        # nnsight numbers a left-padded row's tokens from 0; a family whose model
        # counts positions otherwise (RoBERTa from padding_idx + 1) says how to map them
        with CACHE_KEYWORD:  # nnsight's encode_pretokenized knows the cache under transformers' cache= too
            args, kwargs = super()._batch(invokes, fn)
        check_tokens(self, args, kwargs, prompts)
        # straight into the instance's dict: plain values, which Envoy.__setattr__ would only hand on there (once a trace)
        self.__dict__["_nnterp_call"] = Call.of(args, kwargs, generating)
        self.__dict__["_nnterp_cache"] = snapshot(given_cache(kwargs))
        kwargs = in_model_dtype(self, kwargs)
        if self.family.on_fresh_call is not None and not continues_a_cache(kwargs):
            self.family.on_fresh_call(self)
        shift = self.family.position_ids
        if shift is not None and "position_ids" in kwargs:
            kwargs["position_ids"] = shift(self, kwargs["position_ids"])
        return args, kwargs

    def interleave(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        # .grad outside a backward pass raises for the length of the run; a call that fails leaves no worker
        # behind for the next trace (a refusal before the forward too) and the cache it was handed as it was
        # a failure nnsight words in its own terms (a NameError across invokes, gradients read in forward order)
        # is said in standard names; a name bound to a tensor and not saved says so where it is used next
        state = self.__dict__
        state["_nnterp_cache"] = None
        workers = list(self.interleaver.mediators)
        held = [dict(dict.items(worker.lcls)) for worker in workers]  # what each name held before the run
        # nnterp._gradients.guarded() written out: a generator-based context manager costs more than the swap itself
        previous = Tensor.grad
        Tensor.grad = GRAD_GUARD  # type: ignore[assignment]  # a descriptor on the class; torch's stubs declare an attribute
        try:
            result = super().interleave(fn, *args, **kwargs)
        except BaseException as error:
            self.interleaver.cancel()
            restore(state["_nnterp_cache"])
            better = pitfalls.translated(error, workers, self)
            if better is None:
                raise
            traceback = getattr(error, "__intervention_tb__", None) or error.__traceback__
            setattr(better, "__intervention_tb__", traceback)  # noqa: B010 - nnsight's attribute, which exceptions do not declare
            raise better.with_traceback(traceback) from None
        finally:
            state["_nnterp_cache"] = None
            Tensor.grad = previous
        pitfalls.keep_unsaved(workers, held)
        return result

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """nnsight's ``trace``; inside another trace of this model, ``NestedTrace`` (batch prompts as invokes instead)."""
        # nnsight fails inside the run, in its own terms; refused here, at the inner trace's line
        if self.interleaver.interleaving:
            raise pitfalls.nested_trace()
        return super().trace(*args, **kwargs)

    def _remoteable_model_key(self) -> str:
        # nnsight spells a repo id as the Hub does (one Hub request) before it keys the request; a checkpoint
        # directory is its own spelling, which a server on this machine or on a shared disk loads by the same path
        if isinstance(self.repo_id, str) and os.path.isdir(self.repo_id):
            from nnsight.modeling.huggingface import _ID_CACHE

            _ID_CACHE.setdefault(self.repo_id, self.repo_id)
        return super()._remoteable_model_key()

    def _remote_backend(self, remote: bool | str, blocking: bool, job_id: str | None, verbose: bool) -> Any:
        # remote=True or a host: nnterp's classes go by name, to a server whose /env shows the same nnterp (nnterp/_remote.py)
        from ._remote import checked

        return checked(super()._remote_backend(remote, blocking, job_id, verbose), self.family)

    # -- values ------------------------------------------------------------------

    @EProperty("output", "The next-token logits")
    def logits(self, value: Any) -> Logits:
        """The model's logits, ``[batch, seq, vocab_size]``: ``lm_head(norm(layers[-1].layer_output))``.

        Assign to replace them in the model's output; in-place edits land too.
        """
        return value.logits

    @logits.postprocess
    def logits(self, value: Tensor) -> Any:
        from nnsight.intervention.interleaver import Mediator

        output = Mediator.value(f"{self.path}.output")
        output.logits = value
        return output

    def project_on_vocab(self, hidden: Tensor) -> Tensor:
        """Logits for a residual stream, ``[batch, seq, hidden_size] -> [batch, seq, vocab_size]``.

        What the model does to its last ``layer_output``: the final norm, then
        ``lm_head`` (a family that scales or caps its logits supplies its own
        ``project_on_vocab``). Inside a trace it is an ad hoc call, which serves
        nothing and moves no location.
        """
        refuted = refutation(self, "project_on_vocab")
        if refuted is not None:
            raise Unavailable(self, "project_on_vocab", refuted)
        return (self.family.project_on_vocab or unembed)(self, hidden)

    def steer(
        self, layers: Any, vector: Tensor, factor: float = 1.0, *, token_positions: Any = None, batch_index: Any = None
    ) -> None:
        """Add ``factor * vector`` to the stream leaving each of ``layers``, inside a trace: ``nnterp.toolkit.steer``."""
        from .toolkit.steering import steer

        steer(self, layers, vector, factor, token_positions=token_positions, batch_index=batch_index)

    def skip_layers(self, start: int, end: int, with_: Tensor | None = None) -> None:
        """Skip blocks ``start`` to ``end`` inclusive, inside a trace: ``nnterp.toolkit.skip_layers``."""
        from .toolkit.steering import skip_layers

        skip_layers(self, start, end, with_)

    # -- sizes -------------------------------------------------------------------

    @property
    def text_config(self) -> Any:
        """The config the text model is built from (the root config, or its ``text_config``)."""
        config = self._module.config
        getter = getattr(config, "get_text_config", None)
        return getter() if getter is not None else config

    @property
    def hidden_size(self) -> int:
        """Width of the residual stream."""
        return int(self.text_config.hidden_size)

    @property
    def num_layers(self) -> int:
        """How many decoder blocks ``layers`` holds."""
        return len(self.layers)

    @property
    def num_heads(self) -> int:
        """Query heads of the attention, as the config declares them (a block's own: ``layers[i].self_attn.num_heads``)."""
        return int(self.text_config.num_attention_heads)

    @property
    def vocab_size(self) -> int:
        """Width of the logits."""
        return int(self.text_config.vocab_size)

    # -- availability ------------------------------------------------------------

    def support(self, layer: int | None = None) -> dict[str, Any]:
        """Which standard values this checkpoint has, without running it.

        Every root value and every block value by dotted name
        (``"layer_output"``, ``"self_attn.attention_probabilities"``): None when
        available (on every block), else the reason, or ``{layer: reason}``
        for the blocks where a block value is not. With ``layer``, that block's
        values alone.
        """
        if layer is not None:
            return blocks_support(self.layers, layer)
        rows: dict[str, Any] = {name: value.reason(self) for name, value in declared_values(type(self)).items()}
        rows.update(blocks_support(self.layers))
        return rows


#: why a load proves its family when the caller asked for it, and nothing else did
ASKED = "verify=True was given"


def _verify_reasons(family: Family, verify: bool | None) -> list[str]:
    """Why this load proves its family (empty: it does not): asked for, an inferred family, a release never proven on."""
    if verify is False:
        return []
    reasons = [ASKED] if verify else []
    if family.inferred:
        reasons.append(f"the family was {family.resolution}")
    reasons += [f"{release} is outside the releases the families were proven on" for release in unproven()]
    return reasons


def _proof_message(model: Any, because: list[str]) -> str:
    proof = model.proof
    held = sum(finding.status == "holds" for finding in proof.findings)
    failed = [finding for finding in proof.findings if finding.status == "fails"]
    lines = [
        f"nnterp proved the {model.family.name} family on this checkpoint at load ({'; '.join(because)}): {held} identities hold"
    ]
    if failed:
        lines[0] += f", {len(failed)} fail; their values are Unavailable with the identity as the reason:"
        lines += [f"  {finding}" for finding in failed]
    else:
        lines[0] += ", none fails."
    if proof.proved:
        lines.append(f"Proved: {', '.join(proof.proved)}.")
    if proof.unproven:
        lines.append(
            f"Served but proven by no identity at load (they read, but nothing checked what they mean): {', '.join(proof.unproven)}; "
            "the conformance kit proves them (nnterp-conformance check PATH)."
        )
    if model.family.inferred:
        lines.append(
            f"It serves this model as {sibling(model.family)}; a family for it (docs/adding-a-family.md) would serve it for sure."
        )
    return "\n".join(lines)


def _prompts_of(invokes: list) -> list[str]:
    """The batch's prompts as written, one a row, for a message naming the one that fails; empty unless all are strings."""
    prompts: list[str] = []
    for inputs, kwargs in invokes:
        written = inputs[0] if inputs else kwargs.get("text")
        written = [written] if isinstance(written, str) else written
        if not isinstance(written, (list, tuple)) or not all(isinstance(prompt, str) for prompt in written):
            return []
        prompts.extend(written)
    return prompts
