"""``mirage agents install|list``: the machine's real npm against a loopback npm registry that
serves a small stand-in ``node`` and ``openclaw`` (the real install is the ``openclaw`` test in
test_openclaw_real.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.agents.openclaw.install import (
    CACHE_ENV,
    InstallError,
    find_install,
    install_openclaw,
    list_installs,
    openclaw_dir,
)
from mirage.cli import app
from tests.fakes.npm_registry import FakeNpmRegistry

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")

OPENCLAW = "2026.9.6"
NODE = "24.21.0"


def fake_node_script() -> str:
    """Answers ``--version`` as Node 24 and runs everything else on the machine's Node."""
    real_node = shutil.which("node")
    version = f'[ "$1" = "--version" ] && {{ echo "v{NODE}"; exit 0; }}'
    return f'#!/bin/sh\n{version}\nexec {real_node} "$@"\n'


FAKE_OPENCLAW = (
    "#!/usr/bin/env node\n"
    f"if (process.argv.includes('--version')) console.log('OpenClaw {OPENCLAW} (test)');\n"
)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNpmRegistry]:
    npmrc = tmp_path / "npmrc"
    npmrc.write_text("")
    monkeypatch.setenv("npm_config_userconfig", str(npmrc))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    with FakeNpmRegistry() as fake:
        fake.publish(
            "node", NODE, {"bin/node": (fake_node_script(), 0o755)}, bin={"node": "bin/node"}
        )
        fake.publish(
            "openclaw",
            OPENCLAW,
            {"openclaw.mjs": (FAKE_OPENCLAW, 0o755)},
            bin={"openclaw": "openclaw.mjs"},
        )
        yield fake


@pytest.mark.slow
def test_install_is_complete_listed_and_idempotent(
    tmp_path: Path, registry: FakeNpmRegistry
) -> None:
    root = tmp_path / "cache"
    outcome = install_openclaw(root=root, registry=registry.url)

    install = outcome.install
    assert outcome.fresh
    assert (install.version, install.node_version) == (OPENCLAW, NODE)
    assert install.path == openclaw_dir(root) / OPENCLAW
    assert install.registry == registry.url
    assert install.size_bytes > 0
    run = subprocess.run(
        install.command("--version"), env=install.env(), capture_output=True, text=True
    )
    assert run.stdout.strip() == f"OpenClaw {OPENCLAW} (test)"
    assert install.env()["PATH"].startswith(str(install.node_bin_dir))
    assert list_installs(root) == [install]
    assert not list(openclaw_dir(root).glob(".partial-*"))

    requests_before = len(registry.requests)
    again = install_openclaw(root=root, registry=registry.url)
    assert not again.fresh
    assert again.install == install
    assert len(registry.requests) == requests_before  # nothing fetched the second time


def test_cli_install_twice_then_list(
    tmp_path: Path, registry: FakeNpmRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    runner = CliRunner()
    first = runner.invoke(app, ["agents", "install", "openclaw", "--registry", registry.url])
    assert first.exit_code == 0, first.output
    assert f"installed openclaw {OPENCLAW} (node {NODE})" in first.stdout

    second = runner.invoke(app, ["agents", "install", "openclaw", "--registry", registry.url])
    assert second.exit_code == 0, second.output
    assert "already installed" in second.stdout

    listed = runner.invoke(app, ["agents", "list"])
    row = listed.stdout.splitlines()[1].split("\t")
    assert row[:3] == ["openclaw", OPENCLAW, NODE]
    assert row[5] == str(tmp_path / "cache" / "agents" / "openclaw" / OPENCLAW)


def test_cli_lists_nothing_before_an_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty"))
    result = CliRunner().invoke(app, ["agents", "list"])
    assert result.exit_code == 0
    assert "no agents installed" in result.stdout


def test_unknown_version_is_a_clear_error_and_leaves_nothing(
    tmp_path: Path, registry: FakeNpmRegistry
) -> None:
    root = tmp_path / "cache"
    with pytest.raises(InstallError, match=r"openclaw@2099\.1\.1: ETARGET: .*--version") as caught:
        install_openclaw("2099.1.1", root=root, registry=registry.url)
    assert "npm log:" in str(caught.value)
    assert list_installs(root) == []
    assert not list(openclaw_dir(root).glob(".partial-*"))


def test_registry_refusal_names_the_http_status(tmp_path: Path, registry: FakeNpmRegistry) -> None:
    registry.failures["openclaw"] = 403
    with pytest.raises(InstallError, match=r"openclaw@2026\.9\.6: E403: the registry refused"):
        install_openclaw(root=tmp_path / "cache", registry=registry.url)
    assert find_install(OPENCLAW, tmp_path / "cache") is None


def test_unreachable_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    from tests.fakes.openai_server import unused_port

    url = f"http://127.0.0.1:{unused_port()}/"
    with pytest.raises(
        InstallError, match=r"node@24\.21\.0: ECONNREFUSED: the npm registry refused"
    ):
        install_openclaw(root=tmp_path / "cache", registry=url)


def test_missing_npm_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InstallError, match=r"npm was not found on PATH: install Node\.js with npm"):
        install_openclaw(root=tmp_path / "cache")


def test_too_little_disk_space_stops_before_npm(tmp_path: Path, registry: FakeNpmRegistry) -> None:
    with pytest.raises(InstallError, match=r"not enough disk space in .*set MIRAGE_CACHE_DIR"):
        install_openclaw(root=tmp_path / "cache", registry=registry.url, required_free_bytes=10**18)
    assert registry.requests == []


def test_node_package_without_a_binary_is_reported(
    tmp_path: Path, registry: FakeNpmRegistry
) -> None:
    registry.publish("node", "24.22.0", {"README.md": ("no binary", 0o644)})
    with pytest.raises(InstallError, match=r"did not provide .*bin/node: its preinstall script"):
        install_openclaw(root=tmp_path / "cache", node_version="24.22.0", registry=registry.url)


def test_bad_version_strings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="the OpenClaw version must be an exact version"):
        install_openclaw("latest", root=tmp_path)
    with pytest.raises(InstallError, match="the Node version must be an exact version"):
        install_openclaw(node_version="24", root=tmp_path)


@pytest.mark.slow
def test_killed_install_never_looks_complete(tmp_path: Path, registry: FakeNpmRegistry) -> None:
    root = tmp_path / "cache"
    registry.hang_tarball.add("openclaw")
    code = (
        "from pathlib import Path; "
        "from harness.kit.agents.openclaw.install import install_openclaw; "
        f"install_openclaw(root=Path({str(root)!r}), registry={registry.url!r})"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, env=os.environ.copy()
    )
    try:
        assert registry.tarball_requested.wait(60), "the install never reached the openclaw tarball"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()

    assert list(openclaw_dir(root).glob(".partial-*")), "the killed install left its partial folder"
    assert list_installs(root) == []
    assert find_install(OPENCLAW, root) is None

    registry.hang_tarball.clear()
    registry.release.set()
    outcome = install_openclaw(root=root, registry=registry.url)
    assert outcome.fresh
    assert list_installs(root) == [outcome.install]
    assert not list(openclaw_dir(root).glob(".partial-*"))


@pytest.mark.slow
def test_force_reinstalls_in_place(tmp_path: Path, registry: FakeNpmRegistry) -> None:
    root = tmp_path / "cache"
    first = install_openclaw(root=root, registry=registry.url).install
    second = install_openclaw(root=root, registry=registry.url, force=True)
    assert second.fresh
    assert second.install.path == first.path
    assert second.install.installed_at > first.installed_at
    assert list_installs(root) == [second.install]
