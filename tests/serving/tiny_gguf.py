"""Write a tiny llama-architecture chat model as GGUF, deterministically, for tinyq4 to serve.

No weights can be downloaded here, so the model is built: 2 blocks, 64-dim embeddings, 4 heads,
a 300-token SentencePiece-style vocabulary (3 control tokens, 256 byte tokens, a few words and
letters), float32 weights drawn from numpy's PCG64 generator with seed 0. Its answers are
meaningless but deterministic at temperature 0, which is what a protocol, latency and streaming
test needs. Run with the tinyq4 venv's Python (needs the ``gguf`` and ``numpy`` packages)::

    python tests/serving/tiny_gguf.py OUT.gguf
"""

from __future__ import annotations

import sys


def build(out: str) -> None:
    """Write the model to ``out``."""
    import gguf  # type: ignore[import-not-found]  # lives in the tinyq4 venv
    import numpy as np

    rng = np.random.default_rng(0)
    words = ["hello", "world", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "fast", "yes", "no", "ok"]
    tokens = (["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁" + w for w in words]
              + list("abcdefghijklmnopqrstuvwxyz") + ["▁"])
    kind = gguf.TokenType
    types = ([kind.UNKNOWN, kind.CONTROL, kind.CONTROL] + [kind.BYTE] * 256
             + [kind.NORMAL] * (len(tokens) - 259))
    vocab, dim, blocks, heads, ffn = len(tokens), 64, 2, 4, 128
    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name("tiny-chat")
    writer.add_context_length(256)
    writer.add_embedding_length(dim)
    writer.add_block_count(blocks)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(dim // heads)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)

    def weight(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    weight("token_embd.weight", vocab, dim)
    for i in range(blocks):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(dim, np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            weight(f"blk.{i}.{part}.weight", dim, dim)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(dim, np.float32))
        weight(f"blk.{i}.ffn_gate.weight", ffn, dim)
        weight(f"blk.{i}.ffn_up.weight", ffn, dim)
        weight(f"blk.{i}.ffn_down.weight", dim, ffn)
    writer.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    weight("output.weight", vocab, dim)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    build(sys.argv[1])
