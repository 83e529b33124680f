"""extract_values and ActivationShards against cache_values and the tokenizer, through interruptions, and in bounded memory.

The rows are checked against ``cache_values`` on the same texts (padding
dropped by hand) on three kinds of block: gpt2 (the default block), gptj
(parallel) and gemma2 (sandwich norms). Resumption is checked against an
uninterrupted run, shard for shard and bit for bit, after exceptions at
several points, after SIGKILL in a subprocess, and with a half-written temp
file and a written but unlisted shard left behind.
"""

import gc
import json
import multiprocessing
import os
import random
import shutil
import signal
import threading
import time

import pytest
import torch
from nnterp import InvalidArgument, ToolkitInsideTrace
from nnterp.toolkit.cache import cache_values
from nnterp.toolkit.extraction import DOCUMENT, MANIFEST, POSITION, TOKEN, ActivationShards, extract_values, load_activations

FAMILIES = ["gpt2", "gptj", "gemma2"]
WORDS = "the tower is in paris hello world a b c one more text here please eiffel city of light river seine".split()


def make_texts(count, seed=0, shortest=1, longest=14):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(shortest, longest))) for _ in range(count)]


TEXTS = make_texts(11)
#: what the test values read: a stream, a head split, the queries (token axis third) and a late MLP contribution
VALUES = ["layers.0.layer_output", "layers.1.self_attn.attention_head_outputs", "layers.0.self_attn.attention_queries", "layers.-1.mlp.mlp_output"]


def by_hand(model, texts, max_length=None):
    """Each row's document, position and token id, from tokenizing each text alone."""
    documents, positions, tokens = [], [], []
    for index, text in enumerate(texts):
        ids = model.tokenizer(text)["input_ids"][:max_length]
        documents += [index] * len(ids)
        positions += list(range(len(ids)))
        tokens += ids
    return torch.tensor(documents), torch.tensor(positions), torch.tensor(tokens)


def cached_rows(model, texts, names, max_length=None):
    """The values ``cache_values`` reads on the texts, padding dropped by hand: ``[tokens, ...]`` per name (first ``max_length`` tokens of each)."""
    cache = cache_values(model, [text for text in texts if text], names, batch_size=4, progress=False)
    mask = cache.attention_mask.bool()
    if max_length is not None:  # left-padded: a text's first max_length tokens are its first real ones
        mask &= (cache.attention_mask.cumsum(1) <= max_length)
    out = {}
    for name in cache:
        value = cache[name]
        if name.endswith("attention_queries"):
            value = value.transpose(1, 2)  # [batch, heads, seq, dim] -> [batch, seq, heads, dim]
        out[name] = value[mask]
    return out


def same_extraction(a, b):
    """Two extraction directories hold the same shards, row for row, bit for bit."""
    left, right = load_activations(a), load_activations(b)
    assert left.complete and right.complete
    assert left.manifest["shards"] == right.manifest["shards"]
    assert left.manifest["columns"] == right.manifest["columns"]
    assert (left.num_tokens, left.num_texts) == (right.num_tokens, right.num_texts)
    for one, other in zip(left, right, strict=True):
        assert one.keys() == other.keys()
        for name in one:
            assert torch.equal(one[name], other[name]), name
    assert sorted(os.listdir(a)) == sorted(os.listdir(b))  # nothing else left behind


class Interrupted(Exception):
    pass


def interrupted(texts, after):
    """The texts, with the stream failing when text ``after`` is asked for."""
    for index, text in enumerate(texts):
        if index == after:
            raise Interrupted(after)
        yield text


# -- the rows ----------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_rows_are_the_cached_values_of_real_tokens(tiny_model, family, tmp_path):
    model = tiny_model(family)
    texts = [*TEXTS[:5], "", *TEXTS[5:]]  # an empty text has no rows and keeps its index
    shards = extract_values(model, texts, VALUES, tmp_path, batch_size=3, shard_tokens=17, progress=False)
    last = f"layers.{model.num_layers - 1}.mlp.mlp_output"
    names = ["layers.0.self_attn.attention_queries", "layers.0.layer_output", "layers.1.self_attn.attention_head_outputs", last]
    assert shards.values == names  # expanded, in forward order
    documents, positions, tokens = by_hand(model, texts)
    assert torch.equal(shards[DOCUMENT], documents)
    assert torch.equal(shards[POSITION], positions)
    assert torch.equal(shards[TOKEN], tokens)
    expected = cached_rows(model, texts, names)
    for name in names:
        assert shards[name].shape == expected[name].shape, name
        torch.testing.assert_close(shards[name], expected[name], atol=1e-5, rtol=1e-4, msg=name)
    # the manifest: fixed-size shards, each counting its tokens and the texts it touches
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    sizes = [shard["tokens"] for shard in manifest["shards"]]
    assert sizes[:-1] == [17] * (len(sizes) - 1) and 0 < sizes[-1] <= 17 and sum(sizes) == len(tokens)
    assert manifest["complete"] and manifest["texts"] == len(texts) and manifest["tokens"] == len(tokens)
    for index, entry in enumerate(manifest["shards"]):
        column = shards.shard(index, DOCUMENT)[DOCUMENT]
        assert entry["texts"] == len(column.unique()) and entry["documents"] == [column.min().item(), column.max().item()]
    assert manifest["columns"]["layers.1.self_attn.attention_head_outputs"]["shape"] == [
        model.layers[1].self_attn.num_heads,
        model.layers[1].self_attn.head_dim,
    ]


def test_max_length_keeps_each_texts_first_tokens(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.1.layer_output"]
    shards = extract_values(model, TEXTS, names, tmp_path, batch_size=4, max_length=5, progress=False)
    documents, positions, tokens = by_hand(model, TEXTS, max_length=5)
    assert torch.equal(shards[DOCUMENT], documents) and torch.equal(shards[POSITION], positions)
    assert torch.equal(shards[TOKEN], tokens) and shards[POSITION].max() == 4
    # a causal model's first tokens do not see the ones cut off
    torch.testing.assert_close(shards[names[0]], cached_rows(model, TEXTS, names, max_length=5)[names[0]], atol=1e-5, rtol=1e-4)


def test_logits_in_bfloat16_and_the_forward_ends_after_the_last_block_needed(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    shards = extract_values(model, TEXTS[:4], ["logits"], tmp_path / "logits", dtype=torch.bfloat16, progress=False)
    logits = shards["logits"]
    assert logits.dtype == torch.bfloat16 and logits.shape[1] == model.vocab_size
    assert torch.equal(logits, cached_rows(model, TEXTS[:4], ["logits"])["logits"].to(torch.bfloat16))
    calls = []
    hook = model.layers[2]._module.register_forward_hook(lambda *_: calls.append(1))
    try:
        early = extract_values(model, TEXTS[:4], ["layers.1.layer_output"], tmp_path / "early", progress=False)
    finally:
        hook.remove()
    assert not calls  # block 2 never ran
    expected = cached_rows(model, TEXTS[:4], ["layers.1.layer_output"])["layers.1.layer_output"]
    torch.testing.assert_close(early["layers.1.layer_output"], expected, atol=1e-5, rtol=1e-4)


def test_a_dataset_and_a_generator_are_read_like_a_list(tiny_model, tmp_path):
    datasets = pytest.importorskip("datasets")
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output"]
    listed = extract_values(model, TEXTS, names, tmp_path / "list", batch_size=4, shard_tokens=9, progress=False)
    dataset = datasets.Dataset.from_dict({"id": list(range(len(TEXTS))), "body": TEXTS})
    from_dataset = extract_values(model, dataset, names, tmp_path / "dataset", column="body", batch_size=4, shard_tokens=9, progress=False)
    from_generator = extract_values(model, (text for text in TEXTS), names, tmp_path / "generator", batch_size=4, shard_tokens=9, progress=False)
    for other in (from_dataset, from_generator):
        assert other.manifest["shards"] == listed.manifest["shards"]
        assert torch.equal(other[names[0]], listed[names[0]])
    with pytest.raises(KeyError, match="column="):
        extract_values(model, dataset, names, tmp_path / "wrong", progress=False)


def test_the_reader_gives_shards_batches_rows_and_columns(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output", "layers.1.mlp.mlp_neurons"]
    extract_values(model, TEXTS, names, tmp_path, batch_size=4, shard_tokens=10, progress=False)
    shards = load_activations(tmp_path)
    assert isinstance(shards, ActivationShards) and shards.complete and len(shards) > 3
    whole = {name: torch.cat([shard[name] for shard in shards]) for name in [*names, DOCUMENT, POSITION, TOKEN]}
    for name, tensor in whole.items():
        assert torch.equal(shards[name], tensor) and tensor.shape[0] == shards.num_tokens
    batches = list(shards.batches(7, names=[names[1], TOKEN]))  # across the 10-row shards
    assert [len(batch[TOKEN]) for batch in batches[:-1]] == [7] * (len(batches) - 1)
    assert torch.equal(torch.cat([batch[names[1]] for batch in batches]), whole[names[1]])
    rows = list(shards.rows(names=[names[0], DOCUMENT]))
    assert len(rows) == shards.num_tokens
    assert torch.equal(rows[13][names[0]], whole[names[0]][13]) and rows[13][DOCUMENT] == whole[DOCUMENT][13]
    with pytest.raises(KeyError, match="not extracted"):
        shards["logits"]
    with pytest.raises(FileNotFoundError, match="no manifest"):
        load_activations(tmp_path / "elsewhere")


# -- resuming ----------------------------------------------------------------------------


RESUMED = dict(batch_size=3, shard_tokens=13, progress=False)


def test_a_run_interrupted_anywhere_continues_to_the_uninterrupted_shards(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output", "layers.2.mlp.mlp_output"]
    texts = make_texts(20, seed=1)
    extract_values(model, texts, names, tmp_path / "whole", **RESUMED)
    # twice interrupted (inside a batch's shard, then elsewhere), then finished; and once before any shard
    for directory, stops in (("twice", [7, 14]), ("early", [1])):
        for stop in stops:
            with pytest.raises(Interrupted):
                extract_values(model, interrupted(texts, stop), names, tmp_path / directory, **RESUMED)
        partial = load_activations(tmp_path / directory)
        assert not partial.complete and partial.num_texts is None
        extract_values(model, texts, names, tmp_path / directory, **RESUMED)
        same_extraction(tmp_path / "whole", tmp_path / directory)
    # a complete extraction is not run again
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        again = extract_values(model, texts, names, tmp_path / "whole", **RESUMED)
    finally:
        hook.remove()
    assert not calls and again.complete


def test_a_half_written_temp_file_and_an_unlisted_shard_are_ignored(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.1.layer_output"]
    texts = make_texts(20, seed=2)
    extract_values(model, texts, names, tmp_path / "whole", **RESUMED)
    with pytest.raises(Interrupted):
        extract_values(model, interrupted(texts, 10), names, tmp_path / "crashed", **RESUMED)
    listed = len(load_activations(tmp_path / "crashed"))
    assert listed >= 1
    # killed while writing the next shard, and after writing one more without listing it
    (tmp_path / "crashed" / f"shard-{listed:05d}.safetensors.tmp").write_bytes(b"\x10\x00\x00\x00garbage")
    # and killed inside safetensors' save_file, which writes its own .tmpXXXXXX before renaming
    (tmp_path / "crashed" / ".tmpAb3dE9").write_bytes(b"\x10\x00\x00\x00half")
    (tmp_path / "crashed" / f"shard-{listed + 1:05d}.safetensors").write_bytes(b"not a shard")
    partial = load_activations(tmp_path / "crashed")
    assert len(partial) == listed and sum(shard[DOCUMENT].shape[0] for shard in partial) == partial.num_tokens
    extract_values(model, texts, names, tmp_path / "crashed", **RESUMED)
    same_extraction(tmp_path / "whole", tmp_path / "crashed")


def extract_slowly(model, texts, names, directory):
    """The extraction a forked child runs over a slow stream, so that the parent can kill it midway."""
    torch.set_num_threads(1)

    def slow():
        for text in texts:
            time.sleep(0.02)
            yield text

    extract_values(model, slow(), names, directory, **RESUMED)


def test_a_run_killed_midway_continues_to_the_uninterrupted_shards(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output", "layers.1.mlp.mlp_output"]
    texts = make_texts(60, seed=3)
    extract_values(model, texts, names, tmp_path / "whole", **RESUMED)
    target = tmp_path / "killed"
    # a fork: the child has the model loaded already, and dies by SIGKILL wherever it is
    child = multiprocessing.get_context("fork").Process(target=extract_slowly, args=(model, texts, names, target))
    child.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.is_alive():
            manifest = target / MANIFEST
            if manifest.exists() and len(json.loads(manifest.read_text())["shards"]) >= 2:
                break
            time.sleep(0.005)
        assert child.is_alive(), f"the child ended (exit code {child.exitcode}) before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    partial = load_activations(target)
    assert not partial.complete and 2 <= len(partial) < len(load_activations(tmp_path / "whole"))
    extract_values(model, texts, names, target, **RESUMED)
    same_extraction(tmp_path / "whole", target)


def test_other_settings_texts_or_directories_are_refused_before_the_model_runs(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output"]
    texts = make_texts(12, seed=4)
    with pytest.raises(Interrupted):
        extract_values(model, interrupted(texts, 7), names, tmp_path, **RESUMED)
    calls = []
    hooks = [candidate._module.register_forward_pre_hook(lambda *_: calls.append(1)) for candidate in (model, tiny_model("llama"))]
    try:
        for kwargs, match in [
            ({**RESUMED, "batch_size": 4}, "batch_size"),
            ({**RESUMED, "shard_tokens": 12}, "shard_tokens"),
            ({**RESUMED, "max_length": 8}, "max_length"),
            ({**RESUMED, "dtype": torch.float16}, "dtype"),
        ]:
            with pytest.raises(ValueError, match=match):
                extract_values(model, texts, names, tmp_path, **kwargs)
        with pytest.raises(ValueError, match="values"):
            extract_values(model, texts, ["layers.1.layer_output"], tmp_path, **RESUMED)
        with pytest.raises(ValueError, match="model"):
            extract_values(tiny_model("llama"), texts, names, tmp_path, **RESUMED)
        with pytest.raises(ValueError, match="differ from those"):
            extract_values(model, ["other", *texts[1:]], names, tmp_path, **RESUMED)
        with pytest.raises(ValueError, match="end after"):
            extract_values(model, texts[:2], names, tmp_path, **RESUMED)
        # the last shard ends inside a batch: a text of that batch, run again, is checked too
        resume = json.loads((tmp_path / MANIFEST).read_text())["shards"][-1]["resume"]
        assert resume["row"] > 0
        changed = [*texts[: 3 * resume["batch"]], "other", *texts[3 * resume["batch"] + 1 :]]
        with pytest.raises(ValueError, match="differ from those"):
            extract_values(model, changed, names, tmp_path, **RESUMED)
        # bad input says what to pass
        with pytest.raises(ValueError, match="query"):
            extract_values(model, texts, ["layers.0.self_attn.attention_probabilities"], tmp_path / "new", progress=False)
        with pytest.raises(KeyError, match="no value"):
            extract_values(model, texts, ["layers.0.nope"], tmp_path / "new", progress=False)
        with pytest.raises(ValueError, match="batch_size"):
            extract_values(model, texts, names, tmp_path / "new", batch_size=0)
        with pytest.raises(ValueError, match="dtype"):
            extract_values(model, texts, names, tmp_path / "new", dtype=torch.int8)
        foreign = tmp_path / "foreign"
        foreign.mkdir()
        (foreign / "notes.txt").write_text("mine")
        with pytest.raises(ValueError, match="holds no extraction"):
            extract_values(model, texts, names, foreign, progress=False)
    finally:
        for hook in hooks:
            hook.remove()
    assert not calls
    with pytest.raises(InvalidArgument, match=r"extract_values\(texts=3\): document 1 is a int"):
        extract_values(model, ["fine", 3], names, tmp_path / "typed", progress=False)


@pytest.mark.parametrize(
    ("arguments", "argument", "shown"),
    [
        ({"batch_size": 0}, "batch_size", "0"),
        ({"shard_tokens": -1}, "shard_tokens", "-1"),
        ({"max_length": 0}, "max_length", "0"),
        ({"dtype": torch.int8}, "dtype", "torch.int8"),
        ({"engine": "fast"}, "engine", "'fast'"),
        ({"texts": {"text": ["a b", "c"]}}, "texts", "{'text': ['a b', 'c']}"),  # a dict of columns iterated its keys
        ({"texts": torch.tensor([5, 6, 7])}, "texts", "tensor([5, 6, 7])"),  # one document's ids, not wrapped
        ({"values": []}, "values", "no values asked for"),
        ({"values": 3}, "values", "expected a standard name"),
    ],
)
def test_arguments_out_of_range_are_refused_by_name_before_anything_is_written(tiny_model, tmp_path, arguments, argument, shown):
    model = tiny_model("gpt2")
    call = {"texts": TEXTS, "values": ["layers.0.layer_output"], **RESUMED} | arguments
    with pytest.raises(InvalidArgument) as raised:
        extract_values(model, call.pop("texts"), call.pop("values"), tmp_path / "new", **call)
    message = str(raised.value)
    assert raised.value.argument == argument and f"extract_values({argument}=" in message and shown in message, message
    assert not (tmp_path / "new").exists()


def test_called_inside_a_trace_it_says_so(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    with pytest.raises(ToolkitInsideTrace, match=r"extract_values\(\) runs the model itself"):
        with torch.no_grad(), model.trace("Hello"):
            model.layers[0].layer_output.save()
            extract_values(model, TEXTS, ["layers.0.layer_output"], tmp_path / "new", progress=False)
    assert not (tmp_path / "new").exists()


def test_documents_as_token_ids_give_the_rows_of_their_texts(tiny_model, tmp_path):
    # gpt2's tokenizer adds no special tokens: a text and its ids are the same tokens
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output", "layers.2.mlp.mlp_output"]
    texts = [*TEXTS[:4], "", *TEXTS[4:]]
    ids = [model.tokenizer(text)["input_ids"] for text in texts]
    strings = extract_values(model, texts, names, tmp_path / "strings", **RESUMED)
    side = model.tokenizer.padding_side
    model.tokenizer.padding_side = "right"  # the batches are left-padded whatever side the tokenizer pads
    try:
        mixed = [torch.tensor(row) if index % 3 == 0 else row if index % 3 == 1 else texts[index] for index, row in enumerate(ids)]
        for directory, documents in (("ids", ids), ("mixed", mixed)):
            extract_values(model, documents, names, tmp_path / directory, **RESUMED)
    finally:
        model.tokenizer.padding_side = side
    for directory in ("ids", "mixed"):
        other = load_activations(tmp_path / directory)
        assert other.manifest["shards"][0]["tokens"] == strings.manifest["shards"][0]["tokens"]
        for name in [*names, DOCUMENT, POSITION, TOKEN]:
            torch.testing.assert_close(other[name], strings[name], atol=1e-6, rtol=1e-5, msg=f"{directory}: {name}")
    # cut to max_length as texts are
    cut = extract_values(model, ids, names[:1], tmp_path / "cut", max_length=3, **RESUMED)
    assert torch.equal(cut[TOKEN], by_hand(model, texts, max_length=3)[2])


def shard_files(directory):
    """Every file of an extraction directory, with its bytes and modification time."""
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(directory.iterdir())}


def test_a_complete_run_is_returned_only_for_the_same_texts(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output"]
    texts = make_texts(12, seed=6)
    others = make_texts(12, seed=7)
    extract_values(model, texts, names, tmp_path, **RESUMED)
    written = shard_files(tmp_path)
    calls, handle = [], model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        for given, shown in [
            (others, "these are 12 texts"),  # as many, other ones
            ([*texts, "one more"], "more than 12 texts"),  # a superset
            (texts[:-1], "these are 11 texts"),  # fewer
            ([*texts[:-1], others[0]], "these are 12 texts"),  # the last one differs
        ]:
            with pytest.raises(InvalidArgument, match="complete extraction of 12 texts") as raised:
                extract_values(model, given, names, tmp_path, **RESUMED)
            message = str(raised.value)
            assert raised.value.argument == "texts" and "extract_values(texts=" in message and str(tmp_path) in message
            assert shown in message and "new directory" in message, message
        # the same texts, as a list or a stream: the extraction is returned as it is
        for given in (texts, iter(texts)):
            again = extract_values(model, given, names, tmp_path, **RESUMED)
            assert again.complete and again.num_texts == len(texts)
    finally:
        handle.remove()
    assert not calls
    assert shard_files(tmp_path) == written  # nothing rewritten, not even the manifest


def test_a_run_resumed_to_completion_records_its_texts(tiny_model, tmp_path):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output"]
    texts = make_texts(12, seed=8)
    extract_values(model, texts, names, tmp_path / "whole", **RESUMED)
    with pytest.raises(Interrupted):
        extract_values(model, interrupted(texts, 7), names, tmp_path / "resumed", **RESUMED)
    extract_values(model, texts, names, tmp_path / "resumed", **RESUMED)
    same_extraction(tmp_path / "whole", tmp_path / "resumed")
    with pytest.raises(InvalidArgument, match="more than 12 texts"):
        extract_values(model, [*texts, "one more"], names, tmp_path / "resumed", **RESUMED)


# -- memory ------------------------------------------------------------------------------


def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


class PeakRss:
    """The largest resident memory seen while the block runs, sampled every millisecond."""

    def __enter__(self):
        self.start = self.peak = rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._done.wait(0.001):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def test_memory_stays_within_one_batch_and_the_shard_buffer(tiny_model, tmp_path):
    # 1,600 texts cut to 64 tokens: 102,400 rows of 3,096 bytes (317 MB on disk), in batches of 32 and shards of 4,096 rows
    model = tiny_model("gpt2")
    count, length, batch, shard = 1600, 64, 32, 4096
    rng = random.Random(5)
    texts = [" ".join(rng.choice(WORDS) for _ in range(length)) for _ in range(count)]
    names = ["layers.*.layer_output", "layers.*.self_attn.attention_head_outputs", "layers.*.mlp.mlp_neurons"]
    settings = dict(batch_size=batch, max_length=length, shard_tokens=shard, progress=False)
    extract_values(model, texts[: 3 * batch], names, tmp_path / "warm", **settings)  # every code path once
    gc.collect()
    try:
        with PeakRss() as memory:
            shards = extract_values(model, texts, names, tmp_path / "acts", **settings)
        assert shards.num_tokens == count * length
        row = sum(torch.empty(column["shape"], dtype=getattr(torch, column["dtype"])).nbytes for column in shards.columns.values())
        assert row == 4 * model.num_layers * (2 * model.hidden_size + model.layers[0].mlp.intermediate_size) + 3 * 8
    finally:
        shutil.rmtree(tmp_path / "acts")  # 317 MB
    # the shard buffer; a batch's values as read and as rows, twice over; and the forward's own working set for
    # one batch with nnsight's machinery, which cache_values of one such batch shows at 20 to 45 MB
    bound = shard * row + 4 * batch * length * row + 64 * 2**20
    assert bound < count * length * row / 3  # the bound tells a bounded run from one that keeps what it wrote
    assert memory.peak - memory.start < bound, (memory.peak - memory.start, bound)
