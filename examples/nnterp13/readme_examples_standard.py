"""nnterp 1.3's README examples in standard names: prints what ``readme_examples.py`` prints, with no warning."""

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


from nnterp import StandardizedTransformer
from nnterp.toolkit import Prompt, logit_lens, next_token_probs, patchscope_lens, steer

model = StandardizedTransformer(checkpoint)

with model.trace("The Eiffel Tower is in the city of"):
    attention_output = model.layers[3].self_attn.attention_output
    mlp_output = model.layers[3].mlp.mlp_output
    layer_5_output = model.layers[5].layer_output
    logits = model.logits.save()
    show("attention_output", attention_output)
    show("mlp_output", mlp_output)
    show("layer_5_output", layer_5_output)
show("logits", logits)

with model.trace("Hello world"):
    attn_out = model.layers[3].self_attn.attention_output
    mlp_out = model.layers[3].mlp.mlp_output
    layer_3_output = model.layers[3].layer_output
    layer_5_output = model.layers[5].layer_output
    model.layers[10].layer_output = model.layers[10].layer_output + layer_3_output
    show("layer_10_output", model.layers[10].layer_output)
    print("next_token_probs", model.logits[:, -1].softmax(-1).argmax(-1).tolist())

# the lens at each prompt's last token: [batch, layers, vocab]
layer_probs = logit_lens(model, ["The capital of France is"], positions=-1)
show("layer_probs", layer_probs)

patchscope_probs = patchscope_lens(model, ["The capital of England is"], "The capital of France is", layers=10, target_position=-1, progress=False)
show("patchscope_probs", patchscope_probs)

steering_vector = torch.randn(model.hidden_size)
with model.trace("Hello, how are you?"):
    steer(model, [5, 10], steering_vector, factor=1.5)
    show("steered", model.logits)

with model.trace(["Hello, how are you?", "Goodbye, world!"]):
    steer(model, 5, steering_vector, token_positions=0)
    steer(model, 5, steering_vector, batch_index=0)
    show("steered_batch", model.logits)

prompt = Prompt.from_strings("The capital of France is", {"target": "Paris", "other": ["London", "Madrid"]}, model)
probs = next_token_probs(model, [prompt.text])  # [batch, vocab]
for name, ids in prompt.targets.items():
    show(f"run_prompts[{name}]", probs[:, ids].sum(-1, keepdim=True))
lens = logit_lens(model, [prompt.text], positions=-1)  # [batch, layers, vocab]
for name, ids in prompt.targets.items():
    show(f"run_prompts_lens[{name}]", lens[:, :, ids].sum(-1))
