"""The GPU-host testbed: real systemd (systemd-nspawn) and real OpenSSH sshd, each host in its own network
namespace, running the project's SGLang simulator as sglang.service. See tests/testbed/README.md."""
