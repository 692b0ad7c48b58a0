#!/usr/bin/python3
"""Write tiny llama-architecture GGUF models with random weights, for tests and benchmarks.

Nothing is downloaded: the weights come from numpy.random.default_rng(seed), and the
tokenizer (every `tokenizer.*` key) is copied from one of the vocabulary-only GGUF
files that ship in llama.cpp's `models/` directory (default ggml-vocab-llama-spm.gguf,
32000 SentencePiece tokens). For a given seed and vocabulary the files are identical
byte for byte. Written into OUTDIR:

  target.gguf              4 layers, n_embd 64, 4 heads (head dim 16), 2 KV heads (GQA),
                           n_ff 192, context 4096, rope base 10000, rms eps 1e-5, all f32
  draft-layers{1,2}.gguf   the target's first 1 / 2 layers, with the target's embeddings,
                           output norm and output matrix
  draft-noise-{S}.gguf     the target plus Gaussian noise of std S * (that tensor's std) on
                           every matrix (S from --noise, default 0.05 0.2 0.5); the 1-D
                           norm weights are kept exact
  other-vocab.gguf         a 1-layer model with another tokenizer (--other-vocab, default
                           ggml-vocab-gpt-2.gguf): a draft the target must refuse
  models.json              the files written, their parameters and sha256

Why these weights: token embeddings have std 1; the output matrix has std 3/sqrt(n_embd),
so the logits have std about 3 after the final RMS norm (greedy top-1 probability about
0.1, entropy about 6 of 10.4 nats: neither uniform nor one-hot). Layer matrices have std
a_i/sqrt(fan_in) with a_i = 0.7 * 0.7**i for layer i (q and k: 1/sqrt(fan_in)), so the
residual stream stays bounded, the next token depends on the context (attention), and
later layers matter less: truncated drafts agree well with the target, and more so with
2 layers than with 1. Agreement of the noise drafts falls with S. With the default seed,
llama-speculative-simple (--temp 0, 4 drafted tokens, 64 tokens, 3 prompts) accepted about
55% (layers1), 87% (layers2), 72% / 15% / 2% (noise 0.05 / 0.2 / 0.5), 94% (noise 0.02).
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_FF = 4, 64, 4, 2, 192
HEAD_DIM = N_EMBD // N_HEAD
N_CTX, ROPE_BASE, RMS_EPS = 4096, 10000.0, 1e-5
LOGIT_STD = 3.0          # std of the logits after the final RMS norm
LAYER_SCALE, LAYER_DECAY = 0.7, 0.7
NORM_JITTER = 0.1        # norm weights are 1 + NORM_JITTER * N(0, 1)
NOISE_LEVELS = [0.05, 0.2, 0.5]
DRAFT_LAYERS = (1, 2)


def read_vocab(gguf, path):
    """Every tokenizer.* field of a GGUF file, as (key, value, type, array element type)."""
    T = gguf.GGUFValueType
    out = []
    for key, f in gguf.GGUFReader(path).fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        if vtype == T.ARRAY:
            sub = f.types[-1]
            if sub == T.STRING:  # keep raw bytes: no decode/encode round trip
                val = [bytes(f.parts[i]) for i in f.data]
            else:
                val = f.contents()
            out.append((key, val, vtype, sub))
        elif vtype == T.STRING:
            out.append((key, bytes(f.parts[-1]), vtype, None))
        else:
            out.append((key, f.contents(), vtype, None))
    return out


def make_target(rng, n_vocab):
    """Target weights, name -> float32 array in numpy (rows, cols) = ggml ne [cols, rows]."""
    def normal(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def norm():
        return np.float32(1) + normal((N_EMBD,), NORM_JITTER)

    E, KV = N_EMBD, N_HEAD_KV * HEAD_DIM
    t = {"token_embd.weight": normal((n_vocab, E), 1.0)}
    for i in range(N_LAYER):
        a = LAYER_SCALE * LAYER_DECAY ** i
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = norm()
        t[p + "attn_q.weight"] = normal((E, E), 1 / np.sqrt(E))
        t[p + "attn_k.weight"] = normal((KV, E), 1 / np.sqrt(E))
        t[p + "attn_v.weight"] = normal((KV, E), a / np.sqrt(E))
        t[p + "attn_output.weight"] = normal((E, E), a / np.sqrt(E))
        t[p + "ffn_norm.weight"] = norm()
        t[p + "ffn_gate.weight"] = normal((N_FF, E), a / np.sqrt(E))
        t[p + "ffn_up.weight"] = normal((N_FF, E), a / np.sqrt(E))
        t[p + "ffn_down.weight"] = normal((E, N_FF), a / np.sqrt(N_FF))
    t["output_norm.weight"] = norm()
    t["output.weight"] = normal((n_vocab, E), LOGIT_STD / np.sqrt(E))
    return t


def truncate(target, n_layer):
    """The target's first n_layer blocks, with its embeddings, output norm and output."""
    keep = tuple(f"blk.{i}." for i in range(n_layer))
    return {k: v for k, v in target.items() if not k.startswith("blk.") or k.startswith(keep)}


def add_noise(target, s, rng):
    """Each matrix plus N(0, (s * its std)^2); 1-D norm weights are kept exact."""
    out = {}
    for k, v in target.items():
        if v.ndim == 1:
            out[k] = v
        else:
            std = np.float32(s * float(v.std(dtype=np.float64)))
            out[k] = v + rng.standard_normal(v.shape, dtype=np.float32) * std
    return out


def write_model(gguf, path, name, tensors, vocab):
    n_layer = sum(1 for k in tensors if k.endswith(".attn_q.weight"))
    n_vocab = tensors["token_embd.weight"].shape[0]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(RMS_EPS)
    for key, val, vtype, sub in vocab:
        w.add_key_value(key, val, vtype, sub)
    for k, v in tensors.items():
        w.add_tensor(k, np.ascontiguousarray(v, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"file": path.name, "name": name, "n_layer": n_layer,
            "n_params": int(sum(v.size for v in tensors.values())),
            "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp-src", required=True, type=Path,
                    help="llama.cpp source tree (uses its gguf-py/ and models/)")
    ap.add_argument("--out", required=True, type=Path, help="output directory (created)")
    ap.add_argument("--seed", type=int, default=20261125, help="RNG seed (default %(default)s)")
    ap.add_argument("--vocab", default="ggml-vocab-llama-spm.gguf",
                    help="vocabulary file in <src>/models/ or a path (default %(default)s)")
    ap.add_argument("--noise", type=float, nargs="+", default=NOISE_LEVELS, metavar="S",
                    help="noise levels of the draft-noise-S models (default %(default)s)")
    ap.add_argument("--other-vocab", default="ggml-vocab-gpt-2.gguf",
                    help="vocabulary of other-vocab.gguf, in <src>/models/ or a path (default %(default)s)")
    args = ap.parse_args()

    sys.path.insert(0, str(args.llama_cpp_src / "gguf-py"))
    import gguf  # noqa: E402  (from the llama.cpp tree, not an installed package)

    def vocab_file(name):
        path = Path(name)
        return path if path.is_file() else args.llama_cpp_src / "models" / name

    def token_count(vocab):
        return len(next(v for k, v, _, _ in vocab if k == "tokenizer.ggml.tokens"))

    vocab_path = vocab_file(args.vocab)
    vocab = read_vocab(gguf, vocab_path)
    n_vocab = token_count(vocab)
    other_vocab = read_vocab(gguf, vocab_file(args.other_vocab))
    args.out.mkdir(parents=True, exist_ok=True)

    target = make_target(np.random.default_rng(args.seed), n_vocab)
    models = [("target", "target", target, {})]
    for n in DRAFT_LAYERS:
        models.append((f"draft-layers{n}", f"target, first {n} of {N_LAYER} layers",
                       truncate(target, n), {"derived_from": "target.gguf", "layers": n}))
    for s in args.noise:
        rng = np.random.default_rng([args.seed, round(s * 1e6)])
        models.append((f"draft-noise-{s}", f"target + noise {s} * tensor std",
                       add_noise(target, s, rng),
                       {"derived_from": "target.gguf", "noise": s, "norms_exact": True}))

    other = truncate(make_target(np.random.default_rng([args.seed, 1]), token_count(other_vocab)), 1)
    models.append(("other-vocab", f"1 layer, vocabulary {args.other_vocab}", other,
                   {"vocab": args.other_vocab, "vocab_of_file": other_vocab}))

    entries = []
    for stem, name, tensors, extra in models:
        model_vocab = extra.pop("vocab_of_file", vocab)
        info = write_model(gguf, args.out / f"{stem}.gguf", f"specdec-test {name}", tensors, model_vocab)
        entries.append({**info, **extra})
        print(f"wrote {args.out / info['file']} ({info['n_layer']} layers, {info['bytes']} bytes)")

    meta = {"generator": "scripts/make-llama-test-models.py", "seed": args.seed,
            "vocab": vocab_path.name, "n_vocab": n_vocab,
            "hparams": {"n_layer": N_LAYER, "n_embd": N_EMBD, "n_head": N_HEAD,
                        "n_head_kv": N_HEAD_KV, "head_dim": HEAD_DIM, "n_ff": N_FF,
                        "n_ctx_train": N_CTX, "rope_freq_base": ROPE_BASE, "rms_eps": RMS_EPS},
            "init": {"token_embd_std": 1.0, "logit_std": LOGIT_STD, "layer_scale": LAYER_SCALE,
                     "layer_decay": LAYER_DECAY, "norm_jitter": NORM_JITTER},
            "models": entries}
    (args.out / "models.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out / 'models.json'}")


if __name__ == "__main__":
    main()
