"""The Docker backend's image, built on this machine from Debian packages, with no registry.

Why no Dockerfile and no ``FROM debian``: the machines that run the sandbox cannot reach a
registry, but they can reach a Debian mirror. ``debootstrap`` writes a minimal root
filesystem with the distribution's ``python3`` (the full one: tasks need ``hashlib``,
``decimal`` and the rest of the standard library), and ``docker import`` turns it into a
one-layer image. Nothing of frostgym goes into the image: the fork server script is
bind-mounted read-only at run time, so editing it never needs a rebuild.

The image tag is a hash of the recipe, so a changed recipe builds a new image and an
unchanged one is found and reused; a file lock keeps concurrent builders (pytest-xdist
workers, parallel runs) from debootstrapping the same image twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.core.errors import SandboxUnavailableError

try:  # optional: only a caller that has a client gets here, see docker_backend
    import docker  # type: ignore[import-untyped]
    import docker.errors  # type: ignore[import-untyped]
except ImportError:
    pass

IMAGE_REPOSITORY = "frostgym-sandbox"
RECIPE_LABEL = "frostgym.recipe"
SANDBOX_LABEL = "frostgym.sandbox"
DEBOOTSTRAP_TIMEOUT_S = 900.0
# Bump when the build steps change in a way the other recipe fields do not show.
# 2: /tmp and /var/tmp are root's 0755 (runc gives a tmpfs the mode of the directory
# it covers, whatever its mode= option says).
RECIPE_VERSION = "2"


@dataclass(frozen=True)
class ImageRecipe:
    """What goes into the image. Every field is hashed into the tag."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = ("python3",)
    version: str = RECIPE_VERSION

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "variant": self.variant,
            "packages": sorted(self.packages),
            "version": self.version,
        }

    def canonical(self) -> str:
        """The recipe as compact JSON with sorted keys: the hashed and labelled form."""
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def tag(self) -> str:
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()[:16]

    @property
    def image_name(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.tag}"


DEFAULT_RECIPE = ImageRecipe()


def cache_dir() -> Path:
    """Where the build lock lives: ``$XDG_CACHE_HOME/frostgym`` or ``~/.cache/frostgym``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "frostgym"


@contextmanager
def _build_lock(recipe: ImageRecipe) -> Iterator[None]:
    """An exclusive lock per recipe, held across check-then-build, so a second builder
    waits and then finds the first one's image instead of building it again."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"docker-image-{recipe.tag}.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _find_image(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise SandboxUnavailableError(f"docker: cannot look up image {name}: {exc}") from None
    return True


def cannot_build_reason() -> str | None:
    """None when this machine can debootstrap an image, else why not (one line)."""
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed"
    if os.geteuid() != 0:
        return "debootstrap needs root"
    return None


def ensure_image(client: docker.DockerClient, *, build: bool = True, recipe: ImageRecipe = DEFAULT_RECIPE) -> str:
    """The sandbox image's name, building it first if this engine does not have it.

    Raises ``SandboxUnavailableError`` with the reason when the image is missing and
    ``build`` is false, or the build fails (no debootstrap, no root, mirror unreachable).
    """
    name = recipe.image_name
    if _find_image(client, name):
        return name
    if not build:
        raise SandboxUnavailableError(f"docker: image {name} is not built (ensure_image(client, build=True) builds it)")
    why = cannot_build_reason()
    if why is not None:
        raise SandboxUnavailableError(f"docker: image {name} is not built and cannot be built here: {why}")
    with _build_lock(recipe):
        if _find_image(client, name):  # another process built it while we waited
            return name
        build_image(client, recipe)
    return name


def build_image(client: docker.DockerClient, recipe: ImageRecipe = DEFAULT_RECIPE) -> float:
    """debootstrap + ``docker import``; returns the seconds it took. Call under the lock."""
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="frostgym-image-"))
    rootfs = workdir / "rootfs"
    archive = workdir / "rootfs.tar"
    try:
        _debootstrap(recipe, rootfs)
        _slim(rootfs)
        _harden(rootfs)
        _tar(rootfs, archive)
        _import(client, recipe, archive)
    finally:
        _unmount_below(rootfs)
        shutil.rmtree(workdir, ignore_errors=True)
    if not _find_image(client, recipe.image_name):
        raise SandboxUnavailableError(f"docker: imported {recipe.image_name}, but the engine does not list it")
    return time.monotonic() - started


def _run(argv: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"docker image build: {what} failed: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-800:]
        raise SandboxUnavailableError(f"docker image build: {what} exited with {done.returncode}: {tail}")


def _debootstrap(recipe: ImageRecipe, rootfs: Path) -> None:
    argv = [
        "debootstrap",
        f"--variant={recipe.variant}",
        f"--include={','.join(sorted(recipe.packages))}",
        recipe.suite,
        str(rootfs),
    ]
    _run(argv, "debootstrap", DEBOOTSTRAP_TIMEOUT_S)


def _slim(rootfs: Path) -> None:
    """Drop downloaded packages and package lists: nothing in the sandbox installs anything."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*"):
        for path in rootfs.glob(pattern):
            path.unlink(missing_ok=True)
    shutil.rmtree(rootfs / "debootstrap", ignore_errors=True)


def _harden(rootfs: Path) -> None:
    """No world-writable temp dirs: the container's /tmp is a tmpfs that takes this mode,
    and tasks must write only to their own scratch dir, never where the next task reads."""
    for name in ("tmp", "var/tmp"):
        path = rootfs / name
        if path.is_dir():
            path.chmod(0o755)


def _tar(rootfs: Path, archive: Path) -> None:
    """GNU tar with numeric owners: ``tarfile`` would need care with device nodes and
    hard links, and names must not be mapped through the host's ``/etc/passwd``."""
    _run(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(archive), "."], "tar", 600.0)


def _import(client: docker.DockerClient, recipe: ImageRecipe, archive: Path) -> None:
    changes = [
        f"LABEL {RECIPE_LABEL}='{recipe.canonical()}' {SANDBOX_LABEL}=1",
        "ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        'CMD ["/usr/bin/python3"]',
    ]
    try:
        output = client.api.import_image_from_file(
            str(archive), repository=IMAGE_REPOSITORY, tag=recipe.tag, changes=changes
        )
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxUnavailableError(f"docker image build: docker import failed: {exc}") from None
    for line in str(output).splitlines():  # the engine reports import errors in the body
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "error" in message:
            raise SandboxUnavailableError(f"docker image build: docker import failed: {message['error']}")


def _unmount_below(root: Path) -> None:
    """Unmount what a failed debootstrap left mounted (``proc``, ``sys``) before deleting
    its tree, so the cleanup never walks into a live filesystem."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    prefix = str(root.resolve()) + "/"
    targets = [line.split()[1] for line in mounts if len(line.split()) > 1]
    for target in sorted((t for t in targets if t.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)
