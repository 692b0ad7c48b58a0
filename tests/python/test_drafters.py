"""specdec.drafters: prompt lookup and suffix-tree drafting on scripted histories (the C++ drafters'
rules, reached from Python), their inputs, and bad parameters."""

import numpy as np
import pytest

import specdec
import specdec.drafters as d


def test_prompt_lookup_takes_the_most_recent_match_of_the_longest_n_gram():
    assert d.prompt_lookup([1, 2, 3, 4, 2, 3], min_n=2, max_n=3, k=4).tolist() == [4, 2, 3]
    # [2, 3] occurs at 1 and at 5: the most recent earlier occurrence (5) wins
    assert d.prompt_lookup([1, 2, 3, 9, 8, 2, 3, 7, 2, 3], min_n=2, max_n=2, k=2).tolist() == [7, 2]
    # a longer n-gram wins over a more recent shorter one
    assert d.prompt_lookup([5, 2, 3, 1, 0, 3, 4, 5, 2, 3], min_n=1, max_n=3, k=1).tolist() == [1]
    assert d.prompt_lookup([1, 2, 3, 4], min_n=1, max_n=3, k=4).tolist() == []  # no match
    assert d.prompt_lookup([], min_n=1, max_n=3, k=4).tolist() == []
    assert d.prompt_lookup([7, 7], min_n=1, max_n=1, k=5).tolist() == [7]  # k beyond what follows


def test_contexts_may_be_int32_int64_arrays_or_lists():
    c = [1, 2, 3, 4, 2, 3]
    want = d.prompt_lookup(c, min_n=2, max_n=3, k=4).tolist()
    for x in (np.array(c, np.int32), np.array(c, np.int64), tuple(c), np.array(c, np.int64)[::1]):
        assert d.prompt_lookup(x, min_n=2, max_n=3, k=4).tolist() == want
        assert d.SuffixDrafter(factor=2).draft(x, 4).tolist() == [4, 2, 3]
    assert d.prompt_lookup(np.array(c * 2, np.int64)[::2], min_n=1, max_n=1, k=2).dtype == np.int32  # strided: iterated


def test_suffix_drafter_follows_the_most_frequent_continuation_within_its_budget():
    c = [1, 2, 3, 4, 2, 3]
    assert d.SuffixDrafter(factor=2).draft(c, 4).tolist() == [4, 2, 3]
    assert d.SuffixDrafter().draft(c, 4).tolist() == [4, 2]  # factor 1: a match of 2 drafts 2
    assert d.SuffixDrafter(factor=2).draft(c, 1).tolist() == [4]  # the call's limit
    assert d.SuffixDrafter().draft([1, 2, 3], 4).tolist() == []  # nothing matches
    s = d.SuffixDrafter(factor=2)
    for n in range(2, 7):  # appended a token at a time: indexes incrementally, same as from scratch
        assert s.draft(c[:n], 4).tolist() == d.SuffixDrafter(factor=2).draft(c[:n], 4).tolist()
    assert s.draft([9, 9, 9], 2).tolist() == [9, 9]  # another context: indexed again


def test_one_hot_q_puts_all_mass_on_each_draft():
    q = d.one_hot_q([2, 0], 4)
    assert q.tolist() == [[0, 0, 1, 0], [1, 0, 0, 0]] and q.dtype == np.float32
    with pytest.raises(ValueError, match="drafts"):
        d.one_hot_q([4], 4)


def test_bad_parameters_and_tokens_are_refused_naming_them():
    for kw, name in ((dict(min_n=0), "min_n"), (dict(min_n=3, max_n=2), "max_n"), (dict(k=0), "k"),
                     (dict(k=-1), "k")):
        with pytest.raises(specdec.Error, match=name):
            d.prompt_lookup([1, 2], **kw)
    for kw, name in ((dict(max_depth=0), "max_depth"), (dict(factor=0.0), "factor"),
                     (dict(min_probability=1.5), "min_probability"), (dict(min_match=30), "min_match")):
        with pytest.raises(specdec.Error, match=name):
            d.SuffixDrafter(**kw)
    with pytest.raises(specdec.Error, match="context"):
        d.prompt_lookup(np.array([1, -2], np.int64), min_n=1, max_n=1, k=1)
    with pytest.raises(specdec.Error, match="context"):
        d.SuffixDrafter().draft([1, 2**40], 2)
