"""The host's tokenizer files as a token counter (console.core.bench.tokens.host_counter), over a real sshd: the
unit's own Python reads the tokenizer folder at the unit's --model-path and counts a batch of texts in one round
trip; a folder without a tokenizer, or a unit that names no model, says why (the caller falls back to words)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tokenizers

from console.core.bench.tokens import HostTokenizer, TokenizerUnavailable, host_counter
from console.host.linkmeter import SHELL
from console.host.ssh import SshTransport
from console.host.targets import Target
from console.sim.datasets import chat_conversations
from console.sim.tokenizer import SimTokenizer, write_model_dir
from tests.host.sshd_lab import ClientSide

# The machine's own interpreter, which every user may run (the venv's may be a build under a private home).
SYSTEM_PYTHON = "/usr/bin/python3"


def _transport(client: ClientSide) -> SshTransport:
    return SshTransport(Target(label="lab", transport="ssh", ssh_host="lab", ssh_config=(str(client.config),)))


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A folder the sshd's test user can enter, whatever the modes of the checkout's parent folders: the clone may
    sit in a folder only its owner enters (`mktemp -d`, a private home), so nothing there is run as that user."""
    with tempfile.TemporaryDirectory(prefix="opsct-tok-") as tmp:
        os.chmod(tmp, 0o755)
        yield Path(tmp)


@pytest.fixture(scope="module")
def unit_python(shared: Path) -> Path:
    """The unit's Python as on a GPU host: a venv of the machine's own interpreter with the tokenizer library in it,
    made for the test user (the project's .venv may not be reachable by that user)."""
    venv = shared / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next((venv / "lib").glob("python3*/site-packages"))
    library = Path(tokenizers.__file__).parent
    shutil.copytree(library, site / library.name)
    for path in (venv, *venv.rglob("*")):
        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return venv / "bin" / "python3"


@pytest.fixture
def model_dir(shared: Path, unit_python: Path) -> Iterator[Path]:
    """The stand-in's tokenizer folder where the sshd's test user can read it."""
    with tempfile.TemporaryDirectory(dir=shared) as tmp:
        os.chmod(tmp, 0o755)
        folder = write_model_dir(
            Path(tmp) / "tiny", architecture="LlamaForCausalLM", context_length=4096, served_model_name="tiny"
        )
        for path in (folder, *folder.iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        yield folder


def unit(model: Path | str, python: Path | str = "/usr/bin/python3") -> str:
    return f"[Service]\nExecStart={python} -m sglang.launch_server --model-path {model} --port 30000\n"


async def test_the_unit_s_python_counts_a_batch_in_one_round_trip(
    client: ClientSide, model_dir: Path, unit_python: Path
) -> None:
    transport = _transport(client)
    try:
        count, name, model = host_counter(HostTokenizer(transport, unit(model_dir, unit_python)))
        texts = [turn["value"] for row in chat_conversations(40, seed=3) for turn in row["conversations"]]
        await transport.run(["true"])  # the connection and its command shell are up
        before = transport.meter.reading()
        counts = await count(texts)
        cost = transport.meter.reading() - before
        assert counts == [SimTokenizer().count(t) for t in texts]
        assert counts != [len(t.split()) for t in texts]  # punctuation apart: not words
        assert cost.depth == 1 and cost.counts == {SHELL: 1}
        assert str(model_dir) in name and model == str(model_dir)
    finally:
        await transport.close()


async def test_a_model_path_without_a_tokenizer_says_why(client: ClientSide) -> None:
    transport = _transport(client)
    try:
        count, _name, _model = host_counter(HostTokenizer(transport, unit("/nonexistent/model")))
        with pytest.raises(TokenizerUnavailable, match="could not read the tokenizer at /nonexistent/model"):
            await count(["a b"])
        with pytest.raises(TokenizerUnavailable, match="names no --model-path"):
            host_counter(HostTokenizer(transport, "[Service]\nExecStart=/usr/bin/python3 -m http.server\n"))
    finally:
        await transport.close()
