"""The plugin: which checkpoints a session checks, stable shards, and one worker per checkpoint."""

import re
from collections import defaultdict

from nnterp_conformance.checkpoints import names
from nnterp_conformance.checks import CHECKS

SUITE = """
from nnterp_conformance.suite import BaseConformance

class TestKit(BaseConformance):
    pass
"""


def collected(pytester, *options):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider", *options)
    ids = re.findall(r"test_check\[(.+?)-([a-z_]+)\]", result.stdout.str())
    return sorted({checkpoint for checkpoint, _ in ids}), ids


def test_no_option_means_every_registered_checkpoint_and_every_check_that_applies_to_it(pytester):
    from nnterp_conformance.applicability import applicable

    checkpoints, ids = collected(pytester)
    assert checkpoints == names()
    assert sorted(ids) == sorted((name, check) for name in names() for check in applicable(name))
    # a mixture's check is a test on a mixture only, not a skip on every dense model
    mixture_check = next(name for name, found in CHECKS.items() if found.kind == "moe")
    assert ("mixtral", mixture_check) in ids and ("gpt2", mixture_check) not in ids


def test_family_and_checkpoint_options_narrow_the_matrix(pytester):
    assert collected(pytester, "--nnterp-family", "toy")[0] == ["nnterp_toy"]
    assert collected(pytester, "--nnterp-family", "gpt2")[0] == ["gpt-sw3", "gpt2", "gpt2-reorder"]
    assert collected(pytester, "--nnterp-checkpoint", "llama", "--nnterp-checkpoint", "qwen2")[0] == ["llama", "qwen2"]


def test_shards_split_the_checkpoints_without_overlap(pytester):
    first = collected(pytester, "--nnterp-shard", "1/2")[0]
    second = collected(pytester, "--nnterp-shard", "2/2")[0]
    assert sorted(first + second) == names() and not set(first) & set(second)
    assert first and second


def test_a_bad_shard_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--collect-only", "--nnterp-shard", "3/2")
    assert result.ret != 0 and "between 1 and N" in result.stdout.str() + result.stderr.str()


def test_each_checkpoint_runs_on_one_worker(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
        "--nnterp-checkpoint", "llama", "--nnterp-checkpoint", "gpt2",
        "-k", "mid_stream or stream_continuity",
    )
    workers = defaultdict(set)
    for worker, checkpoint in re.findall(r"\[(gw\d)\] (?:\[\s*\d+%\] )?PASSED \S*test_check\[([\w-]+?)-[a-z_]+\]", result.stdout.str()):
        workers[checkpoint].add(worker)
    assert set(workers) == {"llama", "gpt2"}, result.stdout.str()
    assert all(len(found) == 1 for found in workers.values()), dict(workers)
    result.assert_outcomes(passed=4)


def test_dropping_a_post_norm_fails_the_contribution_check_naming_block_and_size(tiny_model, monkeypatch):
    from nnterp import Attention
    from nnterp_conformance.checks import verdict
    from nnterp_toy.families.toy import ToyAttention

    model = tiny_model("nnterp_toy")
    assert verdict("contribution", model, ["Hello world"]).status == "pass"
    # the contribution read at the attention module's own output, before the post norm the block applies
    monkeypatch.setattr(ToyAttention, "attention_output", Attention.attention_output)
    result = verdict("contribution", model, ["Hello world"])
    assert result.status == "fail"
    assert re.match(r"layers\[0\]: .* off by \d", result.detail), result.detail
