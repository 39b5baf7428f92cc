"""Drafts that partly agree with the tiny random-weight target (issue 20), made from the target's own weights.

    python3 scripts/real_sglang/build_drafts.py MODELS [--json FILE] [--device cuda] [--build-target]
                                                [--prompts 64] [--input-len 128] [--output-len 128]

MODELS/tiny-llama is the target of build_tiny.py (with --build-target this script runs build_tiny.py first, in the
same process, so the imports are paid once). Nothing is downloaded; the same command on the same torch builds the
same drafts (fixed seeds). Writes, next to the target:

  sa-copy       STANDALONE draft: the target's files as they are. At temperature 0 it proposes what the target
                would say: accept length steps + 1 (the upper bound), up to kernel-level rounding differences.
  sa-p90, sa-p70, sa-p40
                STANDALONE drafts: the target's weights plus one fixed Gaussian noise direction (each tensor's
                own standard deviation x sigma; RMSNorm weights untouched) at three scales. Each sigma is found
                by bisection so that the draft's greedy token equals the target's on about 90 / 70 / 40 % of
                the positions of the target's own greedy continuations of random prompts (teacher forced).
                A STANDALONE draft is a full model of the target's size: on this tiny model a forward is a few
                kernel launches either way, so drafting costs about what the scheduler's round costs anyway.
  eagle-repeat  EAGLE (v1) head whose fc passes the target's hidden state through ([0 | I]) and whose layer adds
                nothing (o_proj and down_proj zero). SGLang gives an EAGLE v1 draft the target's embeddings and
                lm_head (EAGLEWorkerV2.init_lm_head), so the head's logits are the target's logits of the token
                it was just given: it proposes that token again. It agrees where the target repeats itself,
                which a random-weight target often does.
  eagle-wide    EAGLE head of hidden size 768 (the target's is 512): a draft whose shapes do not fit. SGLang
                loads it (its weights match its own config) and fails when it first runs it, in the draft's
                CUDA-graph capture (fc expects 2 x 768 inputs, gets embed 512 + hidden 512). The rules cannot
                see that: it is the setup that passes the rules and fails on the real server.

and measures every draft offline (transformers on the same device, the same kind of prompts as `opsconsole bench`'s
random workload: random token ids in [1000, 30000), --input-len in, --output-len greedy tokens out):
  agreement        share of positions where the draft's greedy token is the target's next token (teacher forced)
  accept_length    {steps: mean accepted tokens per verify} of SGLang's greedy chain verify (topk 1) simulated over
                   the target's continuations: a round proposes `steps` tokens (the draft's own greedy chain, which
                   is the teacher-forced prediction for as long as it matches), accepts the matching prefix plus
                   the target's bonus token, and the next round starts after it
  top2_hit         share of positions where the target's next token is among the draft's two best (what topk 2
                   can add at the first depth)
  chat_t07         on the bench's chat prompts at temperature 0.7: the mean probability the target gives the
                   draft's greedy token, which is about the chance SGLang's sampling verify accepts a drafted token;
                   on a random-weight target the distributions are nearly flat, so it is close to 0 (accept ~1.0)
The JSON (--json, default MODELS/drafts.json) holds each draft's recipe (kind, sigma, seed) and these figures.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import runpy
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
NOISE_SEED = 20
TARGETS = {"sa-p90": 0.90, "sa-p70": 0.70, "sa-p40": 0.40}
RANDOM_TOKEN_ID_RANGE = (1000, 30000)  # console/bench/workloads.py
STEPS = (1, 2, 3)


def log(msg: str) -> None:
    print(f"[build_drafts {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the target's continuations -------------------------------------------------------------------------------


def random_prompts(n: int, length: int, seed: int = 1) -> torch.Tensor:
    rng = random.Random(seed)
    lo, hi = RANDOM_TOKEN_ID_RANGE
    return torch.tensor([[rng.randrange(lo, hi) for _ in range(length)] for _ in range(n)])


@torch.no_grad()
def greedy(model: Any, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """The target's greedy continuation with its KV cache (no EOS stop: the bench forces the length)."""
    out = model(input_ids=prompts, use_cache=True)
    past = out.past_key_values
    nxt = out.logits[:, -1].argmax(-1)
    seq = [prompts, nxt[:, None]]
    for _ in range(new_tokens - 1):
        out = model(input_ids=nxt[:, None], past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1)
        seq.append(nxt[:, None])
    return torch.cat(seq, dim=1)


@torch.no_grad()
def predictions(model: Any, seqs: torch.Tensor, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced top-2 tokens at every position (position i predicts token i + 1)."""
    top1, top2 = [], []
    for i in range(0, seqs.shape[0], batch):
        logits = model(input_ids=seqs[i : i + batch]).logits
        best = logits.topk(2, dim=-1).indices
        top1.append(best[..., 0])
        top2.append(best[..., 1])
    return torch.cat(top1), torch.cat(top2)


# --- what SGLang's greedy verify would accept ----------------------------------------------------------------


def chain_accept(proposals: list[list[int]], seq: list[int], start: int, steps: int) -> list[int]:
    """Accepted tokens per verify round over one sequence. `proposals[t]` is the chain the draft proposes after
    the committed prefix seq[: t + 1]; a round accepts the prefix of it that matches seq, plus one bonus token."""
    rounds: list[int] = []
    t = start
    last = len(seq) - 1
    while t < last:
        chain = proposals[t][:steps]
        j = 0
        while j < len(chain) and t + j + 1 <= last and chain[j] == seq[t + j + 1]:
            j += 1
        accepted = min(j + 1, last - t)
        rounds.append(accepted)
        t += accepted
    return rounds


def teacher_chains(pred: list[int], steps: int) -> list[list[int]]:
    """A STANDALONE draft's greedy chain after prefix t equals its teacher-forced predictions while they match the
    sequence (and once one does not, the round ends there anyway)."""
    return [pred[t : t + steps] for t in range(len(pred))]


def repeat_chains(seq: list[int], steps: int) -> list[list[int]]:
    """eagle-repeat proposes the last committed token again, `steps` times."""
    return [[seq[t]] * steps for t in range(len(seq))]


def figures(
    seqs: torch.Tensor, top1: torch.Tensor | None, top2: torch.Tensor | None, start: int, repeat: bool = False
) -> dict[str, Any]:
    """Agreement, simulated accept length per steps and top-2 hits over the generated part of every sequence."""
    rounds: dict[int, list[int]] = {s: [] for s in STEPS}
    agree = hit2 = total = 0
    for row in range(seqs.shape[0]):
        seq = seqs[row].tolist()
        if repeat:
            pred = [seq[t] for t in range(len(seq))]
        else:
            assert top1 is not None and top2 is not None
            pred = top1[row].tolist()
            second = top2[row].tolist()
        for t in range(start, len(seq) - 1):
            total += 1
            agree += pred[t] == seq[t + 1]
            if not repeat:
                hit2 += pred[t] == seq[t + 1] or second[t] == seq[t + 1]
        for steps in STEPS:
            chains = repeat_chains(seq, steps) if repeat else teacher_chains(pred, steps)
            rounds[steps].extend(chain_accept(chains, seq, start, steps))
    out: dict[str, Any] = {
        "agreement": round(agree / total, 4),
        "accept_length": {str(s): round(sum(r) / len(r), 3) for s, r in rounds.items()},
        "positions": total,
    }
    if not repeat:
        out["top2_hit"] = round(hit2 / total, 4)
    return out


# --- drafts -------------------------------------------------------------------------------------------------------


def noise_direction(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One fixed Gaussian direction per weight matrix, scaled by that tensor's own std (CPU generator: the same
    numbers on every machine with this torch)."""
    gen = torch.Generator().manual_seed(NOISE_SEED)
    out = {}
    for name in sorted(state):
        w = state[name]
        if w.dim() < 2:  # RMSNorm weights stay as they are
            continue
        std = w.float().std().item()
        out[name] = (torch.randn(w.shape, generator=gen) * std).to(w.dtype)
    return out


def noisy_state(
    base: dict[str, torch.Tensor], direction: dict[str, torch.Tensor], sigma: float, device: str
) -> dict[str, torch.Tensor]:
    return {
        k: (v.float() + sigma * direction[k].to(device).float()).to(v.dtype) if k in direction else v
        for k, v in base.items()
    }


def copy_tokenizer(src: Path, dst: Path) -> None:
    for f in src.iterdir():
        if f.name not in ("model.safetensors", "config.json") and f.is_file():
            shutil.copy2(f, dst / f.name)


def eagle_weights(cfg: dict[str, Any], target: dict[str, torch.Tensor] | None, kind: str) -> dict[str, torch.Tensor]:
    """An EAGLE (v1) head's tensors, named as SGLang's LlamaForCausalLMEagle.load_weights expects (no `model.`)."""
    hid, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    gen = torch.Generator().manual_seed(NOISE_SEED + 1)

    def rnd(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def zeros(*shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=torch.bfloat16)

    w = {
        "fc.bias": zeros(hid),
        "layers.0.self_attn.q_proj.weight": rnd(hid, hid),
        "layers.0.self_attn.k_proj.weight": rnd(hid, hid),
        "layers.0.self_attn.v_proj.weight": rnd(hid, hid),
        "layers.0.mlp.gate_proj.weight": rnd(inter, hid),
        "layers.0.mlp.up_proj.weight": rnd(inter, hid),
        "layers.0.post_attention_layernorm.weight": torch.ones(hid, dtype=torch.bfloat16),
    }
    if kind == "repeat":
        assert target is not None
        # fc(cat(embed, hidden)) = hidden: SGLang concatenates the token's embedding first, the feature second.
        w["fc.weight"] = torch.cat([zeros(hid, hid), torch.eye(hid, dtype=torch.bfloat16)], dim=1)
        w["layers.0.self_attn.o_proj.weight"] = zeros(hid, hid)
        w["layers.0.mlp.down_proj.weight"] = zeros(hid, inter)
        w["embed_tokens.weight"] = target["model.embed_tokens.weight"].cpu().clone()
        w["lm_head.weight"] = target["lm_head.weight"].cpu().clone()
    else:
        w["fc.weight"] = rnd(hid, 2 * hid)
        w["layers.0.self_attn.o_proj.weight"] = rnd(hid, hid)
        w["layers.0.mlp.down_proj.weight"] = rnd(hid, inter)
        w["embed_tokens.weight"] = rnd(vocab, hid)
        w["lm_head.weight"] = rnd(vocab, hid)
    return w


def write_eagle(models: Path, name: str, cfg: dict[str, Any], weights: dict[str, torch.Tensor]) -> Path:
    from safetensors.torch import save_file

    out = models / name
    out.mkdir(parents=True, exist_ok=True)
    dc = dict(cfg)
    dc.update({"architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1, "model_type": "llama"})
    (out / "config.json").write_text(json.dumps(dc, indent=2))
    copy_tokenizer(models / "tiny-llama", out)
    save_file(
        {k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"), metadata={"format": "pt"}
    )
    return out


# --- main ---------------------------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", type=Path)
    p.add_argument("--json", type=Path, help="where the recipes and figures go (default MODELS/drafts.json)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--build-target", action="store_true", help="run build_tiny.py first (same process)")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=16, help="sequences per teacher-forced forward")
    p.add_argument("--iterations", type=int, default=12, help="bisection steps per noise scale")
    args = p.parse_args()
    started = time.monotonic()
    models = args.models.resolve()
    target_dir = models / "tiny-llama"
    if args.build_target or not (target_dir / "model.safetensors").exists():
        argv = sys.argv
        sys.argv = [str(HERE / "build_tiny.py"), str(models)]
        try:
            runpy.run_path(str(HERE / "build_tiny.py"), run_name="__main__")
        finally:
            sys.argv = argv
    from transformers import LlamaForCausalLM

    dev = args.device
    dtype = torch.bfloat16
    cfg = json.loads((target_dir / "config.json").read_text())
    target = LlamaForCausalLM.from_pretrained(str(target_dir), dtype=dtype).to(dev).eval()
    base = {k: v.detach().clone() for k, v in target.state_dict().items()}
    prompts = random_prompts(args.prompts, args.input_len).to(dev)
    t = time.monotonic()
    seqs = greedy(target, prompts, args.output_len)
    start = args.input_len  # the first generated token is the prefill's: rounds start after it
    log(f"target: {args.prompts} greedy continuations of {args.output_len} tokens in {time.monotonic() - t:.1f} s")
    distinct = [len(set(seqs[r, start:].tolist())) for r in range(seqs.shape[0])]
    report: dict[str, Any] = {
        "device": dev,
        "torch": torch.__version__,
        "workload": {
            "prompts": args.prompts,
            "input_len": args.input_len,
            "output_len": args.output_len,
            "token_ids": list(RANDOM_TOKEN_ID_RANGE),
            "temperature": 0.0,
        },
        "target": {
            "path": str(target_dir),
            "distinct_tokens_per_continuation": {
                "min": min(distinct),
                "median": sorted(distinct)[len(distinct) // 2],
                "max": max(distinct),
            },
        },
        "drafts": {},
    }

    # sa-copy: the target itself
    copy_dir = models / "sa-copy"
    shutil.rmtree(copy_dir, ignore_errors=True)
    shutil.copytree(target_dir, copy_dir)
    top1, top2 = predictions(target, seqs, args.batch)
    report["drafts"]["sa-copy"] = {
        "algorithm": "STANDALONE", "path": str(copy_dir), "recipe": "the target's files unchanged", "sigma": 0.0,
        **figures(seqs, top1, top2, start),
    }  # fmt: skip
    log(f"sa-copy: {report['drafts']['sa-copy']['accept_length']}")

    # sa-pNN: the same noise direction at the scale that gives the asked-for agreement
    direction = noise_direction({k: v.cpu() for k, v in base.items()})
    draft = LlamaForCausalLM.from_pretrained(str(target_dir), dtype=dtype).to(dev).eval()
    cache: dict[float, dict[str, Any]] = {}

    def measure(sigma: float) -> dict[str, Any]:
        if sigma not in cache:
            draft.load_state_dict(noisy_state(base, direction, sigma, dev))
            d1, d2 = predictions(draft, seqs, args.batch)
            cache[sigma] = figures(seqs, d1, d2, start)
        return cache[sigma]

    for name, goal in TARGETS.items():
        lo, hi = 1e-4, 4.0  # log-bisection on sigma: agreement falls as sigma grows
        best = None
        for _ in range(args.iterations):
            mid = math.sqrt(lo * hi)
            got = measure(mid)["agreement"]
            if best is None or abs(got - goal) < abs(measure(best)["agreement"] - goal):
                best = mid
            if got > goal:
                lo = mid
            else:
                hi = mid
        assert best is not None
        sigma = float(f"{best:.4g}")
        draft.load_state_dict(noisy_state(base, direction, sigma, dev))
        out = models / name
        shutil.rmtree(out, ignore_errors=True)
        draft.save_pretrained(str(out), safe_serialization=True)
        c = json.loads((out / "config.json").read_text())
        c["torch_dtype"] = "bfloat16"
        c.setdefault("dtype", "bfloat16")
        (out / "config.json").write_text(json.dumps(c, indent=2))
        copy_tokenizer(target_dir, out)
        recipe = (f"target + sigma x N(0, std of each weight matrix), noise seed {NOISE_SEED}, norms unchanged; "
                  f"sigma by bisection for agreement {goal:.2f}")  # fmt: skip
        report["drafts"][name] = {
            "algorithm": "STANDALONE", "path": str(out), "recipe": recipe, "sigma": sigma, "goal": goal,
            **measure(sigma),
        }  # fmt: skip
        log(f"{name}: sigma {sigma}, {report['drafts'][name]['agreement']} agreement, "
            f"accept {report['drafts'][name]['accept_length']}")  # fmt: skip

    # EAGLE heads
    out = write_eagle(models, "eagle-repeat", cfg, eagle_weights(cfg, base, "repeat"))
    report["drafts"]["eagle-repeat"] = {
        "algorithm": "EAGLE", "path": str(out), "sigma": None,
        "recipe": "fc = (0, I) (passes the target's hidden state), o_proj = down_proj = 0; SGLang shares the "
                  "target's embed/lm_head: proposes the last token again",
        **figures(seqs, None, None, start, repeat=True),
    }  # fmt: skip
    log(f"eagle-repeat: {report['drafts']['eagle-repeat']['accept_length']}")
    wide = dict(cfg, hidden_size=768)
    out = write_eagle(models, "eagle-wide", wide, eagle_weights(wide, None, "random"))
    report["drafts"]["eagle-wide"] = {
        "algorithm": "EAGLE", "path": str(out), "sigma": None,
        "recipe": "random EAGLE head of hidden size 768 (target 512): loads, then its fc gets 1024 inputs for 1536",
        "expected": "the start fails in the draft's CUDA-graph capture (shape mismatch)",
    }  # fmt: skip

    # chat prompts at temperature 0.7: how much of the target's probability the drafts' greedy tokens get
    report["chat_t07"] = chat_t07(args, target, {n: report["drafts"][n] for n in ("sa-copy", *TARGETS)}, base,
                                  direction, draft, target_dir)  # fmt: skip
    report["wall_s"] = round(time.monotonic() - started, 1)
    dest = args.json or models / "drafts.json"
    dest.write_text(json.dumps(report, indent=1))
    log(f"wrote {dest} in {report['wall_s']} s")
    return 0


@torch.no_grad()
def chat_t07(
    args: argparse.Namespace,
    target: Any,
    drafts: dict[str, dict[str, Any]],
    base: dict[str, torch.Tensor],
    direction: dict[str, torch.Tensor],
    draft: Any,
    target_dir: Path,
) -> dict[str, Any]:
    """On the chat workload's prompts (raw text, as the bench sends them to /generate): the target's sampled
    continuation at temperature 0.7, and per draft the mean target probability of the draft's greedy token."""
    from transformers import AutoTokenizer

    prompts_file = Path(__file__).resolve().parents[2] / "console" / "bench" / "chat_prompts.json"
    texts = json.loads(prompts_file.read_text())[:16]
    tok = AutoTokenizer.from_pretrained(str(target_dir))
    dev = args.device
    gen = torch.Generator(device=dev).manual_seed(7)
    out: dict[str, Any] = {"prompts": len(texts), "temperature": 0.7}
    seqs = []
    for text in texts:
        ids = torch.tensor([tok(text).input_ids], device=dev)
        res = target(input_ids=ids, use_cache=True)
        past, seq = res.past_key_values, [ids]
        for _ in range(min(64, args.output_len)):
            probs = torch.softmax(res.logits[:, -1].float() / 0.7, -1)
            nxt = torch.multinomial(probs, 1, generator=gen)
            seq.append(nxt)
            res = target(input_ids=nxt, past_key_values=past, use_cache=True)
            past = res.past_key_values
        seqs.append((torch.cat(seq, 1), ids.shape[1]))
    out["target_max_prob_mean"] = round(
        sum(torch.softmax(target(input_ids=s).logits[0, p - 1 : -1].float() / 0.7, -1).max(-1).values.mean().item()
            for s, p in seqs) / len(seqs), 6)  # fmt: skip
    for name, info in drafts.items():
        if info["sigma"]:
            draft.load_state_dict(noisy_state(base, direction, info["sigma"], dev))
        model = draft if info["sigma"] else target
        probs = []
        for s, p in seqs:
            t_probs = torch.softmax(target(input_ids=s).logits[0, p - 1 : -1].float() / 0.7, -1)
            d_tok = model(input_ids=s).logits[0, p - 1 : -1].argmax(-1)
            probs.append(t_probs.gather(-1, d_tok[:, None]).mean().item())
        out[name] = {"accept_prob_per_token": round(sum(probs) / len(probs), 6)}
    return out


if __name__ == "__main__":
    sys.exit(main())
