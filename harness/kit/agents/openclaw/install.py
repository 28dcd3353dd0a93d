"""Install a pinned OpenClaw and the Node it needs into mirage's cache, from the npm registry only.

Above: ``mirage agents install|list`` (``mirage.cli.agents``) and, later, the OpenClaw agent
adapter, which runs ``OpenClawInstall.command(...)``. Below: the machine's ``npm`` (any Node
new enough to run npm itself) and the npm registry it is configured with; nothing comes from
any other host. OpenClaw needs Node >= 24.16: the npm package ``node@24`` provides it as a
platform binary package from the same registry.

Layout: ``<cache>/agents/openclaw/<version>/`` holds ``node/`` (an npm prefix with
``node_modules/node/bin/node``), ``openclaw/`` (an npm prefix with the ``openclaw`` package)
and ``install.json`` (the manifest, written last). Everything is installed into a sibling
``.partial-*`` folder and renamed into place only after OpenClaw answered ``--version`` under
the installed Node, so an interrupted install never looks complete; the next install (under an
exclusive lock) removes the leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.cache import CACHE_ENV as CACHE_ENV
from harness.kit.cache import cache_root as cache_root

log = structlog.get_logger(__name__)

DEFAULT_OPENCLAW_VERSION = "2026.9.6"
DEFAULT_NODE_VERSION = "24.21.0"
MANIFEST = "install.json"
FAILED_LOG = "last-failed-install.log"
REQUIRED_FREE_BYTES = 1_500_000_000
"""OpenClaw 2026.9.6 takes ~650 MB and Node ~190 MB, plus npm's download cache."""

NPM_TIMEOUT_S = 1800.0
SMOKE_TIMEOUT_S = 120.0
INSTALL_SCRIPT_PACKAGES: Mapping[str, tuple[str, ...]] = {
    "node": ("node",),
    "openclaw": ("openclaw", "koffi", "protobufjs", "@google/genai"),
}
"""Packages whose install scripts are approved (npm's ``allowScripts``): ``node``'s preinstall
fetches the platform binary package; OpenClaw's own scripts finish its bundled plugins."""

_VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.\-]+)?$")
_NPM_ERROR_CODE = re.compile(r"npm (?:ERR!|error) code (\w+)")


class InstallError(Exception):
    """An install that could not finish; the message says what to do."""


class OpenClawInstall(BaseModel):
    """One complete install (the manifest ``install.json`` plus where it lives)."""

    model_config = ConfigDict(frozen=True)

    agent: Literal["openclaw"] = "openclaw"
    version: str
    node_version: str
    registry: str
    installed_at: datetime
    install_seconds: float
    size_bytes: int
    path: Path

    @property
    def node_bin_dir(self) -> Path:
        return node_bin_dir(self.path / "node")

    @property
    def node(self) -> Path:
        return self.node_bin_dir / "node"

    @property
    def entry(self) -> Path:
        """OpenClaw's command-line entry point (``openclaw.mjs``)."""
        return openclaw_entry(self.path / "openclaw")

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the installed Node first on
        PATH, so OpenClaw and everything it spawns run on it."""
        return with_on_path(self.node_bin_dir, base)

    def command(self, *args: str) -> list[str]:
        """The argv that runs ``openclaw ARGS`` on the installed Node."""
        return [str(self.node), str(self.entry), *args]


class InstallOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    install: OpenClawInstall
    fresh: bool
    """False: the version was already installed and nothing was done."""


def openclaw_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / "agents" / "openclaw"


def node_bin_dir(prefix: Path) -> Path:
    return prefix / "node_modules" / "node" / "bin"


def openclaw_entry(prefix: Path) -> Path:
    return prefix / "node_modules" / "openclaw" / "openclaw.mjs"


def check_version(value: str, what: str) -> str:
    if not _VERSION_PATTERN.match(value):
        raise InstallError(f"{what} must be an exact version such as 1.2.3, got {value!r}")
    return value


def find_install(version: str, root: Path | None = None) -> OpenClawInstall | None:
    """The complete install of ``version``, or None (a partial one never counts)."""
    return _read_manifest(openclaw_dir(root) / version)


def list_installs(root: Path | None = None) -> list[OpenClawInstall]:
    """Every complete install, oldest version first; partial folders are skipped."""
    base = openclaw_dir(root)
    if not base.is_dir():
        return []
    found = (_read_manifest(entry) for entry in sorted(base.iterdir()) if entry.is_dir())
    return [install for install in found if install is not None]


def _read_manifest(folder: Path) -> OpenClawInstall | None:
    manifest = folder / MANIFEST
    if folder.name.startswith(".") or not manifest.is_file():
        return None
    try:
        install = OpenClawInstall.model_validate_json(manifest.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        log.warning("openclaw.manifest_unreadable", path=str(manifest), error=str(exc)[:200])
        return None
    install = install.model_copy(update={"path": folder})
    return install if install.node.is_file() and install.entry.is_file() else None


def install_openclaw(
    version: str = DEFAULT_OPENCLAW_VERSION,
    *,
    node_version: str = DEFAULT_NODE_VERSION,
    root: Path | None = None,
    registry: str | None = None,
    force: bool = False,
    required_free_bytes: int = REQUIRED_FREE_BYTES,
) -> InstallOutcome:
    """Install ``openclaw@version`` with ``node@node_version`` (idempotent: an existing
    complete install is returned as is unless ``force``). ``registry`` overrides npm's
    configured registry. Raises ``InstallError`` with what to do."""
    check_version(version, "the OpenClaw version")
    check_version(node_version, "the Node version")
    base = openclaw_dir(root)
    existing = find_install(version, root)
    if existing is not None and not force:
        return InstallOutcome(install=existing, fresh=False)
    npm = _npm_executable()
    _make_dir(base)
    with _exclusive_lock(base):
        existing = find_install(version, root)
        if existing is not None and not force:  # another process finished it meanwhile
            return InstallOutcome(install=existing, fresh=False)
        _remove_partials(base)
        _check_free_space(base, required_free_bytes)
        install = _install_fresh(npm, base, version, node_version, registry)
    return InstallOutcome(install=install, fresh=True)


def _npm_executable() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(
            "npm was not found on PATH: install Node.js with npm (any version that runs npm, "
            "e.g. `apt-get install npm`), then run `mirage agents install openclaw` again"
        )
    return npm


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InstallError(
            f"cannot create the cache folder {path}: {exc.strerror}; set {CACHE_ENV} to a "
            f"writable folder"
        ) from exc


@contextlib.contextmanager
def _exclusive_lock(base: Path) -> Iterator[None]:
    with (base / ".install.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_partials(base: Path) -> None:
    """Leftovers of interrupted installs (safe: we hold the install lock)."""
    for leftover in base.glob(".partial-*"):
        log.info("openclaw.remove_partial", path=str(leftover))
        shutil.rmtree(leftover, ignore_errors=True)


def _check_free_space(base: Path, required: int) -> None:
    free = shutil.disk_usage(base).free
    if free < required:
        raise InstallError(
            f"not enough disk space in {base}: {free / 1e9:.2f} GB free, the install needs "
            f"about {required / 1e9:.1f} GB; free some space or set {CACHE_ENV} to another disk"
        )


def _install_fresh(
    npm: str, base: Path, version: str, node_version: str, registry: str | None
) -> OpenClawInstall:
    started = time.perf_counter()
    try:
        partial = Path(tempfile.mkdtemp(prefix=f".partial-{version}-", dir=base))
    except OSError as exc:
        raise InstallError(f"cannot create a folder in {base}: {exc.strerror}") from exc
    try:
        partial.chmod(0o755)  # mkdtemp makes it private; the install is a normal cache folder
        runner = _NpmRunner(npm, registry, base / FAILED_LOG)
        install = _build(partial, base / version, runner, version, node_version)
        install = install.model_copy(
            update={"install_seconds": round(time.perf_counter() - started, 1)}
        )
        _write_manifest(partial, install)
        _move_into_place(partial, install.path)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise InstallError(f"the disk is full ({exc}); {_EXPLANATIONS['ENOSPC']}") from exc
        raise InstallError(f"the install failed on the file system: {exc}") from exc
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    log.info("openclaw.installed", version=version, seconds=install.install_seconds)
    return install


def _build(
    partial: Path, final: Path, runner: _NpmRunner, version: str, node_version: str
) -> OpenClawInstall:
    """Node, then OpenClaw on that Node, into ``partial``; checked with ``--version``."""
    node_prefix, openclaw_prefix = partial / "node", partial / "openclaw"
    log.info("openclaw.install_node", version=node_version)
    runner.install(node_prefix, "node", node_version, env=dict(os.environ))
    node = node_bin_dir(node_prefix) / "node"
    node_env = with_on_path(node.parent)
    installed_node = _node_version(node, node_env)
    log.info("openclaw.install_openclaw", version=version, node=installed_node)
    runner.install(openclaw_prefix, "openclaw", version, env=node_env)
    _smoke_test(node, openclaw_entry(openclaw_prefix), version)
    return OpenClawInstall(
        version=version,
        node_version=installed_node,
        registry=runner.registry(node_env),
        installed_at=datetime.now(UTC),
        install_seconds=0.0,
        size_bytes=_tree_size(partial),
        path=final,
    )


def with_on_path(bin_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``bin_dir`` first on PATH."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join(filter(None, [str(bin_dir), env.get("PATH")]))
    return env


class _NpmRunner:
    """``npm install`` into a fresh prefix; failures become ``InstallError`` with npm's code."""

    def __init__(self, npm: str, registry: str | None, failed_log: Path) -> None:
        self.npm = npm
        self.registry_option = [f"--registry={registry}"] if registry else []
        self.failed_log = failed_log

    def install(self, prefix: Path, package: str, version: str, *, env: dict[str, str]) -> None:
        prefix.mkdir(parents=True)
        allowed = {name: True for name in INSTALL_SCRIPT_PACKAGES.get(package, ())}
        (prefix / "package.json").write_text(
            json.dumps({"name": f"mirage-{package}", "private": True, "allowScripts": allowed}),
            encoding="utf-8",
        )
        argv = [
            self.npm,
            "install",
            f"{package}@{version}",
            *self.registry_option,
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--no-package-lock",
            "--save-exact",
            "--loglevel=warn",
        ]
        result = self._run(argv, prefix, env)
        if result.returncode != 0:
            raise self._failure(package, version, result.stdout + result.stderr)

    def _run(
        self, argv: list[str], cwd: Path, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=NPM_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InstallError(
                f"`npm install` did not finish within {NPM_TIMEOUT_S:.0f} s; check the network "
                f"to the npm registry and retry"
            ) from exc
        except OSError as exc:
            raise InstallError(f"cannot run npm ({self.npm}): {exc}") from exc

    def _failure(self, package: str, version: str, output: str) -> InstallError:
        with contextlib.suppress(OSError):  # a full disk may refuse the log too
            self.failed_log.write_text(output, encoding="utf-8")
        code = npm_error_code(output)
        return InstallError(
            f"npm could not install {package}@{version}: {explain_npm_error(code, output)}"
            f" (npm log: {self.failed_log})"
        )

    def registry(self, env: dict[str, str]) -> str:
        argv = [self.npm, "config", "get", "registry", *self.registry_option]
        completed = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        return completed.stdout.strip() or "unknown"


def npm_error_code(output: str) -> str | None:
    """npm's error code (E404, ETARGET, ENOSPC, ECONNREFUSED, ...) from its output."""
    match = _NPM_ERROR_CODE.search(output)
    return match.group(1) if match else None


_EXPLANATIONS: Mapping[str, str] = {
    "E404": "the registry has no such package or version; check --version against "
    "`npm view openclaw versions`",
    "ETARGET": "the registry has no matching version; check --version against "
    "`npm view openclaw versions`",
    "E401": "the registry refused the request (authentication); check the npm registry and "
    "token in ~/.npmrc",
    "E403": "the registry refused the request (forbidden); check the npm registry configured "
    "in ~/.npmrc",
    "ENOSPC": "the disk is full; free some space or set MIRAGE_CACHE_DIR to another disk",
    "EDQUOT": "the disk quota is exhausted; free some space or set MIRAGE_CACHE_DIR elsewhere",
    "ECONNREFUSED": "the npm registry refused the connection; check `npm config get registry` "
    "and the network",
    "ENOTFOUND": "the npm registry's host name does not resolve; check the network and "
    "`npm config get registry`",
    "EAI_AGAIN": "the npm registry's host name does not resolve; check the network and "
    "`npm config get registry`",
    "ETIMEDOUT": "the npm registry did not answer in time; check the network and retry",
    "ECONNRESET": "the connection to the npm registry was reset; check the network and retry",
    "EBADENGINE": "a package does not support this Node version",
}


def explain_npm_error(code: str | None, output: str) -> str:
    if code is not None and code in _EXPLANATIONS:
        return f"{code}: {_EXPLANATIONS[code]}"
    if code is not None and code.startswith("E5"):
        return f"{code}: the registry failed (HTTP {code[1:]}); retry later"
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return f"{code or 'error'}: {lines[-1][:300] if lines else 'npm printed nothing'}"


def _node_version(node: Path, env: dict[str, str]) -> str:
    if not node.is_file():
        raise InstallError(
            f"the npm package `node` did not provide {node}: its preinstall script fetches the "
            f"platform binary package; make sure npm runs install scripts (no ignore-scripts in "
            f"~/.npmrc) and retry"
        )
    output = _run_checked([str(node), "--version"], env, f"the installed Node ({node})")
    return output.strip().removeprefix("v")


def _smoke_test(node: Path, entry: Path, version: str) -> None:
    if not entry.is_file():
        raise InstallError(f"the openclaw package has no entry point {entry}; is {version} valid?")
    output = _run_checked(
        [str(node), str(entry), "--version"], with_on_path(node.parent), "openclaw --version"
    )
    if version not in output:
        raise InstallError(f"openclaw --version printed {output.strip()[:200]!r}, not {version}")


def _run_checked(argv: list[str], env: dict[str, str], what: str) -> str:
    try:
        completed = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what} did not run: {exc}") from exc
    if completed.returncode != 0:
        detail = (completed.stderr or completed.stdout).strip().splitlines()
        raise InstallError(
            f"{what} failed (exit {completed.returncode}): {detail[0] if detail else ''}"
        )
    return completed.stdout


def _tree_size(folder: Path) -> int:
    total = 0
    for directory, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


def _write_manifest(folder: Path, install: OpenClawInstall) -> None:
    (folder / MANIFEST).write_text(install.model_dump_json(indent=2), encoding="utf-8")


def _move_into_place(partial: Path, final: Path) -> None:
    """Replace ``final`` (a forced reinstall, or an incomplete leftover) by ``partial``."""
    if final.exists():
        retired = final.with_name(f".partial-retired-{final.name}-{os.getpid()}")
        final.rename(retired)
        partial.rename(final)
        shutil.rmtree(retired, ignore_errors=True)
        return
    partial.rename(final)


def require_install(version: str = DEFAULT_OPENCLAW_VERSION) -> OpenClawInstall:
    install = find_install(version)
    if install is None:
        raise OpenClawError(
            f"OpenClaw {version} is not installed in mirage's cache; run "
            "`mirage agents install openclaw` (needs the npm registry once)"
        )
    return install
