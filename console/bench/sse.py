"""Incremental parsers for SGLang's streamed responses (pure, no I/O).

A parser is fed the raw response body as it arrives, with the arrival time, and fills a RequestResult with
bench_serving's per-request measurements. Both are written for speed, because at high concurrency the
client's own parsing is what limits how many streamed events per second a benchmark can follow:
- /generate events carry the *cumulative* text, so decoding every event as JSON costs O(n²) per request.
  Only `completion_tokens` is read from each event, by a byte search; the last event (which carries
  `finish_reason` and the speculative counters) is decoded once at the end.
- OpenAI chat chunks are small; each is decoded. With `continuous_usage_stats` every chunk says how many
  tokens it carries, so a chunk with k tokens is split into k ITL entries like on /generate.
"""

from __future__ import annotations

import json
from typing import Any

from console.bench.metrics import RequestResult
from console.sglang.spec_meta import read_spec_meta

_COMPLETION_KEY = b'"completion_tokens":'
_DONE = b"[DONE]"


class StreamParser:
    """Common framing: SSE events separated by a blank line, each `data: <payload>`."""

    def __init__(self, result: RequestResult, start: float) -> None:
        self.result = result
        self.start = start
        self.done = False
        self._buf = b""
        self._last_token_time = 0.0
        self._tokens = 0

    def feed(self, data: bytes, now: float) -> None:
        buf = self._buf + data if self._buf else data
        pos = 0
        while True:
            end = buf.find(b"\n\n", pos)
            if end < 0:
                break
            event = buf[pos:end]
            pos = end + 2
            if event.startswith(b"data:"):
                self.result.events += 1
                payload = event[5:].strip()
                if payload == _DONE:
                    self.done = True
                    self.result.latency = now - self.start
                else:
                    self._on_event(payload, now)
                    self.result.latency = now - self.start
        self._buf = buf[pos:]

    def _on_tokens(self, total: int, now: float) -> None:
        new = total - self._tokens
        if new <= 0:
            return
        if self._tokens == 0:
            self.result.ttft = now - self.start
        else:
            gap = (now - self._last_token_time) / new
            self.result.itl.extend([gap] * new)
        self._tokens = total
        self._last_token_time = now

    def _on_event(self, payload: bytes, now: float) -> None:
        raise NotImplementedError

    def _take_spec(self, meta: dict[str, Any]) -> None:
        """The speculative figures of the final meta_info (or sglext.spec_tokens_details), in any release's
        spelling (console.sglang.spec_meta), and which keys carried them."""
        spec = read_spec_meta(meta)
        if not spec.keys:
            return
        r = self.result
        r.spec_meta_keys = list(spec.keys)
        if spec.verify_ct is not None:
            r.spec_verify_ct = spec.verify_ct
        if spec.histogram is not None:
            r.spec_accept_histogram = spec.histogram
        if spec.correct_drafts is not None:
            r.spec_correct_drafts = spec.correct_drafts
        if spec.proposed_drafts is not None:
            r.spec_proposed_drafts = spec.proposed_drafts

    def _fail(self, message: str) -> None:
        self.result.success = False
        self.result.error = message[:300]
        self.done = True

    def finish(self) -> RequestResult:
        """Call once the body ended. A stream without `[DONE]` is a failed request, never a short one."""
        r = self.result
        if r.error:
            r.success = False
        elif not self.done:
            r.success = False
            r.error = "stream ended before [DONE]"
        elif self._tokens == 0:
            r.success = False
            r.error = "no output tokens"
        else:
            r.success = True
            r.output_len = self._tokens
        return r


def _error_message(obj: Any) -> str:
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


class GenerateStreamParser(StreamParser):
    """SGLang's native /generate stream."""

    def __init__(self, result: RequestResult, start: float) -> None:
        super().__init__(result, start)
        self._last_payload = b""
        self._last_body: tuple[int, int] | None = None  # the last event's payload span in the current buffer

    def feed(self, data: bytes, now: float) -> None:
        # The hot loop of the whole client (one pass per SSE event): inlined, locals only.
        buf = self._buf + data if self._buf else data
        result = self.result
        pos = 0
        find = buf.find
        rfind = buf.rfind
        key_len = len(_COMPLETION_KEY)
        while True:
            end = find(b"\n\n", pos)
            if end < 0:
                break
            start = pos
            pos = end + 2
            if not buf.startswith(b"data:", start):
                continue
            result.events += 1
            result.latency = now - self.start
            body = start + 5
            if buf[body] == 0x20:
                body += 1
            if buf.startswith(b"[DONE]", body):
                self.done = True
                continue
            if buf.startswith(b'{"error"', body):
                self._fail(_error_message(json.loads(buf[body:end])))
                continue
            key = rfind(_COMPLETION_KEY, body, end)
            if key >= 0:
                i = key + key_len
                while buf[i] == 0x20:
                    i += 1
                j = i
                while 0x30 <= buf[j] <= 0x39:
                    j += 1
                if j > i:
                    total = int(buf[i:j])
                    new = total - self._tokens
                    if new > 0:
                        if self._tokens == 0:
                            result.ttft = now - self.start
                        else:
                            result.itl.extend([(now - self._last_token_time) / new] * new)
                        self._tokens = total
                        self._last_token_time = now
            self._last_body = (body, end)
        if self._last_body is not None and self._last_body[1] <= pos:
            self._last_payload = buf[self._last_body[0] : self._last_body[1]]
            self._last_body = None
        self._buf = buf[pos:]

    def _on_event(self, payload: bytes, now: float) -> None:  # pragma: no cover - feed() handles events
        raise AssertionError("GenerateStreamParser.feed parses events itself")

    def finish(self) -> RequestResult:
        if self._last_payload and not self.result.error:
            try:
                meta = json.loads(self._last_payload).get("meta_info") or {}
            except ValueError:
                meta = {}
            if isinstance(meta.get("prompt_tokens"), int):
                self.result.prompt_len = meta["prompt_tokens"]
            self._take_spec(meta)
            reason = meta.get("finish_reason")
            if isinstance(reason, dict):
                self.result.finish_reason = str(reason.get("type"))
                if reason.get("type") == "abort":
                    self.result.error = f"aborted by the server: {reason.get('message', '')}"
        return super().finish()


class ChatStreamParser(StreamParser):
    """OpenAI-compatible /v1/chat/completions stream (SGLang's shapes)."""

    def __init__(self, result: RequestResult, start: float) -> None:
        super().__init__(result, start)
        self._chunks = 0
        self._usage_tokens: int | None = None

    def _on_event(self, payload: bytes, now: float) -> None:
        obj = json.loads(payload)
        if "error" in obj and not obj.get("choices"):
            self._fail(_error_message(obj))
            return
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                self.result.prompt_len = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                self._usage_tokens = usage["completion_tokens"]
        details = (obj.get("sglext") or {}).get("spec_tokens_details")
        if isinstance(details, dict):
            self._take_spec(details)
        for choice in obj.get("choices") or ():
            if choice.get("finish_reason"):
                self.result.finish_reason = str(choice["finish_reason"])
            if (choice.get("delta") or {}).get("content"):
                self._chunks += 1
                # Per-chunk token counts come from continuous usage; without it, one token per chunk.
                total = self._usage_tokens if self._usage_tokens is not None else self._chunks
                self._on_tokens(max(total, self._tokens + 1), now)

    def finish(self) -> RequestResult:
        result = super().finish()
        if result.success and self._usage_tokens is not None:
            result.output_len = self._usage_tokens
        return result
