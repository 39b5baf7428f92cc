"""A GPU-bound target for issue 46: a Llama of Llama-3-8B's shape with random weights, and an EAGLE draft that
proposes the last token again, with a reason to accept (on the GPU machine; nothing is downloaded).

    python3 build_gpu_target.py weights MODELS [--json FILE] [--device cuda]     # torch + safetensors (the image's)
    python3 build_gpu_target.py tokenizer MODELS                                 # tokenizers + transformers (bundle's)

Writes MODELS/llama8b-rep (the target: hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336, vocab 128,256, bf16,
16 GB in shards) and MODELS/llama8b-rep-eagle (an EAGLE v1 head: one decoder layer, fc, its own copies of the
target's embeddings and lm_head), and a word-level tokenizer of 128,256 entries into both.

Every matrix of the target has its full size, so every forward costs what an 8B Llama's costs: the GPU is the cost.
Its values make the target repeat itself in runs:
  - each layer's o_proj and down_proj are zero (q, k, v, gate and up are random): a layer adds nothing to the
    residual stream, so the last hidden state is the current token's embedding e_x, and after the final RMSNorm
    sqrt(d) times its direction;
  - lm_head's row x is a_x times the direction of e_x: the current token's logit is a_x sqrt(d), every other token's
    about a_j N(0, 1) (random directions in 4,096 dimensions are nearly orthogonal). At temperature 1 the target
    samples its current token again with probability p_x = e^(a_x sqrt d) / (e^(a_x sqrt d) + Z): half the tokens
    ("sticky", drawn with a fixed seed) p = 0.8, the rest p = 0.15; a_x is set from the measured Z. Any other token
    comes out all but uniformly, sticky or not by even odds.
The draft: fc = [I | 0] passes the token's embedding through (SGLang concatenates the embedding first), its layer adds
nothing (o_proj, down_proj zero) and it has no final norm, so its logits are lm_head . e_b, largest for b itself: it
proposes the token it was given, the last one, again at every step. SGLang's sampling verify accepts a drafted token
with the target's probability of it: a round after token b accepts while the target repeats b (p_b each), so sticky
tokens give runs of accepts and the others rarely one, as real drafts accept in runs. A topk-2 tree's second branch
is a random token with the target's probability ~1/128,256 of it: a tree catches nothing more.

The JSON (--json, default MODELS/gpu-target.json) keeps the recipe, the measured p of both kinds (a sample of tokens,
the logits computed as the server does: bf16 weights, fp32 RMSNorm), the draft's proposal check, and the accept
length this process gives per steps (simulated over 200,000 rounds): what the server should show.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

SHAPE = {"hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "inter": 14336, "vocab": 128256}
TARGET, DRAFT = "llama8b-rep", "llama8b-rep-eagle"
SEED = 46
STICKY_SHARE, P_STICKY, P_OTHER = 0.5, 0.8, 0.15
RMS_EPS = 1e-5
SHARD_BYTES = 2_000_000_000


def log(msg: str) -> None:
    print(f"[build_gpu_target {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def config(shape: dict[str, int], draft: bool = False) -> dict[str, Any]:
    hidden, heads = shape["hidden"], shape["heads"]
    return {
        "architectures": ["LlamaForCausalLMEagle" if draft else "LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": shape["inter"],
        "num_hidden_layers": 1 if draft else shape["layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": shape["kv_heads"],
        "head_dim": hidden // heads,
        "vocab_size": shape["vocab"],
        "max_position_embeddings": 8192,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": 500000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
    }


# --- the acceptance this target and draft give (pure) ---------------------------------------------------------


def simulate_accept(share: float, p_sticky: float, p_other: float, steps: int, rounds: int = 200_000) -> float:
    """Tokens per verify round (the bonus included) of a chain of `steps` proposing the last token again, against a
    target that repeats a sticky token with p_sticky and another with p_other (module doc)."""
    rng = random.Random(SEED)
    sticky = rng.random() < share
    total = 0
    for _ in range(rounds):
        p = p_sticky if sticky else p_other
        accepted = 0
        while accepted < steps and rng.random() < p:
            accepted += 1
        # the bonus: after a rejection a new token (the residual leaves the rejected one out); after a full accept
        # the target's own sample, the same token again with p
        if accepted < steps or rng.random() >= p:
            sticky = rng.random() < share
        total += accepted + 1
    return total / rounds


# --- the weights (torch) -------------------------------------------------------------------------------------------


def weights(models: Path, shape: dict[str, int], device: str, report: dict[str, Any]) -> None:
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator(device=device).manual_seed(SEED)
    d, vocab, inter = shape["hidden"], shape["vocab"], shape["inter"]
    kv = shape["kv_heads"] * (d // shape["heads"])
    bf16 = torch.bfloat16
    t = time.monotonic()
    embed = torch.randn(vocab, d, generator=gen, device=device)
    direction = embed / embed.norm(dim=1, keepdim=True)
    sticky = torch.rand(vocab, generator=gen, device=device) < STICKY_SHARE
    p = torch.where(sticky, torch.tensor(P_STICKY, device=device), torch.tensor(P_OTHER, device=device))
    logit_p = torch.log(p / (1 - p))
    sample = torch.randperm(vocab, generator=gen, device=device)[:1024]

    def self_probs(head: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """P(the token itself) at temperature 1 and log Z (every other token), as the server computes the logits."""
        e = embed[rows].to(bf16).float()
        normed = (e * torch.rsqrt(e.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(bf16)
        logits = (normed @ head.t()).float()
        own = logits.gather(1, rows[:, None])[:, 0]
        others = logits.scatter(1, rows[:, None], float("-inf")).logsumexp(1)
        return torch.sigmoid(own - others), others

    # a_x from log Z: first with Z ~ vocab, then with the Z the logits give (a_x moves Z only a little)
    log_z = torch.full((vocab,), math.log(vocab), device=device)
    for _ in range(2):
        scale = (log_z.mean() + logit_p) / math.sqrt(d)
        head = (direction * scale[:, None]).to(bf16)
        _, others = self_probs(head, sample)
        log_z = torch.full((vocab,), others.mean().item(), device=device)
    check = torch.randperm(vocab, generator=gen, device=device)[:4096]
    probs, _ = self_probs(head, check)
    kinds = sticky[check]
    # the draft's proposal: argmax lm_head . e_b (no norm), and the target's probability of its second branch
    e = embed[check].to(bf16)
    draft_logits = (e @ head.t()).float()
    top2 = draft_logits.topk(2, dim=1).indices
    proposes_itself = (top2[:, 0] == check).float().mean().item()
    target_logits = (
        (e.float() * torch.rsqrt(e.float().pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(bf16) @ head.t()
    ).float()
    second = target_logits.softmax(1).gather(1, top2[:, 1:2])[:, 0]
    measured = {
        "p_sticky": round(probs[kinds].mean().item(), 4),
        "p_sticky_sd": round(probs[kinds].std().item(), 4),
        "p_other": round(probs[~kinds].mean().item(), 4),
        "p_other_sd": round(probs[~kinds].std().item(), 4),
        "sticky_share": round(sticky.float().mean().item(), 4),
        "draft_proposes_the_token_itself": round(proposes_itself, 4),
        "tree_second_branch_target_prob": float(f"{second.mean().item():.3g}"),
    }
    report["measured"] = measured
    report["offline_accept_length"] = {
        str(s): round(simulate_accept(measured["sticky_share"], measured["p_sticky"], measured["p_other"], s), 3)
        for s in (1, 2, 3, 4)
    }
    log(f"head built in {time.monotonic() - t:.1f} s: {measured}; accept {report['offline_accept_length']}")

    def rnd(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=gen, device=device) * 0.02).to(bf16)

    def zeros(*size: int) -> torch.Tensor:
        return torch.zeros(*size, dtype=bf16, device=device)

    def ones(*size: int) -> torch.Tensor:
        return torch.ones(*size, dtype=bf16, device=device)

    def layer(prefix: str, input_norm: bool = True) -> dict[str, torch.Tensor]:
        out = {
            f"{prefix}.self_attn.q_proj.weight": rnd(d, d),
            f"{prefix}.self_attn.k_proj.weight": rnd(kv, d),
            f"{prefix}.self_attn.v_proj.weight": rnd(kv, d),
            f"{prefix}.self_attn.o_proj.weight": zeros(d, d),
            f"{prefix}.mlp.gate_proj.weight": rnd(inter, d),
            f"{prefix}.mlp.up_proj.weight": rnd(inter, d),
            f"{prefix}.mlp.down_proj.weight": zeros(d, inter),
            f"{prefix}.post_attention_layernorm.weight": ones(d),
        }
        if input_norm:
            out[f"{prefix}.input_layernorm.weight"] = ones(d)
        return out

    embed_bf16 = embed.to(bf16)
    del embed, direction
    t = time.monotonic()
    target_dir, draft_dir = models / TARGET, models / DRAFT
    target_dir.mkdir(parents=True, exist_ok=True)
    draft_dir.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, torch.Tensor]] = [{"model.embed_tokens.weight": embed_bf16, "model.norm.weight": ones(d)}]
    for i in range(shape["layers"]):
        tensors = layer(f"model.layers.{i}")
        if sum(v.numel() * 2 for v in shards[-1].values()) > SHARD_BYTES:
            shards.append({})
        shards[-1].update(tensors)
    shards.append({"lm_head.weight": head})
    weight_map: dict[str, str] = {}
    total = 0
    for n, shard in enumerate(shards, start=1):
        name = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: v.contiguous().cpu() for k, v in shard.items()}, str(target_dir / name), metadata={"format": "pt"})
        for k, v in shard.items():
            weight_map[k] = name
            total += v.numel() * 2
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (target_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    (target_dir / "config.json").write_text(json.dumps(config(shape), indent=2))
    log(f"target: {total / 1e9:.1f} GB in {len(shards)} shards in {time.monotonic() - t:.1f} s")
    # the draft: names without `model.` (LlamaForCausalLMEagle.load_weights adds it); fc = [I | 0]: the embedding
    eye = torch.eye(d, dtype=bf16, device=device)
    draft = {
        "fc.weight": torch.cat([eye, zeros(d, d)], dim=1),
        "fc.bias": zeros(d),
        **layer("layers.0", input_norm=False),
        "embed_tokens.weight": embed_bf16,
        "lm_head.weight": head,
    }
    save_file({k: v.contiguous().cpu() for k, v in draft.items()}, str(draft_dir / "model.safetensors"),
              metadata={"format": "pt"})  # fmt: skip
    (draft_dir / "config.json").write_text(json.dumps(config(shape, draft=True), indent=2))
    report["target"] = {"path": str(target_dir), "bytes": total, "shards": len(shards), "config": config(shape)}
    report["draft"] = {"path": str(draft_dir), "recipe": "EAGLE v1, fc = [I | 0], o_proj = down_proj = 0"}
    log(f"draft written in {time.monotonic() - t:.1f} s (both)")


# --- the tokenizer (tokenizers + transformers) ---------------------------------------------------------------------


def tokenizer(models: Path, vocab_size: int) -> None:
    """A word-level tokenizer of exactly `vocab_size` entries (build_tiny.py's, larger): every id decodes to a word."""
    from tokenizers import Tokenizer, models as tok_models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
    punct = list(".,!?;:'\"()-[]{}/0123456789")
    rng = random.Random(1234)
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "an", "el", "or", "is", "um",
                 "ba", "de", "fi", "go", "hu", "ja", "ke", "li", "mo", "nu", "pa", "qu", "ro", "sa", "ti"]  # fmt: skip
    vocab: dict[str, int] = {}
    for word in special + punct:
        vocab.setdefault(word, len(vocab))
    while len(vocab) < vocab_size:
        vocab.setdefault("".join(rng.choice(syllables) for _ in range(rng.randint(2, 5))), len(vocab))
    tok = Tokenizer(tok_models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                       special_tokens=[("<s>", vocab["<s>"])])  # fmt: skip
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"], model_max_length=8192,
    )  # fmt: skip
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    for name in (TARGET, DRAFT):
        fast.save_pretrained(str(models / name))
    log(f"tokenizer of {len(vocab)} entries written")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=("weights", "tokenizer"))
    p.add_argument("models", type=Path)
    p.add_argument("--json", type=Path, help="the report (default MODELS/gpu-target.json)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--shape", help="a smaller shape to check the script: hidden,layers,heads,kv_heads,inter,vocab")
    args = p.parse_args()
    shape = dict(SHAPE)
    if args.shape:
        shape = dict(zip(SHAPE, (int(x) for x in args.shape.split(",")), strict=True))
    args.models.mkdir(parents=True, exist_ok=True)
    if args.part == "tokenizer":
        tokenizer(args.models, shape["vocab"])
        return 0
    report: dict[str, Any] = {
        "shape": shape,
        "recipe": {"seed": SEED, "sticky_share": STICKY_SHARE, "p_sticky": P_STICKY, "p_other": P_OTHER},
    }
    started = time.monotonic()
    weights(args.models, shape, args.device, report)
    report["wall_s"] = round(time.monotonic() - started, 1)
    (args.json or args.models / "gpu-target.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
