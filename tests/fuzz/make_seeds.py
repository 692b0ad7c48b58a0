#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz harnesses into tests/fuzz/corpus/<harness>/seed-*.

Each seed is a small, meaningful input (named by what it exercises), encoded as the harness decodes
it with tests/fuzz/fuzz_input.hpp's byte_reader: `Enc` below mirrors the reader (integers in a range
take as many big-endian bytes as the range needs; 32/64-bit words are little-endian; rows are a kind
byte, its arguments and a modifier byte). Any bytes are a valid input, so a seed that drifts from a
changed decoder still runs; rerun this script after changing a decoder. Crash regression inputs
(corpus/<harness>/regression-*) are kept as found and not written here.

    python3 tests/fuzz/make_seeds.py            # (re)writes every seed-* file
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# special_values in fuzz_input.hpp, by index
NAN, INF, NINF, NEG_ZERO, ZERO, DENORM, DBL_MIN, DBL_MAX, MINUS_ONE, ONE, HALF = range(11)


class Enc:
    def __init__(self):
        self.b = bytearray()

    def byte(self, v):
        self.b.append(v & 0xFF)
        return self

    def flag(self, on):
        return self.byte(1 if on else 0)

    def u32(self, v):
        self.b += struct.pack('<I', v & 0xFFFFFFFF)
        return self

    def u64(self, v):
        self.b += struct.pack('<Q', v & 0xFFFFFFFFFFFFFFFF)
        return self

    def rng(self, lo, hi, v):
        """byte_reader::in_range(lo, hi) returning v."""
        span, n = hi - lo, 0
        while span >> (8 * n):
            n += 1
        self.b += (v - lo).to_bytes(n, 'big') if n else b''
        return self

    def pick(self, index, count):
        return self.rng(0, count - 1, index)

    def double(self, x):
        """byte_reader::any_double() returning the double x (raw bits)."""
        self.byte(3)
        self.b += struct.pack('<d', x)
        return self

    def special(self, index):
        return self.byte(1).byte(index)

    def vocab(self, V):
        return self.rng(2040, 4200, V) if V >= 2040 else self.rng(1, 300, V)

    def token(self, V, t):
        return self.byte(0).rng(0, V - 1, t)

    def odd_token(self, which):
        """token(): 0 -> -1, 1 -> V, 2 -> V + 1, 3 -> -2, 4 -> INT_MIN, 5 -> INT_MAX."""
        return self.byte(0xF0 + which)

    # rows (fill_row): a kind, its arguments, then the modifier byte and the pokes
    def row_random(self, seed, skew=0, mods=0, pokes=()):
        return self.byte(skew << 3).u32(seed).mods(mods, pokes)

    def row_bytes(self, values, mods=0, pokes=()):
        self.byte(1)
        for v in values:
            self.byte(v)
        return self.mods(mods, pokes)

    def row_uniform(self, mods=0, pokes=()):
        return self.byte(2).mods(mods, pokes)

    def row_one_hot(self, V, at, value=None, mods=0, pokes=()):
        self.byte(3).rng(0, V - 1, at)
        if value is not None:  # logit rows read the hot value
            self.byte(value)
        return self.mods(mods, pokes)

    def row_copy(self, mods=0, pokes=()):
        return self.byte(4).mods(mods, pokes)

    def row_sparse(self, V, entries, mods=0, pokes=()):
        self.byte(5).byte(len(entries) - 1)
        for at, v in entries:
            self.rng(0, V - 1, at).byte(v)
        return self.mods(mods, pokes)

    def row_zeros_random(self, seed, mods=0, pokes=()):
        return self.byte(6).u32(seed).mods(mods, pokes)

    def row_empty(self, mods=0, pokes=()):
        return self.byte(7).mods(mods, pokes)

    def mods(self, mods, pokes):
        """mods: bit 0 raw weights, bits 1-3 scale; pokes: (V, index, special) triples."""
        n = len(pokes)
        assert n <= 3
        self.byte(mods | (n << 4))
        for V, at, which in pokes:
            self.rng(0, V - 1, at).byte(which)
        return self

    def warp(self, V, temperature=None, top_k=None, top_p=None, min_p=None):
        """warp_params(): each given field as a table index (temperature, top_p, min_p) or a top_k."""
        how = (1 if temperature is not None else 0) | (2 if top_k is not None else 0) | \
              (4 if top_p is not None else 0) | (8 if min_p is not None else 0)
        self.byte(how)
        if temperature is not None:
            self.pick(temperature, 8)
        if top_k is not None:
            self.rng(0, V + 2, top_k)
        if top_p is not None:
            self.pick(top_p, 8)
        if min_p is not None:
            self.pick(min_p, 8)
        return self

    def bytes(self):
        return bytes(self.b)


def write(harness, name, data):
    d = os.path.join(HERE, 'corpus', harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed-' + name), 'wb') as f:
        f.write(data)


# ---- chain batches (verify, verify_from_logits) ---------------------------------------------------
STRICT, LENIENT, GREEDY, SAMPLE_AND_MATCH, BLOCK, TYPICAL = range(6)


def chain(e, V, requests, packed=True, pad=0, seed=7, logits=False):
    """requests: list of (drafts, rows) where rows(e, i, n) writes draft row i then target row i."""
    e.vocab(V).rng(0, 8, len(requests)).flag(not packed)
    for drafts, _ in requests:
        e.rng(0, 8, len(drafts))
    if not packed:
        e.rng(0, 2, pad)
    e.u32(seed)
    for b, (drafts, rows) in enumerate(requests):
        e.byte(b).byte(3)  # stream: request, step
        for i in range(len(drafts) + 1):
            if i < len(drafts):
                t = drafts[i]
                if isinstance(t, tuple):
                    e.odd_token(t[1])
                else:
                    e.token(V, t)
            rows(e, i, len(drafts))
    return e


def random_rows(e, i, n):
    if i < n:
        e.row_random(100 + i)
    e.row_random(200 + i)


def one_hot_rows(V, hot):
    def rows(e, i, n):
        if i < n:
            e.row_one_hot(V, hot[i])
        e.row_one_hot(V, hot[i])
    return rows


def copy_rows(e, i, n):  # p == q: every draft accepted, then the bonus
    if i < n:
        e.row_random(300 + i, skew=2)
    e.row_copy()


def seeds_verify():
    V = 8
    # entry byte: bits 0-2 the entry (0-4 chain verification), bit 3 float rows, high nibble 0xF large V
    def chain_seed(name, rule, requests, packed=True, pad=0, float_rows=False, options=(False,), rule_args=b''):
        e = Enc().byte(0x08 if float_rows else 0x00)
        chain(e, V, requests, packed, pad)
        e.flag(options[0]).byte(0)  # check_normalisation, default tolerance
        e.byte(rule).b += rule_args
        e.byte(0)  # no shape fault
        write('verify', name, e.bytes())

    chain_seed('strict-two-requests', STRICT, [([1, 2, 3], random_rows), ([5], random_rows)])
    chain_seed('greedy-padded-one-hot', GREEDY, [([2, 4], one_hot_rows(V, [2, 4, 1])), ([3], one_hot_rows(V, [1, 6]))],
               packed=False, pad=1)
    chain_seed('block-p-equals-q', BLOCK, [([1, 2, 3, 4], copy_rows), ([], random_rows)])
    chain_seed('sample-and-match-float', SAMPLE_AND_MATCH, [([0, 7], random_rows)], float_rows=True)
    chain_seed('typical-sample', TYPICAL, [([3, 3], random_rows)], rule_args=bytes([8]))
    chain_seed('lenient-half-checked', LENIENT, [([1, 6], random_rows)], options=(True,), rule_args=bytes([0, 0]))

    def nan_rows(e, i, n):
        if i < n:
            e.row_random(11 + i)
        e.row_random(12 + i, pokes=[(V, 3, NAN)] if i == 1 else [])
    chain_seed('strict-nan-in-target-row', STRICT, [([1, 2], nan_rows)])
    chain_seed('bad-draft-id', STRICT, [([1, ('odd', 1), 2], random_rows), ([4], random_rows)])

    def zero_q(e, i, n):  # q(x) = 0 for the draft: draft_prob_zero
        if i < n:
            e.row_sparse(V, [(0, 50), (5, 9)])
        e.row_random(40 + i)
    chain_seed('draft-prob-zero', STRICT, [([3], zero_q)])
    # large V: rows span two sampling tiles
    e = Enc().byte(0xF0)
    chain(e, 3000, [([10, 2500], random_rows)])
    write('verify', 'strict-two-tiles', e.flag(False).byte(0).byte(STRICT).byte(0).bytes())
    # a shape fault: vocab_size 2^63 with empty rows (its products with the row counts wrap to 0)
    e = Enc().byte(0x00)
    chain(e, V, [([1], random_rows)])
    write('verify', 'fault-huge-vocab', e.flag(False).byte(0).byte(GREEDY).byte(0xE0).pick(3, 8).flag(True).bytes())
    # MTAD (entry 5), BiLD (6), last-token check (7, double rows), layouts (7 with an odd high nibble)
    def single(e, V, drafts):
        e.vocab(V).rng(0, 8, len(drafts)).u32(5).byte(1).byte(2)
        for i in range(len(drafts) + 1):
            if i < len(drafts):
                e.token(V, drafts[i]).row_random(60 + i)
            e.row_random(70 + i)
        return e
    e = single(Enc().byte(0x05), V, [1, 2, 3]).flag(False).pick(0, 6)
    for _ in range(3):
        e.byte(0).byte(8)  # log q decreasing by 1/4 per token
    write('verify', 'mtad-three-drafts', e.bytes())
    write('verify', 'bild-threshold-2', single(Enc().byte(0x06), V, [4, 4]).flag(False).byte(32).bytes())
    e = Enc().byte(0x07).vocab(V).row_random(1).row_copy().token(V, 2).byte(0).u32(9).byte(0).byte(0)
    write('verify', 'last-token-p-equals-q', e.bytes())
    e = Enc().byte(0x17).rng(0, 9, 3)
    for n in (2, 0, 5):
        e.flag(True).rng(-2, 9, n)
    write('verify', 'layout-padded', e.byte(0).rng(0, 12, 6).bytes())


def seeds_verify_from_logits():
    V = 12

    def logit_rows(e, i, n):
        if i < n:
            e.row_random(500 + i, skew=4)
        e.row_random(600 + i, skew=4)

    def seed(name, rule, requests, params, draft_params=None, float_rows=False, rule_args=b''):
        e = Enc().byte(1 if float_rows else 0)
        chain(e, V, requests, logits=True)
        for p in params:
            e.warp(V, **p)
        e.flag(draft_params is not None)
        for p in draft_params or []:
            e.warp(V, **p)
        e.flag(False).byte(rule).b += rule_args
        e.byte(0).byte(0)  # no parameter fault, no shape fault
        write('verify_from_logits', name, e.bytes())

    seed('strict-top-k-top-p', STRICT, [([1, 2, 3], logit_rows), ([4], logit_rows)],
         [dict(top_k=5, top_p=1), dict(temperature=2)])
    seed('greedy-temperature-zero', GREEDY, [([0, 1], logit_rows)], [dict(temperature=1)], float_rows=True)
    seed('sample-and-match-min-p', SAMPLE_AND_MATCH, [([7], logit_rows)], [dict(min_p=1)])
    seed('lenient-draft-params', LENIENT, [([3, 3], logit_rows)], [dict(temperature=2)], [dict(top_k=2)],
         rule_args=bytes([0, 2]))
    seed('block-default-params', BLOCK, [([5, 6, 7], logit_rows)], [dict()])
    seed('typical-top-p', TYPICAL, [([2], logit_rows)], [dict(top_p=2)], rule_args=bytes([0]))


def seeds_verify_tree():
    # options: byte 0 float (flag), then head (mode: 0 parents, 1 sibling lists, 2 paths; bit 2 logits)
    RULES = dict(strict=0, recursive_rejection=1, k_seq=2, target_only=3, greedy=4, sample_and_match=5, typical=6)

    def tree(name, rule, head, V, trees, with_q=True, params=None, float_rows=False, row=None, fault=b'\0'):
        e = Enc().flag(float_rows).byte(head).vocab(V).rng(0, 6, len(trees)).rng(0, 2, 1)
        mode = head % 3
        for parents, order in trees:
            n = len(parents)
            e.byte(n - 1)  # size byte: 1 + b % 16 nodes
            for i in range(1, n):
                e.rng(0, i - 1, parents[i])
            e.byte(0)  # no corruption
            if mode == 1:
                e.flag(order)  # reversed sibling order
            elif mode == 2:
                children = {p for p in parents[1:]}
                leaves = [v for v in range(n) if v not in children and not (v == 0 and n > 1)]
                for _ in leaves:
                    e.byte(0).byte(0)  # no unused row, no duplicate
        total = sum(len(p) for p, _ in trees)
        for r in range(total):
            e.token(V, (3 * r + 1) % V)
        e.flag(not with_q)
        for r in range(total):
            (row or (lambda e, r: e.row_random(900 + r).row_random(800 + r, skew=2)))(e, r)
        e.u32(3)
        for _ in trees:
            e.byte(0)
        for p in params or []:
            e.warp(V, **p)
        e.flag(False).byte(RULES[rule])
        if rule == 'typical':
            e.byte(0)
        e.b += fault  # a shape fault, or none
        write('verify_tree', name, e.bytes())

    binary = ([-1, 0, 0, 1, 1, 2, 2], False)
    chain_tree = ([-1, 0, 1, 2, 3], False)
    tree('strict-binary-parents', 'strict', 0, 8, [binary, chain_tree])
    tree('recursive-rejection-lists', 'recursive_rejection', 1, 8, [binary], row=lambda e, r: e.row_random(r).row_copy())
    tree('k-seq-paths', 'k_seq', 2, 8, [binary, ([-1], False)])
    tree('target-only-no-q', 'target_only', 0, 16, [([-1, 0, 0, 0, 1], True)], with_q=False)
    tree('greedy-chain-lists-reversed', 'greedy', 1, 8, [([-1, 0, 0, 2], True)], with_q=False)
    tree('sample-and-match-float', 'sample_and_match', 2, 8, [chain_tree], float_rows=True)
    tree('typical-chain', 'typical', 0, 8, [chain_tree])
    tree('from-logits-top-k', 'strict', 4, 8, [binary], params=[dict(top_k=3)],
         row=lambda e, r: e.row_random(r).row_random(50 + r, skew=3))
    # vocab_size 2^63 with empty rows: 2 nodes * 2^63 wraps around to 0
    tree('fault-huge-vocab', 'greedy', 0, 8, [([-1, 0], False)], fault=bytes([0xF0, 2]))


def seeds_warp_and_sample():
    # head: op = head % 7 (0 softmax, 1 warp_logits, 2 warp_probs, 3 filters, 4 categorical,
    # 5 residual, 6 select); bit 3 float rows; high nibble 0xF large V
    def head(op, float_rows=False, large=False):
        h = op | (8 if float_rows else 0)
        for x in range(256):  # the smallest byte with this op, type and size
            if x % 7 == op and (x & 8) == (h & 8) and ((x >> 4) == 0xF) == large:
                return x
        raise ValueError

    V = 40
    write('warp_and_sample', 'softmax-temperature-half',
          Enc().byte(head(0)).vocab(V).row_random(1, skew=3).flag(False).pick(1, 8).bytes())
    write('warp_and_sample', 'softmax-float-neg-inf',
          Enc().byte(head(0, True)).vocab(V).row_sparse(V, [(3, 200), (9, 100)]).flag(False).pick(0, 8).bytes())
    write('warp_and_sample', 'warp-logits-top-k-top-p-min-p',
          Enc().byte(head(1)).vocab(V).row_random(2, skew=5).warp(V, top_k=10, top_p=1, min_p=1).byte(0x80).u64(1 << 62).bytes())
    write('warp_and_sample', 'warp-logits-greedy-large',
          Enc().byte(head(1, large=True)).vocab(2500).row_random(3, skew=2).warp(2500, temperature=1).byte(0).bytes())
    write('warp_and_sample', 'warp-probs-temperature-2',
          Enc().byte(head(2)).vocab(V).row_random(4, skew=2).warp(V, temperature=3, top_p=2).bytes())
    write('warp_and_sample', 'filters-raw-row',
          Enc().byte(head(3, True)).vocab(V).row_random(5, mods=1, pokes=[(V, 7, NAN)]).warp(V, top_k=4, top_p=3, min_p=2).flag(True).bytes())
    write('warp_and_sample', 'categorical-masked-sparse',
          Enc().byte(head(4)).vocab(V).row_zeros_random(6).byte(0x80).u64(1 << 61).byte(0x80).u64(3 << 61)
          .byte(3).rng(0, V - 1, 1).rng(0, V - 1, 5).rng(0, V - 1, 9).flag(True).rng(0, 18, 2).token(V, 0).bytes())
    write('warp_and_sample', 'residual-lenient-float',
          Enc().byte(head(5, True)).vocab(V).row_random(7).row_random(8).byte(0).byte(0x80).u64(1 << 62)
          .flag(False).byte(32).byte(1).bytes())
    write('warp_and_sample', 'select-top-w',
          Enc().byte(head(6)).vocab(V).row_random(9, skew=4).rng(0, V + 2, 5).bytes())


def seeds_corpus_tokenizer():
    text1 = (b"The GNU General Public License, version 2.0, is a free (copyleft) license.\n"
             b"It's third-party software; 1,000 users don't mind!\n\n"
             b"Second paragraph: it says \"hello\" twice -- hello.\n")
    text2 = b"caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \x01\x7f TAB\tEND 3.14 a-b a--b 'quoted' x'"
    write('corpus_tokenizer', 'order-3-two-texts', bytes([0x02]) + text1 + b'\0' + text2)
    write('corpus_tokenizer', 'order-2-capped-vocabulary', bytes([0x01 | (2 << 2)]) + text1)
    write('corpus_tokenizer', 'word-list-and-documents', bytes([0x00 | 0x10 | 0x20]) + b"alpha\nbeta\ngamma" + b'\0' +
          bytes([3, 5, 1, 4, 6, 2, 7, 8, 9, 1, 1]))
    write('corpus_tokenizer', 'file-loader', bytes([0x03 | 0x40]) + text2)
    write('corpus_tokenizer', 'invalid-order', bytes([0x81]) + b"one two three")


def seeds_linear_verifier_load():
    write('linear_verifier_load', 'two-features',
          b"specdec-linear-verifier 1\nfeatures 2\nmean 0.5 -1\nscale 1 2.5\nweights 0.25 -4\nbias 0.125\n")
    write('linear_verifier_load', 'one-feature-extremes',
          b"specdec-linear-verifier 1\nfeatures 1\nmean 1.7976931348623157e+308\nscale 4.9406564584124654e-324\n"
          b"weights -1e300\nbias 0\n")
    write('linear_verifier_load', 'trailing-text', b"specdec-linear-verifier 1\nfeatures 1\nmean 0\nscale 1\nweights 1\nbias 0\nmore\n")
    write('linear_verifier_load', 'bad-scale', b"specdec-linear-verifier 1 features 1 mean 0 scale 0 weights 1 bias 0")


def seeds_specdec_sim_cli():
    def args(*a):
        return b'\0'.join(x.encode() for x in a)
    write('specdec_sim_cli', 'lists-and-ranges', args('--alpha', '0.1,0.5:0.9:0.1', '--gamma=1,2,4', '--c-hat', '0.25'))
    write('specdec_sim_cli', 'counts', args('--draws', '0', '--seed=18446744073709551615', '--pair-seed', '007', '--budget', '4096'))
    write('specdec_sim_cli', 'help', args('--alpha', '1', '--help'))
    write('specdec_sim_cli', 'common-options', args('--csv', 'out.csv', '--plot=fig.png', '--quiet', '--policy', 'seq', '--verbose'))
    write('specdec_sim_cli', 'usage-errors', args('--gamma', '1.5', '--no-such', 'x'))


if __name__ == '__main__':
    seeds_verify()
    seeds_verify_from_logits()
    seeds_verify_tree()
    seeds_warp_and_sample()
    seeds_corpus_tokenizer()
    seeds_linear_verifier_load()
    seeds_specdec_sim_cli()
