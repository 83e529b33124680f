"""A model split by ``device_map`` (half its blocks offloaded to disk by accelerate): every check passes and every value equals one device's.

On this CPU-only machine the second device is the disk: accelerate keeps the
offloaded blocks' weights on the meta device and loads them at each forward,
the hook that moves the stream between ``cuda:0`` and ``cuda:1`` on GPUs.
"""

import pytest
import torch

from nnterp import DeviceMapInvalid, StandardizedTransformer
from nnterp_conformance import cli
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.offload import offloaded_record, split_map
from nnterp_conformance.runner import PROMPTS, load

FAMILIES = ["llama", "gemma2", "mixtral", "qwen3_next"]


@pytest.fixture(scope="module", params=FAMILIES)
def record(request):
    return request.param, offloaded_record(request.param)


def test_the_blocks_are_split_between_the_cpu_and_the_disk(record):
    name, found = record
    blocks = [device for module, device in found["device_map"].items() if module.startswith("model.layers.")]
    assert blocks[0] == "cpu" and blocks[-1] == "disk", found["device_map"]
    assert {device for module, device in found["device_map"].items() if not module.startswith("model.layers.")} == {"cpu"}


def test_every_check_passes_offloaded(record):
    name, found = record
    failed = {check: verdict["detail"] for check, verdict in found["checks"].items() if verdict["status"] == "fail"}
    assert not failed
    assert found["checks"]["written_pattern_moves_logits"]["status"] == "pass"


def test_every_value_equals_one_device(record):
    name, found = record
    differing = {what: problem for what, problem in found["agreement"].items() if problem is not None}
    assert not differing
    whole = load(name)
    last = whole.num_layers - 1
    # every available value of the last block, which lives on the disk, was compared
    expected = {f"layers[{last}].{value}" for value, reason in whole.support(layer=last).items() if reason is None}
    assert expected <= set(found["agreement"]), expected - set(found["agreement"])


def test_writes_on_an_offloaded_block_move_the_logits_as_on_one_device(record):
    name, found = record
    edits = [what for what in found["agreement"] if what.startswith("logits after") and not what.endswith("moves the offloaded logits")]
    assert any("attention_probabilities" in what for what in edits) and any("attention_queries" in what for what in edits)
    for what in edits:
        assert found["agreement"][what] is None and found["agreement"][f"{what} moves the offloaded logits"] is None


def test_split_map_names_every_parameter_once():
    whole = load("gpt2")
    placement = split_map(whole)
    assert placement["transformer.h.0"] == "cpu" and placement[f"transformer.h.{whole.num_layers - 1}"] == "disk"
    for name, _ in whole._module.named_parameters(remove_duplicate=False):
        owners = [module for module in placement if name.startswith(module + ".")]
        assert len(owners) == 1, (name, owners)


def test_device_map_auto_with_max_memory_reads_and_writes_across_the_split(tmp_path):
    """The way users write it: accelerate places what fits in ``max_memory`` on the CPU and offloads the rest; the first trace dispatches."""
    path = tiny_checkpoint("llama")
    whole = load("llama")
    total = sum(parameter.numel() * parameter.element_size() for parameter in whole._module.parameters())
    split = StandardizedTransformer(path, attn_implementation="eager", device_map="auto", max_memory={"cpu": int(total * 0.66)}, offload_folder=str(tmp_path))
    read = {}
    for label, model in (("whole", whole), ("split", split)):
        with torch.no_grad(), model.trace(PROMPTS):
            model.layers[-1].self_attn.attention_probabilities[:, 0] = 0
            stream = model.layers[-1].layer_output.save()
            logits = model.logits.save()
        read[label] = (stream, logits)
    devices = split._module.hf_device_map
    assert devices[f"model.layers.{whole.num_layers - 1}"] == "disk" and devices["model.embed_tokens"] == "cpu", devices
    for ours, theirs in zip(read["whole"], read["split"]):
        torch.testing.assert_close(theirs, ours)
    with torch.no_grad(), whole.trace(PROMPTS):
        plain = whole.logits.save()
    assert not torch.allclose(plain, read["split"][1])


def test_a_map_that_starts_on_the_disk_is_refused_with_the_fix(tmp_path):
    path = tiny_checkpoint("llama")
    with pytest.raises(DeviceMapInvalid, match="first module on 'disk'.*keep at least the embedding on a device"):
        StandardizedTransformer(path, device_map={"": "disk"}, offload_folder=str(tmp_path))
    # with "auto" transformers decides the placement while loading; the same error comes after it
    with pytest.raises(DeviceMapInvalid, match="give max_memory room for the embedding"):
        StandardizedTransformer(path, device_map="auto", max_memory={"cpu": 1000}, offload_folder=str(tmp_path), dispatch=True)


def test_the_command_runs_the_split_and_reports(capsys):
    # the large-models page's command
    assert cli.main(["check", "llama", "--offload"]) == 0
    out = capsys.readouterr().out
    assert "split over cpu and disk" in out and "model.layers.2: disk" in out and out.rstrip().endswith("0 failed")
    assert "DIFFERS" not in out and "FAIL " not in out
    with pytest.raises(SystemExit, match="two devices"):
        cli.main(["check", "llama", "--offload", "cpu"])
