"""Host profiles (profiles/NAME.toml): one pydantic model, errors that name the file, the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.host.profile import ProfileError, load_profile
from console.host.targets import resolve_target


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_full_profile_becomes_a_target(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "gpu",
        '[host]\nssh = "ops@gpu-01:2222"\nunit = "sglang-a.service"\nsudo = false\ngpu_command = ["/x/smi"]\n'
        '[sglang]\nport = 30001\napi_key_env = "KEY_VAR"\nsglang_version = "0.5.9"\n',
    )
    target = resolve_target("gpu", profiles_dir=tmp_path)
    assert (target.ssh_user, target.ssh_host, target.ssh_port) == ("ops", "gpu-01", 2222)
    assert target.unit == "sglang-a.service" and target.sudo is False and target.gpu_command == ("/x/smi",)
    assert target.sglang.port == 30001 and target.sglang.api_key_env == "KEY_VAR"
    assert target.sglang_version == "0.5.9"
    assert target.profile_path == tmp_path / "gpu.toml"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[host]\nssh = "h"\nsudo = "yes"\n', r"[host] sudo: expected a valid boolean (got 'yes')"),
        ('[host]\nssh = "h"\n[sglang]\nport = "30000"\n', "[sglang] port: expected a valid integer (got '30000')"),
        ('[host]\nssh = "h"\n[sglang]\nport = 70000\n', "[sglang] port: expected less than or equal to 65535"),
        ('[host]\nssh = "h"\nunitt = "a.service"\n', "[host] unitt: unknown key"),
        ('[host]\nunit = "sglang.service"\n', '[host]: transport "ssh" needs ssh = "user@host:port"'),
        ('[host]\ntransport = "demo"\n', '[host]: transport "demo" needs control = "PATH"'),
        ('[host]\ntransport = "ftp"\nssh = "h"\n', "[host] transport: expected 'ssh', 'local' or 'demo'"),
        ("[sglang]\nport = 1\n", "[host]: missing"),
        ('[host]\nssh = "h"\n[sglang]\napi_key_env = "1BAD"\n', "[sglang] api_key_env: expected an environment"),
        ('[host]\nssh = "h"\n[sglang]\nsglang_version = "0.4.0"\n', "[sglang] sglang_version: SGLang 0.4.0 is older"),
        ('[host]\nssh = "h"\n[sglang]\napi_key = "sk-1"\n', "api_key must not be stored in a profile"),
        ('[host]\nssh = "bad host!"\n', "[host] ssh: invalid host"),
    ],
)
def test_a_malformed_profile_names_file_key_and_what_was_expected(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, "p", text)
    with pytest.raises(ProfileError) as caught:
        resolve_target("p", profiles_dir=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message
    assert "sk-1" not in message


def test_not_toml_and_unreadable_files_say_so(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"p.toml: not valid TOML"):
        load_profile(_write(tmp_path, "p", "[host\n"))
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(tmp_path / "missing.toml")
