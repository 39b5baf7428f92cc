"""Load of known lengths for the shape tests (tests/bench/test_shape_from_server.py) and issue 23's run on the GPU
machine (scripts/real_sglang/traffic_session.py): closed loop from threads, prompts of 100..2000 tokens by default (half
of each from one shared sequence), outputs of 100..500 forced, every finished request noted (when, the prompt's length,
the output's, the tokens the server says it found cached). Standard library only: it also runs beside real SGLang."""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request

SHARED = [random.Random(5).randrange(1000, 30000) for _ in range(2000)]


class KnownLoad:
    def __init__(
        self, url: str, workers: int = 12, prompts: tuple[int, int] = (100, 2000), outputs: tuple[int, int] = (100, 500)
    ) -> None:
        self.url = url
        self.prompts, self.outputs = prompts, outputs
        self.stop = threading.Event()
        self.done: list[tuple[float, int, int, int]] = []
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(workers)]

    def __enter__(self) -> KnownLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            prompt_len, output_len = rng.randint(*self.prompts), rng.randint(*self.outputs)
            ids = SHARED[: prompt_len // 2] + [rng.randrange(1000, 30000) for _ in range(prompt_len - prompt_len // 2)]
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True}}
            request = urllib.request.Request(
                self.url + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    meta = json.loads(answer.read())["meta_info"]
            except OSError as exc:  # counted: the tests and the GPU session say how many
                self.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            self.done.append((time.monotonic(), prompt_len, meta["completion_tokens"], meta["cached_tokens"]))

    def wait_for(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.done) < count:
            assert not self.errors, self.errors[:3]
            assert time.monotonic() < deadline, f"the load finished {len(self.done)} requests, not {count}"
            time.sleep(0.01)
