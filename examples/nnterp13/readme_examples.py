"""nnterp 1.3's README examples, run unchanged against this nnterp (each 1.3 name warns once).

Changed from the README: the loading (a tiny 12-layer Llama written on the
spot instead of "gpt2", and a seed for the random steering vector), and the
``print`` lines, which show the values ``readme_examples_standard.py`` (the
same script in standard names) must print too.
"""

# -- loading, not in the README: a tiny checkpoint with as many layers as the examples index
import sys
import tempfile

import torch
from nnterp import TinyConfig
from nnterp_conformance.checkpoints import write_checkpoint

checkpoint = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
if len(sys.argv) <= 1:
    write_checkpoint(TinyConfig("llama", {"num_hidden_layers": 12}), checkpoint)
torch.manual_seed(0)


def show(name, tensor):
    print(name, tuple(tensor.shape), f"{tensor.float().sum().item():.5g}", f"{tensor.float().abs().max().item():.5g}")


# -- Examples
from nnterp import StandardizedTransformer

model = StandardizedTransformer(checkpoint)  # or "meta-llama/Llama-2-7b-hf", etc.

with model.trace("The Eiffel Tower is in the city of"):
    # Unified interface across all models (must follow forward pass order!)
    attention_output = model.attentions_output[3]
    mlp_output = model.mlps_output[3]
    layer_5_output = model.layers_output[5]

    # Built-in utilities
    logits = model.logits.save()
    show("attention_output", attention_output)
    show("mlp_output", mlp_output)
    show("layer_5_output", layer_5_output)
show("logits", logits)

# -- Standardized Naming
with model.trace("Hello world"):
    # Attention and MLP components (access in forward pass order!)
    attn_out = model.attentions_output[3]
    mlp_out = model.mlps_output[3]
    layer_3_output = model.layers_output[3]

    # Layer I/O - works for GPT-2, LLaMA, Gemma, etc.
    layer_5_output = model.layers_output[5]

    # Direct interventions - add residual from layer 3 to layer 10
    model.layers_output[10] = model.layers_output[10] + layer_3_output
    show("layer_10_output", model.layers_output[10])
    print("next_token_probs", model.next_token_probs.argmax(-1).tolist())

# -- Built-in Interventions
from nnterp.interventions import logit_lens, patchscope_lens, steer  # noqa: F401

# Logit lens: decode hidden states at each layer
layer_probs = logit_lens(model, ["The capital of France is"])
# Shape: (batch, layers, vocab_size)
show("layer_probs", layer_probs)

# Patchscope: patch hidden states across prompts
from nnterp.interventions import TargetPrompt
target = TargetPrompt("The capital of France is", index_to_patch=-1)
patchscope_probs = patchscope_lens(
    model,
    source_prompts=["The capital of England is"],
    target_patch_prompts=target,
    layer_to_patch=10
)
show("patchscope_probs", patchscope_probs)

# Activation steering
import torch
steering_vector = torch.randn(model.hidden_size)
with model.trace("Hello, how are you?"):
    model.steer(layers=[5, 10], steering_vector=steering_vector, factor=1.5)
    show("steered", model.logits)

# Steer specific token positions or batch elements
with model.trace(["Hello, how are you?", "Goodbye, world!"]):
    model.steer(layers=5, steering_vector=steering_vector, token_positions=0)  # first token only
    model.steer(layers=5, steering_vector=steering_vector, batch_index=0)  # first prompt only
    show("steered_batch", model.logits)

# -- Prompt and Target Tracking
from nnterp.prompt_utils import Prompt, run_prompts

prompts = [
    Prompt.from_strings(
        "The capital of France is",
        {"target": "Paris", "other": ["London", "Madrid"]},
        model.tokenizer
    )
]

# Get probabilities for all target categories
results = run_prompts(model, prompts)
# Returns: {"target": tensor([0.85]), "other": tensor([0.12])}
for name, probs in results.items():
    show(f"run_prompts[{name}]", probs)

# Combine with interventions
results = run_prompts(model, prompts, get_probs_func=logit_lens)
# Returns probabilities across all layers
for name, probs in results.items():
    show(f"run_prompts_lens[{name}]", probs)

