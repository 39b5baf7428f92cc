#!/usr/bin/env bash
# Installs what the testbed needs from the machine's own apt sources: a real OpenSSH sshd,
# systemd-nspawn and debootstrap (the containers that stand in for GPU hosts), iproute2 (netns), and Chromium
# (tests/web drive `--web` in it headless, over the DevTools protocol: no driver, no browser download), and
# Prometheus (tests/fleet and benchmarks/fleet_overview.py start their own over simulated hosts).
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v systemd-nspawn >/dev/null 2>&1 || need+=(systemd-container)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
# tests/host: the sudo-password test runs `sudo -n` as an unprivileged user over the loopback sshd
command -v sudo >/dev/null 2>&1 || need+=(sudo)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "the testbed needs: ${need[*]} (run as root, or install them with apt)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
