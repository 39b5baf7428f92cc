"""Made-up traffic for the demo and the tests, generated here (no download): open chat, code, and a production trace.

    write_datasets(Path("datasets"), count=200, seed=1)   # -> datasets/chat.json, datasets/code.jsonl

- `chat.json`: ShareGPT JSON (the file SGLang's bench_serving reads): a user's question in varied everyday prose
  and an answer, whose length is the request's output length. Each sentence's parts are drawn from their own
  lists. The stand-in reads every prompt as chat (console.sim.content.classify_prompt): acceptance as calibrated.
- `code.jsonl`: prompt JSONL, `{"prompt": ..., "output_len": N}`: "complete this module" with a Python module of
  classes whose properties, setters and checks follow one template, as generated and templated code does. The
  stand-in reads every prompt as code, and an EAGLE-style draft accepts more on it, as published (Kimi's EAGLE3
  chain of 2: 1.57 against 1.38 on the chat set).
- `trace.jsonl` (`mooncake_trace`): a trace in Mooncake's published format (console.bench.traces): Poisson arrivals
  (`timestamp` ms), each request a conversation of one of a few documents, its prompt the document's first blocks
  (`hash_ids` shared with every request that read as far) and blocks of its own, `input_length` within its last block,
  `output_length` its answer's.
Deterministic for a seed. scripts/make_datasets.py writes them from the command line.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

# Open chat: sentences of an optional opener, a subject, a verb, an object and an optional modifier, each drawn
# from its own list, so that a run of three words rarely comes back within a prompt.
_OPENERS = (
    "Honestly,", "Last week", "Since spring", "After work", "Yesterday", "Lately", "Frankly,", "In March",
    "Every morning", "On weekends", "Twice now", "Somehow", "Right now", "Until recently", "Most evenings",
    "Back home", "This year", "Sometimes", "At first", "Meanwhile",
)  # fmt: skip
_SUBJECTS = (
    "my sister", "our team", "the landlord", "a friend", "my manager", "the neighbours", "my grandfather", "I",
    "we", "the intern", "our cat", "the school", "my doctor", "the council", "a colleague", "the baker", "my son",
    "our coach", "the plumber", "my partner", "everyone here", "the club", "my cousin", "nobody", "the teacher",
)  # fmt: skip
_VERBS = (
    "wants", "tried", "keeps postponing", "asked about", "forgot", "loved", "needs", "suggested", "complained about",
    "started", "finished", "recommended", "ignored", "mentioned", "paid for", "planned", "booked", "cancelled",
    "compared", "fixed", "painted", "measured", "sold", "borrowed", "described", "cooked", "moved", "printed",
    "cleaned", "counted", "questioned", "repaired", "signed", "ordered", "photographed", "rehearsed",
)  # fmt: skip
_OBJECTS = (
    "sourdough bread", "a trip to Lisbon", "piano lessons", "the interview", "compost", "marathon training",
    "a wedding speech", "flights abroad", "houseplants", "next year's budget", "birdwatching", "the garden shed",
    "night photography", "a vegetarian menu", "car savings", "chess openings", "public speaking", "tax forms",
    "an old laptop", "camping gear", "rent", "a broken bicycle", "novel chapters", "history essays", "kitchen tiles",
    "the attic", "winter coats", "concert tickets", "language classes", "a job offer", "the fridge", "yoga",
    "the roof", "dance classes", "a puppy", "insurance", "the wifi", "knitting patterns", "paperwork", "fish tanks",
)  # fmt: skip
_MODIFIERS = (
    "before the holidays", "on a tight budget", "without much help", "for the third time", "again", "too late",
    "quite cheaply", "with some friends", "over the phone", "near the station", "by Friday", "all weekend",
    "in a hurry", "after dinner", "despite the rain", "online", "for my parents", "at the market", "twice",
    "very carefully", "for no reason", "with mixed results", "in secret", "at midnight", "this month",
)  # fmt: skip
_ASKS = (
    "Could you help me sort this out?", "What would you do?", "Any advice?", "How should I start?",
    "Is that reasonable?", "What am I missing?", "Where do I begin?", "Does that make sense?",
    "Can you suggest a plan?", "Which option is better?", "How long should it take?", "Is it worth it?",
)  # fmt: skip


def _chat_text(rng: random.Random, sentences: int, question: bool) -> str:
    parts = []
    for _ in range(sentences):
        words = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)]
        if rng.random() < 0.4:
            words.insert(0, rng.choice(_OPENERS))
        if rng.random() < 0.5:
            words.append(rng.choice(_MODIFIERS))
        text = " ".join(words)
        parts.append(text[0].upper() + text[1:] + ".")
    if question:
        parts.append(rng.choice(_ASKS))
    return " ".join(parts)


_FIELDS = (
    "name", "email", "address", "phone", "status", "owner", "created_at", "updated_at", "quantity", "price",
    "currency", "region", "priority", "due_date", "title", "notes", "score", "version", "parent_id", "tags",
)  # fmt: skip
_ENTITIES = ("Customer", "Order", "Invoice", "Ticket", "Shipment", "Product", "Account", "Project", "Task", "Report")


def chat_conversations(
    count: int,
    seed: int = 1,
    *,
    prompt_sentences: tuple[int, int] = (1, 24),
    answer_sentences: tuple[int, int] = (5, 40),
) -> list[dict[str, Any]]:
    """ShareGPT records: a question of 1-24 sentences and a question mark, an answer of 5-40 sentences (about 6 words
    a sentence), or as many as asked."""
    rng = random.Random(f"chat:{seed}")
    out = []
    for i in range(count):
        prompt = _chat_text(rng, rng.randint(*prompt_sentences), question=True)
        answer = _chat_text(rng, rng.randint(*answer_sentences), question=False)
        out.append(
            {
                "id": f"chat-{i}",
                "conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": answer}],
            }
        )
    return out


def _class_source(rng: random.Random, entity: str, fields: list[str]) -> str:
    lines = [f"class {entity}:", f'    """A {entity.lower()} record."""', ""]
    lines.append("    def __init__(self, " + ", ".join(f"{f}=None" for f in fields) + "):")
    lines += ["        self._frozen = False", "        self._changed = False"]
    lines += [f"        self._{f} = {f}" for f in fields]
    for field in fields:
        lines += [
            "",
            "    @property",
            f"    def {field}(self):",
            f"        return self._{field}",
            "",
            f"    @{field}.setter",
            f"    def {field}(self, value):",
            "        if value is None:",
            '            raise ValueError("value must not be None")',
            "        if self._frozen:",
            '            raise AttributeError("this record is frozen")',
            "        self._changed = True",
            f"        self._{field} = value",
        ]
    lines += [
        "",
        "    def freeze(self):",
        "        self._frozen = True",
        "        return self",
        "",
        "    def is_changed(self):",
        "        return self._changed",
        "",
        "    def to_dict(self):",
        "        return {",
        *[f'            "{f}": self._{f},' for f in fields],
        "        }",
        "",
    ]
    return "\n".join(lines)


def code_prompts(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """Prompt JSONL records: a module of 1-3 classes to complete, and the length of the rest of it."""
    rng = random.Random(f"code:{seed}")
    out = []
    for _ in range(count):
        classes = [
            _class_source(rng, entity, rng.sample(_FIELDS, rng.randint(3, 8)))
            for entity in rng.sample(_ENTITIES, rng.randint(1, 3))
        ]
        prompt = "Complete this Python module, keeping its style:\n\n" + "\n\n".join(classes)
        out.append({"prompt": prompt, "output_len": rng.randint(100, 450)})
    return out


def write_datasets(folder: Path, *, count: int = 200, seed: int = 1) -> tuple[Path, Path]:
    """chat.json (ShareGPT) and code.jsonl (prompt JSONL) in `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    chat, code = folder / "chat.json", folder / "code.jsonl"
    chat.write_text(json.dumps(chat_conversations(count, seed), indent=1) + "\n", encoding="utf-8")
    code.write_text("".join(json.dumps(r) + "\n" for r in code_prompts(count, seed)), encoding="utf-8")
    return chat, code


def mooncake_trace(
    count: int,
    seed: int = 1,
    *,
    rate: float = 2.0,
    documents: int = 4,
    shared_blocks: tuple[int, int] = (1, 12),
    own_blocks: tuple[int, int] = (0, 3),
    output_len: tuple[int, int] = (16, 256),
    block_tokens: int = 512,
) -> list[dict[str, Any]]:
    """Mooncake trace records (see the module's doc): `count` requests arriving at `rate` per second (Poisson), each
    reading the first 1-12 blocks of one of `documents` documents (the first documents more often), then 0-3 blocks
    of its own."""
    rng = random.Random(f"trace:{seed}")
    next_id = documents * 1000
    out = []
    at = 0.0
    for _ in range(count):
        document = min(int(rng.expovariate(1.0)), documents - 1)
        shared = [document * 1000 + b for b in range(rng.randint(*shared_blocks))]
        own = list(range(next_id, next_id + rng.randint(*own_blocks)))
        next_id += len(own)
        ids = shared + own
        out.append(
            {
                "timestamp": int(at * 1000),
                "input_length": block_tokens * (len(ids) - 1) + rng.randint(1, block_tokens),
                "output_length": rng.randint(*output_len),
                "hash_ids": ids,
            }
        )
        at += rng.expovariate(rate)
    return out


def write_trace(path: Path, *, count: int = 200, seed: int = 1, rate: float = 2.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in mooncake_trace(count, seed, rate=rate)), encoding="utf-8")
    return path
