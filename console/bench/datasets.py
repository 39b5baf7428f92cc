"""The operator's own prompts for `bench --dataset FILE`: a file read, checked and sampled without loading it whole
(pure apart from reading that file; standard library only).

    sample = sample_dataset(Path("traffic.jsonl"), size=1000, seed=1)   # DatasetError names what is wrong
    sample.format, sample.sha256, sample.requests                     # console.bench.workloads.DatasetSample

Formats, told apart by the first record (named in the output as `format`):
- `sharegpt`: one JSON document, a list of objects with `conversations` (or `conversation`): a list of turns,
  each an object with a string `value` (`from` is not read) — the file SGLang's bench_serving reads. As there,
  turn 0 is the prompt and turn 1 the reference answer, whose length is the request's output length; a record
  with fewer than two turns, or a prompt or answer under 2 words, is skipped and counted.
- `prompt-jsonl`: one JSON object a line, `{"prompt": "...", "output_len"?: N}`.
- `chat-jsonl`: one JSON object a line, OpenAI chat: `{"messages": [{"role": ..., "content": ...}, ...],
  "max_tokens"?: N}` (or `max_completion_tokens`); sent to the chat API.
Blank lines of a JSONL file are skipped and counted.

Lengths are counted by `count`, a LengthCounter (a batch of texts -> their lengths): the model's tokenizer where the
caller has one (console.core.bench.tokens: the server's /tokenize, else the tokenizer files on the host), counting
as bench_serving's tokenizer.encode(text) does (special tokens included); without one, whitespace-separated words
(`count_words`), said as the sample's `length_unit`. The lengths set the ShareGPT output lengths and its length
filter (bench_serving's, in tokens), and the prompt lengths checked against the context length; the server's own
prompt count replaces them in every figure.

Sampling (`size` requests, `seed`): the same file, size and seed give the same requests in the same order. A JSONL
file with at most `size` usable records is used whole, in its own order.
- JSONL up to WHOLE_FILE_BYTES: read at once, every line checked, `size` records drawn without replacement
  (random.Random(seed).sample), in the order drawn.
- A larger JSONL file is never read whole before the first request: lines are picked at random byte positions
  (the line after the first newline past each position, seeded), and only those lines are read and checked, with
  the first line (it names the format) and the last (a file cut short ends in a broken line). A line's chance is
  the length of the line before it, which says nothing about the line itself, so prompt and output lengths are not
  biased (unless the file is sorted by length). How many lines the file holds is estimated from the lines read.
  Its sha256 needs one read of the whole file: `file_sha256`, which the caller runs beside the benchmark
  (console.core.bench). A 1 GB file: benchmarks/bench_dataset_sample.py.
- ShareGPT JSON: bench_serving's own selection, so that both send the same requests in the same order for the same
  file and --seed: the records with two turns, in file order, shuffled with random.Random(seed) (bench_serving:
  random.seed(--seed), then random.shuffle), then the first `size` that pass its length filter. In words every
  record is measured as it is read; with a counter only the records taken in the shuffled order are (in batches of
  the requests still wanted and an eighth more), as bench_serving tokenizes only until it has its `size`. Parsed as a
  stream, record by record (json.JSONDecoder.raw_decode on a growing buffer, at most MAX_RECORD_BYTES a record),
  hashed as it is read, every record checked; a file over WHOLE_FILE_BYTES is parsed twice rather than held (the
  second pass keeps only the chosen records' text). Its time grows with the file (about 1 s a pass for 300 MB).
Bad input raises DatasetError naming the file, the line (and the JSON path in it) and what was expected: an empty
file, bytes that are not UTF-8, JSON cut short, a line of another format, a missing or mistyped field.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

from console.bench import traces
from console.bench.workloads import DatasetRequest, DatasetSample

DatasetFormat = Literal["sharegpt", "prompt-jsonl", "chat-jsonl", "mooncake-trace"]
FORMAT_NAMES: dict[str, str] = {
    "sharegpt": "ShareGPT JSON",
    "prompt-jsonl": "prompt JSONL",
    "chat-jsonl": "OpenAI chat JSONL",
    "mooncake-trace": "Mooncake trace JSONL",
}
EXPECTED = {
    "sharegpt": '[{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}, ...]',
    "prompt-jsonl": '{"prompt": "...", "output_len": 128} (output_len optional)',
    "chat-jsonl": '{"messages": [{"role": "user", "content": "..."}], "max_tokens": 128} (max_tokens optional)',
    "mooncake-trace": traces.EXPECTED,
}
ANY_FORMAT = 'a ShareGPT JSON list, or JSONL with {"prompt": ...} or {"messages": [...]} on every line'
DEFAULT_SAMPLE = 1000  # bench_serving's --num-prompts default
READ_BYTES = 16 * 1024 * 1024
CHUNK_BYTES = 64 * 1024
# A JSONL file up to this size is read whole and every line checked; a larger one is sampled by position.
WHOLE_FILE_BYTES = 64 * 1024 * 1024
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record (line or list element) larger than this is refused, not buffered
MIN_WORDS = 2  # bench_serving drops prompts and answers shorter than 2 tokens


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file, where in it and what was expected."""

    def __init__(self, path: Path | str, where: str, problem: str, expected: str | None = None) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        self.expected = expected
        text = f"{path}: {where + ': ' if where else ''}{problem}"
        super().__init__(text + (f"; expected {expected}" if expected else ""))


def count_words(text: str) -> int:
    return len(text.split())


# A batch of texts -> their lengths, in order (the model's tokenizer; console.core.bench.tokens makes them).
LengthCounter = Callable[[Sequence[str]], list[int]]


def _text(value: Any) -> str | None:
    """A message's content: a string, or OpenAI's list of parts (their `text`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return " ".join(str(p.get("text", "")) for p in value)
    return None


def _length(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


# --- one record -----------------------------------------------------------------------------------------------


@dataclass
class _Problem(Exception):
    """What is wrong with one record: the JSON path in it and the problem (the caller adds file and line)."""

    path: str
    problem: str


def format_of(record: Any) -> DatasetFormat | None:
    """The format a JSONL line's object belongs to, None when it is none of them."""
    if not isinstance(record, dict):
        return None
    if traces.is_trace_record(record):
        return "mooncake-trace"
    if "messages" in record:
        return "chat-jsonl"
    if "prompt" in record:
        return "prompt-jsonl"
    if "conversations" in record or "conversation" in record:
        return "sharegpt"
    return None


def prompt_request(record: Any) -> DatasetRequest:
    if not isinstance(record, dict) or "prompt" not in record:
        raise _Problem("", 'no "prompt"')
    prompt = record["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise _Problem(".prompt", "not a non-empty string")
    output_len = record.get("output_len")
    if output_len is not None and _length(output_len) is None:
        raise _Problem(".output_len", f"{output_len!r} is not a whole number ≥ 1")
    return DatasetRequest(prompt=prompt, prompt_len=count_words(prompt), output_len=output_len)


def chat_request(record: Any) -> DatasetRequest:
    if not isinstance(record, dict) or "messages" not in record:
        raise _Problem("", 'no "messages"')
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        raise _Problem(".messages", "not a non-empty list")
    kept: list[dict[str, Any]] = []
    words = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _Problem(f".messages[{i}]", "not an object")
        role, content = message.get("role"), _text(message.get("content"))
        if not isinstance(role, str) or not role:
            raise _Problem(f".messages[{i}].role", "missing or not a string")
        if content is None:
            raise _Problem(f".messages[{i}].content", "missing, or neither a string nor a list of text parts")
        kept.append({"role": role, "content": message["content"]})
        words += 1 + count_words(content)  # the role word and the text, as a chat template lays them out
    key = "max_tokens" if "max_tokens" in record else "max_completion_tokens"
    output_len = record.get(key)
    if output_len is not None and _length(output_len) is None:
        raise _Problem(f".{key}", f"{output_len!r} is not a whole number ≥ 1")
    return DatasetRequest(messages=tuple(kept), prompt_len=words, output_len=output_len)


def chat_text(messages: Sequence[dict[str, Any]]) -> str:
    """The text a token counter measures for a chat request: each message's role word and its text, as a chat
    template lays them out (the template's own markers are not counted: an estimate, as the words are)."""
    return " ".join(f"{m['role']} {_text(m['content']) or ''}" for m in messages)


def _counted_prompts(requests: Sequence[DatasetRequest], count: LengthCounter) -> tuple[DatasetRequest, ...]:
    """JSONL requests with their prompt lengths in the counter's unit (their output lengths are the file's own)."""
    texts = [chat_text(r.messages) if r.messages else r.prompt for r in requests]
    lengths = count(texts) if texts else []
    return tuple(replace(r, prompt_len=n) for r, n in zip(requests, lengths, strict=True))


def sharegpt_request(record: Any) -> DatasetRequest | str:
    """The request a ShareGPT record makes, or why it is skipped (bench_serving's filters)."""
    if not isinstance(record, dict):
        raise _Problem("", "not an object")
    key = "conversations" if "conversations" in record else "conversation"
    if key not in record:
        raise _Problem("", 'no "conversations"')
    turns = record[key]
    if not isinstance(turns, list):
        raise _Problem(f".{key}", "not a list of turns")
    for i, turn in enumerate(turns[:2]):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise _Problem(f".{key}[{i}].value", "missing or not a string")
    if len(turns) < 2:
        return FEWER_THAN_2_TURNS
    prompt, answer = turns[0]["value"], turns[1]["value"]
    return _measured(prompt, answer, count_words(prompt), count_words(answer), "words")


def _measured(prompt: str, answer: str, prompt_len: int, output_len: int, unit: str) -> DatasetRequest | str:
    """bench_serving's length filter on a ShareGPT pair: the request, or why it is left out."""
    if prompt_len < MIN_WORDS or output_len < MIN_WORDS:
        return f"records with a prompt or answer under 2 {unit}"
    return DatasetRequest(prompt=prompt, prompt_len=prompt_len, output_len=output_len)


def trace_request(record: Any) -> DatasetRequest:
    try:
        stamp, length, output, ids = traces.trace_entry(record)
    except traces.TraceProblem as problem:
        raise _Problem(problem.path, problem.problem) from None
    return DatasetRequest(prompt_len=length, output_len=output, at_ms=stamp, hash_ids=ids)


def request_of(fmt: DatasetFormat, record: Any) -> DatasetRequest | str:
    if fmt == "mooncake-trace":
        return trace_request(record)
    if fmt == "prompt-jsonl":
        return prompt_request(record)
    if fmt == "chat-jsonl":
        return chat_request(record)
    return sharegpt_request(record)


# --- JSONL ----------------------------------------------------------------------------------------------------


def _decode_line(path: Path, where: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(path, where, f"not UTF-8 (byte {exc.start + 1} of the line)") from None


def _parse_line(path: Path, where: str, raw: bytes, last: bool) -> Any:
    text = _decode_line(path, where, raw)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        cut = last and (exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string"))
        problem = (
            "JSON cut short (the file ends inside this record)" if cut else f"not JSON ({exc.msg}, column {exc.colno})"
        )
        raise DatasetError(path, where, problem, "one JSON object a line") from None


def _jsonl_request(path: Path, fmt: DatasetFormat, where: str, record: Any) -> DatasetRequest:
    found = format_of(record)
    if found is None:
        got = f"an object with keys {sorted(record)[:6]}" if isinstance(record, dict) else f"a JSON {_kind(record)}"
        raise DatasetError(path, where, f"{got}, not a {FORMAT_NAMES[fmt]} record", EXPECTED[fmt])
    if found != fmt:
        problem = f"this line is {FORMAT_NAMES[found]}, but the first line made the file {FORMAT_NAMES[fmt]}"
        raise DatasetError(path, where, problem, EXPECTED[fmt])
    try:
        request = request_of(fmt, record)
    except _Problem as problem:
        place = where + (f" ({problem.path[1:]})" if problem.path else "")
        raise DatasetError(path, place, problem.problem, EXPECTED[fmt]) from None
    assert isinstance(request, DatasetRequest)
    return request


def _kind(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def _jsonl_format(path: Path, where: str, record: Any) -> DatasetFormat:
    fmt = format_of(record)
    if fmt is None or fmt == "sharegpt":
        found = "a ShareGPT record: ShareGPT is one JSON list, not JSONL" if fmt else 'no "prompt" nor "messages"'
        raise DatasetError(path, where, found, EXPECTED["prompt-jsonl"] + " or " + EXPECTED["chat-jsonl"])
    return fmt


def _trace(
    path: Path,
    requests: list[DatasetRequest],
    numbered: int,
    blank: int,
    digest: str,
    size: int,
    cap: int | None,
    window: tuple[float, float | None] | None,
    file_bytes: int,
) -> DatasetSample:
    """A trace's requests in arrival order (stable: equal timestamps keep the file's order), the window's, its first
    `size` (console.bench.traces)."""
    ordered = sorted(requests, key=lambda r: r.at_ms or 0.0)
    kept = [ordered[i] for i in traces.in_window([r.at_ms or 0.0 for r in ordered], window)][:size]
    skipped: tuple[tuple[str, int], ...] = (("blank lines", blank),) if blank else ()
    if len(kept) < len(ordered):
        skipped += (("requests outside the window or past the sample", len(ordered) - len(kept)),)
    return DatasetSample(
        file=path.name, sha256=digest, format="mooncake-trace", seed=0, sample=size, entries=numbered,
        requests=tuple(kept), skipped=skipped, output_len_cap=cap, source=str(path), file_bytes=file_bytes,
        length_unit="tokens", length_counter="the trace's own (Mooncake's lengths are tokens)", trace_window=window,
    )  # fmt: skip


def _jsonl_whole(
    path: Path,
    data: bytes,
    size: int,
    seed: int,
    cap: int | None,
    count: LengthCounter | None,
    trace: tuple[tuple[float, float | None] | None, int | None] = (None, None),
) -> DatasetSample:
    """A file small enough to read at once: every line checked, a uniform sample of its records."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    numbered = [(n, raw) for n, raw in enumerate(lines) if raw.strip()]
    if not numbered:
        raise DatasetError(path, "", "the file is empty", ANY_FORMAT)
    last_number = numbered[-1][0]
    first_number, first_raw = numbered[0]
    fmt = _jsonl_format(
        path, f"line {first_number + 1}", _parse_line(path, f"line {first_number + 1}", first_raw, False)
    )
    requests = [
        _jsonl_request(path, fmt, f"line {n + 1}", _parse_line(path, f"line {n + 1}", raw, n == last_number))
        for n, raw in numbered
    ]
    blank = len(lines) - len(numbered)
    if fmt == "mooncake-trace":
        digest = hashlib.sha256(data).hexdigest()
        window, limit = trace
        return _trace(path, requests, len(numbered), blank, digest, limit or len(requests), cap, window, len(data))
    if len(requests) > size:
        requests = [requests[i] for i in random.Random(seed).sample(range(len(requests)), size)]
    return DatasetSample(
        file=path.name,
        sha256=hashlib.sha256(data).hexdigest(),
        format=fmt,
        seed=seed,
        sample=size,
        entries=len(numbered),
        requests=_counted_prompts(requests, count) if count is not None else tuple(requests),
        length_unit="tokens" if count is not None else "words",
        skipped=(("blank lines", blank),) if blank else (),
        output_len_cap=cap,
        source=str(path),
        file_bytes=len(data),
    )


def _line_after(handle: BinaryIO, offset: int, file_size: int) -> tuple[int, bytes]:
    """The line that starts after the first newline at or past `offset` (the first line when there is none), as
    (its start, its bytes without the newline)."""
    start = 0
    if offset > 0:
        handle.seek(offset - 1)  # a newline just before `offset` makes `offset` itself a line start
        position = offset - 1
        while True:
            block = handle.read(CHUNK_BYTES)
            if not block:
                break  # past the last newline: wrap around to the first line
            found = block.find(b"\n")
            if found >= 0:
                start = position + found + 1
                break
            position += len(block)
        if start >= file_size:
            start = 0
    return start, _line_at(handle, start)


def _line_at(handle: BinaryIO, start: int) -> bytes:
    handle.seek(start)
    parts: list[bytes] = []
    total = 0
    step = CHUNK_BYTES
    while True:
        block = handle.read(step)
        found = block.find(b"\n")
        if found >= 0:
            parts.append(block[:found])
            return b"".join(parts)
        parts.append(block)
        total += len(block)
        if not block:
            return b"".join(parts)
        if total > MAX_RECORD_BYTES:
            raise _TooLong(start)
        step = min(step * 2, READ_BYTES)  # a long line costs O(n) reads, not O(n²)


class _TooLong(Exception):
    pass


def _jsonl_by_position(
    path: Path, handle: BinaryIO, file_size: int, size: int, seed: int, cap: int | None, count: LengthCounter | None
) -> DatasetSample:
    """A large file: lines picked at random byte positions (see the module's doc), only those lines read."""

    def where(start: int) -> str:
        return "line 1" if start == 0 else f"the line at byte {start:,}"

    def line(start_or_offset: int, *, after: bool) -> tuple[int, bytes]:
        try:
            if after:
                return _line_after(handle, start_or_offset, file_size)
            return start_or_offset, _line_at(handle, start_or_offset)
        except _TooLong as exc:
            raise DatasetError(path, where(exc.args[0]), f"longer than {MAX_RECORD_BYTES // 2**20} MB") from None

    start, raw = line(0, after=False)
    while not raw.strip() and start + len(raw) + 1 < file_size:
        start, raw = line(start + len(raw) + 1, after=False)
    fmt = _jsonl_format(path, where(start), _parse_line(path, where(start), raw, False))
    last_start = _last_line_start(handle, file_size)
    _, last_raw = line(last_start, after=False)
    _jsonl_request(path, fmt, where(last_start), _parse_line(path, where(last_start), last_raw, True))
    rng = random.Random(seed)
    chosen: dict[int, DatasetRequest] = {}  # line start -> request, in the order drawn
    drawn = 0
    blank_starts: set[int] = set()
    sizes: list[int] = []
    while len(chosen) < size and drawn < 4 * size + 64:
        batch = [rng.randrange(file_size) for _ in range(size - len(chosen) + size // 8 + 8)]
        drawn += len(batch)
        found = {offset: line(offset, after=True) for offset in sorted(set(batch))}  # read forward through the file
        for offset in batch:  # taken in the order drawn
            at, text = found[offset]
            if at in chosen or len(chosen) >= size:
                continue
            if not text.strip():
                blank_starts.add(at)
                continue
            chosen[at] = _jsonl_request(path, fmt, where(at), _parse_line(path, where(at), text, at == last_start))
            sizes.append(len(text) + 1)
    return DatasetSample(
        file=path.name,
        sha256="",
        format=fmt,
        seed=seed,
        sample=size,
        entries=round(file_size / (sum(sizes) / len(sizes))) if sizes else 0,
        requests=_counted_prompts(list(chosen.values()), count) if count is not None else tuple(chosen.values()),
        length_unit="tokens" if count is not None else "words",
        skipped=(("blank lines met", len(blank_starts)),) if blank_starts else (),
        output_len_cap=cap,
        source=str(path),
        file_bytes=file_size,
        entries_estimated=True,
    )


def _last_line_start(handle: BinaryIO, file_size: int) -> int:
    """Where the file's last non-empty line starts."""
    end = file_size
    tail = b""
    while end > 0:
        begin = max(0, end - CHUNK_BYTES)
        handle.seek(begin)
        tail = handle.read(end - begin) + tail
        body = tail.rstrip()
        cut = body.rfind(b"\n")
        if cut >= 0 or begin == 0:
            return begin + cut + 1 if cut >= 0 else 0
        end = begin
    return 0


def file_sha256(path: Path | str) -> str:
    """The file's sha256, read in large blocks (hashlib lets other threads run meanwhile)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


# --- ShareGPT JSON --------------------------------------------------------------------------------------------


class _JsonListReader:
    """The elements of a top-level JSON list, one at a time, from a binary stream: decoded as UTF-8 incrementally,
    hashed as read, each element parsed by raw_decode once it is whole."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path = path
        self.handle = handle
        self.digest = hashlib.sha256()
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self.buffer = ""
        self.pos = 0
        self.line = 1  # the line of buffer[pos]
        self.eof = False
        self._bytes_line = 1  # lines of the bytes decoded so far, for a UTF-8 error's place
        self.bytes_read = 0

    def _more(self, at_least: int = READ_BYTES) -> bool:
        if self.eof:
            return False
        raw = self.handle.read(max(at_least, READ_BYTES))
        self.digest.update(raw)
        self.bytes_read += len(raw)
        try:
            text = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            line = self._bytes_line + raw[: exc.start].count(b"\n")
            raise DatasetError(self.path, f"line {line}", "not UTF-8") from None
        self._bytes_line += raw.count(b"\n")
        if not raw:
            self.eof = True
        # Drop what was consumed, keep the rest.
        self.buffer = self.buffer[self.pos :] + text
        self.pos = 0
        return bool(raw)

    def _advance(self, to: int) -> None:
        self.line += self.buffer.count("\n", self.pos, to)
        self.pos = to

    def _skip_space(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            buffer, pos = self.buffer, self.pos
            while pos < len(buffer) and buffer[pos] in " \t\r\n":
                pos += 1
            self._advance(pos)
            if pos < len(buffer):
                return buffer[pos]
            if not self._more():
                return ""

    def _expect(self, what: str, found: str) -> DatasetError:
        got = "the end of the file (JSON cut short)" if not found else repr(found)
        return DatasetError(self.path, f"line {self.line}", f"{got} where {what} should be", EXPECTED["sharegpt"])

    def elements(self) -> Iterator[tuple[int, int, Any]]:
        """(index, line, element) for each element of the list."""
        first = self._skip_space()
        if not first:
            raise DatasetError(self.path, "", "the file is empty", ANY_FORMAT)
        if first != "[":
            raise DatasetError(self.path, "line 1", f"starts with {first!r}", EXPECTED["sharegpt"])
        self._advance(self.pos + 1)
        index = 0
        if self._skip_space() == "]":
            return
        while True:
            line = self.line
            yield index, line, self._element()
            index += 1
            sep = self._skip_space()
            if sep == "]":
                self._advance(self.pos + 1)
                if self._skip_space():
                    raise self._expect("the end of the file", self.buffer[self.pos])
                return
            if sep != ",":
                raise self._expect(f"',' or ']' (after element [{index - 1}])", sep)
            self._advance(self.pos + 1)
            if not self._skip_space():
                raise self._expect(f"element [{index}]", "")

    def _element(self) -> Any:
        while True:
            try:
                value, end = self._json.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                incomplete = exc.pos >= len(self.buffer) - 1 or exc.msg.startswith("Unterminated string")
                if incomplete and not self.eof and len(self.buffer) - self.pos <= MAX_RECORD_BYTES:
                    self._more(len(self.buffer) - self.pos)  # at least double: a big record costs O(n), not O(n²)
                    continue
                if incomplete and len(self.buffer) - self.pos > MAX_RECORD_BYTES:
                    raise DatasetError(
                        self.path,
                        f"line {self.line}",
                        f"a record longer than {MAX_RECORD_BYTES // 2**20} MB, or one never closed",
                    ) from None
                where = f"line {self.line + self.buffer.count(chr(10), self.pos, exc.pos)}"
                problem = "JSON cut short (the file ends inside a record)" if incomplete else f"not JSON ({exc.msg})"
                raise DatasetError(self.path, where, problem, EXPECTED["sharegpt"]) from None
            self._advance(end)
            return value


FEWER_THAN_2_TURNS = "records with fewer than 2 turns"


def _sharegpt_rows(
    path: Path, reader: _JsonListReader, keep: set[int] | None, measure: bool = True
) -> tuple[list[Any], dict[str, int]]:
    """One pass: per record with two turns (bench_serving's list before its shuffle) its request in words, or None
    when too short; with `measure` false its (prompt, answer) texts unmeasured; True in place of either when `keep`
    is given and does not hold its position (only those rows' text is kept)."""
    rows: list[Any] = []
    skipped: dict[str, int] = {}
    for index, line, record in reader.elements():
        try:
            request = sharegpt_request(record)
        except _Problem as problem:
            where = f"line {line} ([{index}]{problem.path})"
            raise DatasetError(path, where, problem.problem, EXPECTED["sharegpt"]) from None
        if request == FEWER_THAN_2_TURNS:
            skipped[request] = skipped.get(request, 0) + 1
            continue
        if measure and isinstance(request, str):
            skipped[request] = skipped.get(request, 0) + 1
            rows.append(None)  # in bench_serving's shuffled list, dropped by its length filter
        elif keep is not None and len(rows) not in keep:
            rows.append(True)
        elif measure:
            rows.append(request)
        else:
            key = "conversations" if "conversations" in record else "conversation"
            rows.append((record[key][0]["value"], record[key][1]["value"]))
    return rows, skipped


def _take_counted(
    order: list[int], texts: Callable[[list[int]], dict[int, tuple[str, str]]], count: LengthCounter, size: int
) -> tuple[list[DatasetRequest], int]:
    """bench_serving's loop over its shuffled list, with the model's tokenizer: each record measured in turn, too
    short ones left out, until `size` are taken. Measured in batches (one counter call each): the requests still
    wanted and an eighth more. Returns the requests and how many were left out as too short."""
    chosen: list[DatasetRequest] = []
    short = 0
    at = 0
    while len(chosen) < size and at < len(order):
        wanted = size - len(chosen)
        batch = order[at : at + wanted + wanted // 8 + 8]
        at += len(batch)
        pairs = texts(batch)
        lengths = count([text for i in batch for text in pairs[i]])
        for n, i in enumerate(batch):
            prompt, answer = pairs[i]
            request = _measured(prompt, answer, lengths[2 * n], lengths[2 * n + 1], "tokens")
            if isinstance(request, str):
                short += 1
                continue
            chosen.append(request)
            if len(chosen) == size:
                break
    return chosen, short


def _sample_sharegpt(
    path: Path, handle: BinaryIO, file_size: int, size: int, seed: int, cap: int | None, count: LengthCounter | None
) -> DatasetSample:
    """bench_serving's own selection (see the module's doc): a file small enough is parsed once and kept; a larger
    one is parsed again, keeping only the chosen records' text (with a counter: the records to measure)."""
    whole = file_size <= WHOLE_FILE_BYTES
    reader = _JsonListReader(path, handle)
    measure = count is None
    rows, skipped = _sharegpt_rows(path, reader, None if whole else set(), measure)
    if not rows and not skipped:
        raise DatasetError(path, "", "the list is empty", EXPECTED["sharegpt"])
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)  # bench_serving: random.seed(--seed), then random.shuffle(its list)
    if count is not None:

        def texts(indices: list[int]) -> dict[int, tuple[str, str]]:
            if whole:
                return {i: rows[i] for i in indices}
            handle.seek(0)
            again, _ = _sharegpt_rows(path, _JsonListReader(path, handle), set(indices), measure=False)
            return {i: again[i] for i in indices}

        requests, short = _take_counted(order, texts, count, size)
        if short:
            skipped["records with a prompt or answer under 2 tokens"] = short
        entries = len(rows)
    else:
        chosen = [i for i in order if rows[i] is not None][:size]
        if not whole:
            handle.seek(0)
            rows, _ = _sharegpt_rows(path, _JsonListReader(path, handle), set(chosen))
        requests = [rows[i] for i in chosen]
        entries = sum(1 for row in rows if row is not None)
    return DatasetSample(
        file=path.name,
        sha256=reader.digest.hexdigest(),
        format="sharegpt",
        seed=seed,
        sample=size,
        entries=entries,
        requests=tuple(requests),
        skipped=tuple(sorted(skipped.items())),
        output_len_cap=cap,
        source=str(path),
        file_bytes=reader.bytes_read,
        length_unit="tokens" if count is not None else "words",
    )


# --- the entry point ------------------------------------------------------------------------------------------


def sample_dataset(
    path: Path,
    *,
    size: int = DEFAULT_SAMPLE,
    seed: int = 1,
    output_len_cap: int | None = None,
    hash_large: bool = True,
    count: LengthCounter | None = None,
    trace_window: tuple[float, float | None] | None = None,
    trace_limit: int | None = None,
) -> DatasetSample:
    """`size` requests from the dataset file (all of them when it holds no more), the same for the same file, size
    and seed. DatasetError says what is wrong with the file (nothing has been sent anywhere). `count`: the model's
    tokenizer as a LengthCounter (lengths in tokens); without it, whitespace words.

    A JSONL file over WHOLE_FILE_BYTES is sampled by position; its sha256 then needs one more read of the whole
    file: done here unless `hash_large` is false (the caller hashes it meanwhile: file_sha256, sample.source)."""
    if size < 1:
        raise ValueError("the sample size must be at least 1")
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(path, "", f"cannot be read ({exc.strerror or exc})") from None
    with handle:
        file_size = os.fstat(handle.fileno()).st_size
        head = handle.read(CHUNK_BYTES).lstrip()
        while not head and (more := handle.read(READ_BYTES)):
            head = more.lstrip()
        handle.seek(0)
        if not head:
            raise DatasetError(path, "", "the file is empty", ANY_FORMAT)
        if head.startswith(b"["):
            sample = _sample_sharegpt(path, handle, file_size, size, seed, output_len_cap, count)
        elif file_size <= WHOLE_FILE_BYTES or _starts_a_trace(handle):
            sample = _jsonl_whole(path, handle.read(), size, seed, output_len_cap, count, (trace_window, trace_limit))
        else:
            sample = _jsonl_by_position(path, handle, file_size, size, seed, output_len_cap, count)
    if not sample.requests:
        reasons = ", ".join(f"{n} {why}" for why, n in sample.skipped) or "none"
        raise DatasetError(path, "", f"no usable request (skipped: {reasons})", EXPECTED[sample.format])
    if not sample.sha256 and hash_large:
        sample = replace(sample, sha256=file_sha256(path))
    return sample


def _starts_a_trace(handle: BinaryIO) -> bool:
    """Whether a large JSONL file's first line is a trace's (a trace is read whole: its window needs every line)."""
    first = handle.readline(MAX_RECORD_BYTES)
    handle.seek(0)
    try:
        return traces.is_trace_record(json.loads(first))
    except ValueError:
        return False


def describe_line(sample: DatasetSample) -> str:
    """One line for the operator before the run: format, sample, hash, lengths and what was left out."""
    d = sample.describe()
    if sample.is_trace:
        start, end = sample.trace_window or (0.0, None)
        window = f"{start:g}-{end:g} s" if end is not None else (f"from {start:g} s" if start else "whole")
        taken = (
            f"{len(sample.requests):,} of {sample.entries:,} requests (window {window}) over {d['trace_span_s']:,.1f} s"
            + (f", {d['trace_rate']:g} req/s" if d["trace_rate"] else "")
        )
    elif sample.entries_estimated:
        taken = (
            f"{len(sample.requests):,} requests sampled by position with seed {sample.seed} from "
            f"{sample.file_bytes / 2**30:.2f} GiB (about {sample.entries:,} lines)"
        )
    elif len(sample.requests) >= sample.entries:
        taken = f"all {len(sample.requests):,} requests"
    else:
        taken = f"{len(sample.requests):,} of {sample.entries:,} requests sampled with seed {sample.seed}"
    digest = f"sha256 {sample.sha256[:12]}" if sample.sha256 else "sha256 computed during the run"
    prompt, output = d["prompt_len"], d["output_len"]
    text = (
        f"{sample.file}: {FORMAT_NAMES[sample.format]}, {taken}, {digest}; "
        f"{'input' if sample.is_trace else 'prompt'} p50 {prompt.get('p50', 0):,} / p99 {prompt.get('p99', 0):,} "
        f"{sample.length_unit}, "
        f"output p50 {output.get('p50', 0):,} / p99 {output.get('p99', 0):,} ({d['output_len_source']})"
    )
    left = [f"{n:,} {why}" for why, n in sample.skipped]
    if sample.too_long:
        left.append(f"{sample.too_long:,} longer than the context length")
    return text + (f"; skipped: {', '.join(left)}" if left else "")
