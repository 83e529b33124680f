"""The recurrent mixers' mutants: each wrong family is killed by the check it names.

A mixer's values sit inside kernels, where a careless author, or a release moving an operation, reads one step early
or late: the output after its gate, before its skip, the step before its softplus, the gate where the write strength
is. A survivor is a failing test, fixed by a stronger check, never by deleting the mutant.
"""

import torch
from nnterp import DerivedEProperty, EProperty
from nnterp_conformance.mutants import Mutant, killed, moved
from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention
from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer
from transformers.models.minimax.modeling_minimax import MiniMaxLightningAttention
from transformers.models.recurrent_gemma.modeling_recurrent_gemma import RecurrentGemmaRecurrentBlock
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

from nnterp_recurrent.components import LightningAttention, LinearAttention, SelectiveScan, ShortConvolution, StateSpace
from nnterp_recurrent.components.selective_scan import _tokens_first
from nnterp_recurrent.components.lightning import needs_token_blocks
from nnterp_recurrent.components.rg_lru import RealGatedLRU
from nnterp_recurrent.families.kimi_linear import KimiDeltaAttention
from nnterp_recurrent.families.minimax import MiniMaxLightning
from nnterp_recurrent.reasons import needs_torch_kernels

STATE_RULE = "against states[:, "
READ_RULE = "against attention_head_outputs"


class GatedScanOutput(SelectiveScan):
    """Mamba-1's y read after the silu(z) gate: the operation after the one that holds C . h + D * x."""

    OUTPUT_OPS = ("scan_output_6", "out_2")


class SkiplessScanOutput(SelectiveScan):
    """Mamba-1's y read before the D * x skip is added."""

    OUTPUT_OPS = ("scan_output_4", "out_0")


def _steps_before_softplus(self):
    args, kwargs = self.kernel_inputs()
    dt = args[self._position("dt")]
    bias = kwargs.get(self._position("dt_bias"))
    if bias is not None:
        dt = dt + (bias.to(dt.dtype) if self.decoding() else bias.to(dt.dtype)[..., None])
    return _tokens_first(self, dt.float())


class StepsBeforeSoftplus(SelectiveScan):
    """Mamba-1's betas taken from the kernel's dt argument without the softplus the kernel applies to it."""

    betas = DerivedEProperty(_steps_before_softplus, description="dt before the softplus", unavailable=needs_torch_kernels)


def _scan_op(op: str):
    return lambda envoy: f"source.{envoy.kernel()}.source.{envoy.KERNEL_BODY}.source.{op}.output"


def _state_output_without_write_back() -> object:
    dropped = StateSpace.state_output.at()
    dropped._postprocess = None  # an assignment then replaces the scan's whole (output, state) return
    return dropped


def _states_one_token_early(self):
    # each token served the state it starts from: the one before, zeros before the first
    states = MiniMaxLightning._states(self)
    return torch.cat([torch.zeros_like(states[:, :1]), states[:, :-1]], dim=1)


class LightningStatesOneTokenEarly(MiniMaxLightning):
    """Lightning attention's states read one token early: each token's the state its loop step starts from."""

    states = DerivedEProperty(_states_one_token_early, description="one token early", unavailable=needs_token_blocks)


class LightningDecaysAsFactors(MiniMaxLightning):
    """Lightning attention's decays served as the factor exp(-slope) the tokens' loop multiplies by, not its log."""

    decays = DerivedEProperty(lambda self: MiniMaxLightning._decays(self).exp(), description="exp(-slope)")


class LightningDecaysWithoutSign(MiniMaxLightning):
    """Lightning attention's decays served as the module's slope_rate, the rate without its minus sign."""

    decays = DerivedEProperty(lambda self: -MiniMaxLightning._decays(self), description="slope_rate")


class LightningHeadsAfterGate(MiniMaxLightning):
    """Lightning attention's head outputs read after the RMS norm and the sigmoid(output_gate(x)) gate, split back into heads."""

    @EProperty("source.attn_output_6.output", "after the gate")
    def attention_head_outputs(self, value):
        return value.view(*value.shape[:2], self.num_heads, self.value_dim)


def _windows(self, off_by_one: bool = False, from_zeros: bool = False):
    # the window after each token, as ShortConvolution derives it, with one of two mistakes
    written, before = self.conv_input, self.state_input
    if before is None or from_zeros:
        before = written.new_zeros(written.shape[0], self.kernel_size, written.shape[2])
    full = torch.cat([before.to(written.dtype), written], dim=1)
    return (full[:, :-1] if off_by_one else full[:, 1:]).unfold(1, self.kernel_size, 1).transpose(-1, -2)


class WindowOneTokenEarly(ShortConvolution):
    """A short convolution's window after each token taken one token early: the window each token's conv starts from."""

    states = DerivedEProperty(lambda self: _windows(self, off_by_one=True), description="one token early")


class WindowFromZeros(ShortConvolution):
    """A short convolution's windows built from zeros on every call, as on a fresh prompt: the cached window left out."""

    states = DerivedEProperty(lambda self: _windows(self, from_zeros=True), description="from zeros")


def _window_without_write_back() -> object:
    dropped = ShortConvolution.state_output.at()
    dropped._postprocess = None  # an assignment then swaps the window in for C * conv, where it is read
    return dropped


def _window_before_the_conv() -> object:
    # the live window copied where B * x is bound, before the conv writes this call's tokens into the cache
    return ShortConvolution.state_output.at(lambda envoy: envoy._op(envoy.CONV_INPUT))


def _view_beside(value: EProperty) -> EProperty:
    """``value`` served as its view alone, its write-back dropped: the kernel goes on with its own argument."""
    dropped = value.at()
    dropped._transform = None
    return dropped


def _lru_states_one_token_early(self):
    # each token served the state it starts from: the one before, zeros before the first
    states = RealGatedLRU._states(self)
    return torch.cat([torch.zeros_like(states[:, :1]), states[:, :-1]], dim=1)


class LruStatesOneTokenEarly(RealGatedLRU):
    """The RG-LRU's states read one token early: each token's the state its update starts from."""

    states = DerivedEProperty(_lru_states_one_token_early, description="one token early")


def _lru_at(path: str, keep=lambda self, value: value):
    """An RG-LRU value read at ``path`` below the block (``{lru}``: the recurrence's module), served as ``keep`` makes it."""

    def key(envoy):
        envoy.kernel()
        return path.format(lru=envoy.LRU)

    found = EProperty(key, "moved")
    found._preprocess = keep
    return found


def family_mutants() -> list[Mutant]:
    """The mistakes the recurrent mixers' kernels invite, each against the real component it would corrupt."""

    def mutant(checkpoint, what, module, component, check, message, reason):
        return Mutant(f"{checkpoint}: {what}", checkpoint, {module: component}, check, message, reason)

    swapped = "C served as B and B as C: one group each, so the shapes agree"
    beside = ("C served as a transposed view of the kernel's argument that the kernel never reads: edits land through "
              "the storage, but no gradient reaches the view (shipped, then fixed)")
    return [
        mutant("mamba", "head outputs after the silu(z) gate", MambaMixer, GatedScanOutput, "head_outputs_read_the_states",
               READ_RULE, "y read where the scan has multiplied it by silu(z), one operation after C . h + D * x"),
        mutant("mamba", "head outputs before the D skip", MambaMixer, SkiplessScanOutput, "head_outputs_read_the_states",
               READ_RULE, "y read where the token loop's outputs are stacked, before D * x is added"),
        mutant("mamba", "queries and keys swapped", MambaMixer,
               moved(SelectiveScan, swapped, attention_queries="attention_keys", attention_keys="attention_queries"),
               "states_follow_the_rule", STATE_RULE, swapped),
        mutant("mamba", "queries served beside the kernel", MambaMixer,
               moved(SelectiveScan, beside, attention_queries=_view_beside(SelectiveScan.attention_queries)),
               "interior_gradients_are_derivatives", "is not on the path", beside),
        mutant("mamba", "betas before the softplus", MambaMixer, StepsBeforeSoftplus, "states_follow_the_rule", STATE_RULE,
               "the step size taken from the kernel's dt argument, which the kernel passes through a softplus first"),
        mutant("mamba2", "queries and keys swapped", Mamba2Mixer,
               moved(StateSpace, swapped, attention_queries="attention_keys", attention_keys="attention_queries"),
               "states_follow_the_rule", STATE_RULE, swapped),
        mutant("mamba2", "head outputs before the D skip", Mamba2Mixer,
               moved(StateSpace, "y before D * x", attention_head_outputs=StateSpace.attention_head_outputs.at(_scan_op("output_1"), select=None)),
               "head_outputs_read_the_states", READ_RULE, "y read where the chunk scan has reshaped it, before the D residual is added"),
        mutant("mamba2", "state_output with its write-back dropped", Mamba2Mixer,
               moved(StateSpace, "no write-back", state_output=_state_output_without_write_back()),
               "written_states_land", "state_output written",
               "state_output read right, but written over the scan's whole return: reads agree, an assignment breaks the call"),
        mutant("qwen3_next", "head outputs after the gated norm", Qwen3NextGatedDeltaNet,
               moved(LinearAttention, "after the gated norm",
                     attention_head_outputs=LinearAttention.attention_head_outputs.at("source.core_attn_out_reshape_1.output", select=None)),
               "head_outputs_read_the_states", READ_RULE, "the heads read after norm(core_attn_out, z), reshaped back to heads"),
        mutant("qwen3_next", "queries and keys swapped", Qwen3NextGatedDeltaNet,
               moved(LinearAttention, "q and k swapped", attention_queries="attention_keys", attention_keys="attention_queries"),
               "states_follow_the_rule", STATE_RULE, "the kernel's first argument served as its second: both are [batch, seq, key_heads, key_dim]"),
        mutant("qwen3_next", "betas read at the gate", Qwen3NextGatedDeltaNet,
               moved(LinearAttention, "betas at g", betas="decays"),
               "states_follow_the_rule", STATE_RULE, "the kernel's g keyword served as beta: both are [batch, seq, heads]"),
        mutant("qwen3_next", "state_input not declared None on a fresh call", Qwen3NextGatedDeltaNet,
               moved(LinearAttention, "no none_when_fresh", state_input=LinearAttention.state_input.at(none_when_fresh=None)),
               "state_continues_into_decode", "does not declare none_when_fresh",
               "the state a prompt starts from served as None without saying so: cache_values('*') reads it and fails"),
        mutant("qwen3_next", "decays read at the betas", Qwen3NextGatedDeltaNet,
               moved(LinearAttention, "decays at beta", decays="betas"),
               "gates_in_range", "above 0", "the kernel's beta keyword served as g: both are [batch, seq, heads], but a log decay is never positive"),
        mutant("kimi_linear", "betas before the sigmoid", KimiLinearDeltaAttention,
               moved(KimiDeltaAttention, "betas at b_proj", betas=KimiDeltaAttention.betas.at("b_proj.output", select=None)),
               "states_follow_the_rule", STATE_RULE, "beta read at b_proj's output, before torch.sigmoid"),
        mutant("minimax", "the lightning blocks' contribution without beta", MiniMaxLightningAttention,
               moved(MiniMaxLightning, "the module's own output", attention_output=LightningAttention.attention_output.at()),
               "mid_stream", "against layer_mid", "the lightning attention's own output, where the block adds it times linear_attn_beta_factor"),
        mutant("minimax", "states one token early", MiniMaxLightningAttention, LightningStatesOneTokenEarly,
               "states_follow_the_rule", STATE_RULE, "each token served the state its loop step starts from, the one before its own write"),
        mutant("minimax", "decays as the factor, not its log", MiniMaxLightningAttention, LightningDecaysAsFactors,
               "states_follow_the_rule", STATE_RULE, "decays served as exp(-slope), what the tokens' loop multiplies the state by, one exponent too far"),
        mutant("minimax", "decays without their sign", MiniMaxLightningAttention, LightningDecaysWithoutSign,
               "gates_in_range", "above 0", "decays served as the module's slope_rate: the rate, not the log of what is kept"),
        mutant("minimax", "head outputs after the gate", MiniMaxLightningAttention, LightningHeadsAfterGate,
               "head_outputs_read_the_states", READ_RULE, "the heads read after the RMS norm and sigmoid(output_gate(x)), split back into heads"),
        mutant("minimax", "queries and keys swapped", MiniMaxLightningAttention,
               moved(MiniMaxLightning, "q and k swapped", attention_queries="attention_keys", attention_keys="attention_queries"),
               "states_follow_the_rule", STATE_RULE, "the forward's key_states served as its query_states: both [batch, seq, heads, head_dim]"),
        mutant("minimax", "state_output read at the module's return", MiniMaxLightningAttention,
               moved(MiniMaxLightning, "state_output at output[1]", state_output=EProperty("output", select=1)),
               "written_states_land", "state_input against the state_output written",
               "the last state read where the module returns it, after the cache has been handed it: a write reaches no later call"),
        mutant("lfm2", "window one token early", Lfm2ShortConv, WindowOneTokenEarly, "states_follow_the_rule", STATE_RULE,
               "the window after each token served as the window before it: the last kernel_size inputs up to the token before"),
        mutant("lfm2", "windows from zeros on every call", Lfm2ShortConv, WindowFromZeros, "split_prompt_continues",
               "the second call's states against one call's",
               "the windows built as on a fresh prompt, from zeros, where a call over a cache starts from the cached window"),
        mutant("lfm2", "head outputs before the C gate", Lfm2ShortConv,
               moved(ShortConvolution, "the conv's output as the heads'", attention_head_outputs="conv_output"),
               "head_outputs_read_the_states", READ_RULE, "y read at the conv's output, before C multiplies it"),
        mutant("lfm2", "queries and keys swapped", Lfm2ShortConv,
               moved(ShortConvolution, "C as B", attention_queries="attention_keys", attention_keys="attention_queries"),
               "states_follow_the_rule", STATE_RULE, "in_proj's first third served as its second: B and C are both [batch, seq, channels]"),
        mutant("lfm2", "contribution before out_proj", Lfm2ShortConv,
               moved(ShortConvolution, "out_proj's input", attention_output=ShortConvolution.attention_output.at("out_proj.input")),
               "contribution", "against layer_output", "attention_output read at what out_proj receives, C * conv, instead of what it returns"),
        mutant("lfm2", "state_output with its write-back dropped", Lfm2ShortConv,
               moved(ShortConvolution, "no write-back", state_output=_window_without_write_back()),
               "written_states_land", "state_output written",
               "state_output read right off the cache, but an assignment swapped in where it is read, for C * conv"),
        mutant("lfm2", "state_output copied before the conv writes the cache", Lfm2ShortConv,
               moved(ShortConvolution, "the window before the conv", state_output=_window_before_the_conv()),
               "state_output_is_the_last_state", "against the last state",
               "the cache's window copied where B * x is bound, before the conv writes the call's tokens into it: none yet "
               "on a prompt, the window the call started from on a decode step"),
        mutant("recurrent_gemma", "states one token early", RecurrentGemmaRecurrentBlock, LruStatesOneTokenEarly,
               "states_follow_the_rule", STATE_RULE, "each token served the state its update starts from, the one before its own write"),
        mutant("recurrent_gemma", "decays as the gate, not its log", RecurrentGemmaRecurrentBlock,
               moved(RealGatedLRU, "a, not log a", decays=_lru_at("{lru}.source.recurrent_gate_1.output")),
               "gates_in_range", "above 0", "decays read at exp(log_recurrent_gate), the factor the state is multiplied by, one exponent too far"),
        mutant("recurrent_gemma", "decays read before the reset", RecurrentGemmaRecurrentBlock,
               moved(RealGatedLRU, "log a before the reset", decays=_lru_at("{lru}.source.log_recurrent_gate_0.output")),
               "states_follow_the_rule", "from a random state before",
               "decays read at log_recurrent_gate, before the scan multiplies a by ~reset: a prompt's first token keeps "
               "part of the state before it"),
        mutant("recurrent_gemma", "values before the normalization", RecurrentGemmaRecurrentBlock,
               moved(RealGatedLRU, "i * x", attention_values=_lru_at("{lru}.source.gated_inputs_0.output")),
               "states_follow_the_rule", STATE_RULE, "the write read at i * x, before the sqrt(1 - a^2) normalization the scan receives it with"),
        mutant("recurrent_gemma", "head outputs after the gate", RecurrentGemmaRecurrentBlock,
               moved(RealGatedLRU, "y * gelu(linear_y(x))", attention_head_outputs=_lru_at("source.hidden_states_0.output")),
               "head_outputs_read_the_states", READ_RULE, "y read after the GeLU branch multiplies it, one operation after the recurrence's output"),
    ]


def pytest_generate_tests(metafunc):
    if "mutant" in metafunc.fixturenames:
        mutants = family_mutants()
        metafunc.parametrize("mutant", mutants, ids=[mutant.name for mutant in mutants])


def catalogue() -> list[Mutant]:
    """This package's mutants, for the docs' listing."""
    return family_mutants()


def test_every_mutant_is_killed_by_its_check(mutant):
    found = killed(mutant)
    assert found.status == "fail" and mutant.message in found.detail, f"{mutant.name} survives {mutant.check} ({mutant.reason}): {found}"

