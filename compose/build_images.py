#!/usr/bin/env python3
"""Build Tetherbed's Docker images without a container registry (`make images`).

No image can be pulled here, so everything starts from Debian packages and
PyPI wheels:

1. tetherbed/base:<hash>  debootstrap + apt in a chroot (base/mkrootfs.sh), then
   `docker import`. The hash covers base/packages.txt and base/mkrootfs.sh.
2. Wheels, built on the host with pip into .build/wheels/: the dependencies
   (keyed by the requirements in pyproject.toml) and the project itself (keyed
   by a hash of its sources). The base's python3 is Debian's 3.11 on glibc
   2.36, so the host must build with CPython 3.11 (checked).
3. tetherbed/hub:<hash> and tetherbed/machine:<hash>  `docker build` of
   images/<name>/Dockerfile FROM the local base (never pulled: it exists, and
   no --pull is given). The wheels are installed offline in a first stage and
   only the venv is copied into the final image, so the .whl files cost no space.
   The hash covers the base tag, the image's files and every wheel's sha256.

A step whose output already exists is skipped (`docker image inspect`), so an
unchanged tree builds nothing and a warm run takes about a second. Each image
is also tagged :latest, and the exact tags are written to .build/images.env
(TETHERBED_BASE_IMAGE, TETHERBED_HUB_IMAGE, TETHERBED_MACHINE_IMAGE), which
docker-compose.yml reads through the environment (default: :latest).

Run as root (debootstrap), with the project's Python 3.11:
    .venv/bin/python compose/build_images.py [--prune]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

COMPOSE = Path(__file__).resolve().parent
REPO = COMPOSE.parent
BUILD = COMPOSE / ".build"
BASE_DIR = COMPOSE / "base"
IMAGES_DIR = COMPOSE / "images"
WHEELS = BUILD / "wheels"
ENV_FILE = BUILD / "images.env"

#: The Python minor version of Debian bookworm's python3, which runs the wheels.
IMAGE_PYTHON = (3, 11)
#: Bump to rebuild wheels and images when this script's recipe changes meaning.
RECIPE_VERSION = "1"
#: Image name -> the pyproject extras its venv gets.
IMAGES: dict[str, tuple[str, ...]] = {"hub": (), "machine": ("desktop",)}
#: How many project wheels (one per source hash) to keep for quick switching.
KEEP_PROJECT_WHEELS = 3


class BuildError(Exception):
    """A step failed; the message says which and why."""


# --- small helpers ------------------------------------------------------------


def log(message: str) -> None:
    print(f"build-images: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Log a slow step and how long it took (the numbers the README quotes)."""
    log(f"{what} ...")
    started = time.monotonic()
    yield
    log(f"{what}: done in {time.monotonic() - started:.1f} s")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def digest_of(parts: Iterable[str | bytes]) -> str:
    """A short hex digest of `parts`, each length-prefixed so boundaries count."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]


def files_under(root: Path) -> list[Path]:
    """Every file under `root`, sorted, without caches."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


def run(command: list[str], *, log_file: Path | None = None, **kwargs: object) -> None:
    """Run a command; on failure raise BuildError with the tail of its output."""
    if log_file is None:
        result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
        output = result.stdout + result.stderr
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("w") as out:
            result = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, check=False, **kwargs
            )
        output = log_file.read_text(errors="replace")
    if result.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-25:])
        where = f" (full log: {log_file})" if log_file else ""
        raise BuildError(
            f"`{' '.join(command[:4])} ...` exited {result.returncode}{where}:\n{tail}"
        )


def image_exists(tag: str) -> bool:
    """Whether the engine has `tag`; raises BuildError if the engine cannot answer."""
    try:
        result = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", tag],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise BuildError("the docker CLI is not installed") from None
    if result.returncode == 0:
        return True
    if "no such image" in result.stderr.lower():
        return False
    raise BuildError(f"cannot ask the Docker engine about {tag}: {result.stderr.strip()}")


def image_size_mb(tag: str) -> float:
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(result.stdout.strip()) / 1e6


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build at a time per tree: parallel test workers and `make` share .build/."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with (BUILD / "build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- 1. the base image ----------------------------------------------------------


def base_tag() -> str:
    files = [BASE_DIR / "packages.txt", BASE_DIR / "mkrootfs.sh"]
    return "tetherbed/base:" + digest_of(
        [RECIPE_VERSION, *(f"{p.name}\0{p.read_text()}" for p in files)]
    )


def ensure_base(tag: str) -> bool:
    """Import the base image, building its root filesystem if needed; True if built."""
    if image_exists(tag):
        return False
    digest = tag.partition(":")[2]
    cache = BUILD / "base"
    tarball = cache / f"rootfs-{digest}.tar"
    if not tarball.exists():
        if os.geteuid() != 0:
            raise BuildError("building the base root filesystem needs root (debootstrap)")
        if shutil.which("debootstrap") is None:
            log("installing debootstrap (apt-get)")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            run(["apt-get", "update", "-qq"], env=env)
            run(
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"],
                env=env,
            )
        with step(f"building the root filesystem of {tag} (debootstrap + apt)"):
            run(
                [str(BASE_DIR / "mkrootfs.sh"), str(tarball), str(cache)],
                log_file=BUILD / "logs/base.log",
            )
        # Only the current root filesystem is worth its 700 MB.
        for old in cache.glob("rootfs-*.tar"):
            if old != tarball:
                old.unlink()
    with step(f"importing {tag}"):
        run(
            [
                *("docker", "import", "--message", "tetherbed base: compose/base/mkrootfs.sh"),
                *(
                    "--change",
                    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                ),
                *("--change", "ENV LANG=C.UTF-8", "--change", 'CMD ["/bin/bash"]'),
                *(str(tarball), tag),
            ]
        )
    return True


# --- 2. wheels -------------------------------------------------------------------


@dataclass(frozen=True)
class WheelSet:
    """The wheels one image installs, and the pinned requirements naming them."""

    directory: Path
    files: tuple[str, ...]
    sha256: dict[str, str]
    requirements: tuple[str, ...]

    def digest_parts(self) -> list[str]:
        return [f"{name} {self.sha256[name]}" for name in self.files]


def check_python() -> None:
    if sys.implementation.name != "cpython" or sys.version_info[:2] != IMAGE_PYTHON:
        want = ".".join(map(str, IMAGE_PYTHON))
        raise BuildError(
            f"wheels are built on the host for the image's CPython {want}, but this is "
            f"{sys.implementation.name} {platform.python_version()}; run with the project's "
            f".venv/bin/python (CPython {want})"
        )
    if platform.machine() != "x86_64" or platform.libc_ver()[0] != "glibc":
        raise BuildError(f"expected an x86_64 glibc host, got {platform.machine()}")


def pyproject() -> dict:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def requirements_for(extras: Iterable[str]) -> list[str]:
    project = pyproject()["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return lines


def ensure_dependency_wheels() -> dict[str, WheelSet]:
    """Every image's dependency wheels; built once per set of requirements."""
    every_extra = sorted({extra for extras in IMAGES.values() for extra in extras})
    all_requirements = requirements_for(every_extra)
    key = digest_of(
        [RECIPE_VERSION, platform.python_version_tuple()[1], *all_requirements]
        + [f"{name}={','.join(extras)}" for name, extras in sorted(IMAGES.items())]
    )
    directory = WHEELS / f"deps-{key}"
    manifest = directory / "manifest.json"
    complete = manifest.exists() and all(
        (directory / name).exists() for name in json.loads(manifest.read_text())["sha256"]
    )
    if not complete:
        with step(f"building dependency wheels into {directory.relative_to(REPO)} (pip wheel)"):
            build_dependency_wheels(directory, all_requirements)
    data = json.loads(manifest.read_text())
    return {
        name: WheelSet(
            directory,
            tuple(data["images"][name]["files"]),
            data["sha256"],
            tuple(data["images"][name]["requirements"]),
        )
        for name in IMAGES
    }


def build_dependency_wheels(directory: Path, requirements: list[str]) -> None:
    WHEELS.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="deps-", dir=WHEELS))
    try:
        requirements_file = staging / "requirements.in"
        requirements_file.write_text("\n".join(requirements) + "\n")
        run(
            [
                *(sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check"),
                *("--wheel-dir", str(staging), "--requirement", str(requirements_file)),
            ],
            log_file=BUILD / "logs/wheels.log",
        )
        wheels = sorted(p.name for p in staging.glob("*.whl"))
        sdists = [
            p.name for p in staging.iterdir() if p.suffix != ".whl" and p.name != "requirements.in"
        ]
        if sdists:
            raise BuildError(f"pip left non-wheel files, cannot install offline: {sdists}")
        for name in wheels:
            check_wheel_tag(name)
        images = {}
        for image, extras in IMAGES.items():
            images[image] = resolve_offline(staging, requirements_for(extras))
        manifest = {
            "python": platform.python_version(),
            "requirements": requirements,
            "images": images,
            "sha256": {name: sha256_file(staging / name) for name in wheels},
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (staging / "requirements.in").unlink()
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def check_wheel_tag(filename: str) -> None:
    """Fail early on a wheel that Debian's CPython 3.11 (glibc 2.36) cannot install."""
    python_tag, abi_tag, platform_tag = filename[: -len(".whl")].split("-")[-3:]
    pythons = set(python_tag.split("."))
    ok_python = bool(pythons & {"py3", "py2.py3", "cp311", "py311"}) or abi_tag == "abi3"
    ok_platform = platform_tag == "any" or any(
        tag.startswith(("manylinux", "linux")) and tag.endswith("x86_64")
        for tag in platform_tag.split(".")
    )
    if not (ok_python and ok_platform):
        raise BuildError(f"{filename} does not fit CPython 3.11 on x86_64 glibc")


def resolve_offline(wheel_dir: Path, requirements: list[str]) -> dict[str, list[str]]:
    """Which of the wheels in `wheel_dir` an install of `requirements` takes.

    pip resolves against the local wheels only (as the image's offline
    install will), so a missing or unfit wheel fails here, on the host.
    """
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        run(
            [
                *(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"),
                *("--no-index", "--find-links", str(wheel_dir), "--report", str(report)),
                *("--quiet", "--disable-pip-version-check", *requirements),
            ]
        )
        items = json.loads(report.read_text())["install"]
    files, pins = [], []
    for item in items:
        url = item["download_info"]["url"]
        files.append(url.rsplit("/", 1)[-1])
        pins.append(f"{item['metadata']['name']}=={item['metadata']['version']}")
    return {"files": sorted(files), "requirements": sorted(pins)}


def project_sources() -> list[Path]:
    """The files the project wheel is built from: pyproject, README, package folders."""
    package_dirs = sorted(set(pyproject()["tool"]["setuptools"]["package-dir"].values()))
    sources = [REPO / "pyproject.toml", REPO / "README.md"]
    for folder in package_dirs:
        sources += files_under(REPO / folder)
    return sources


def ensure_project_wheel() -> Path:
    """The project's wheel for the current sources; built when they change."""
    # Read each file once: the bytes hashed are the bytes built, even while
    # someone edits the tree.
    sources = {str(path.relative_to(REPO)): path.read_bytes() for path in project_sources()}
    key = digest_of([RECIPE_VERSION, *(part for item in sources.items() for part in item)])
    directory = WHEELS / f"project-{key}"
    built = sorted(directory.glob("tetherbed-*.whl")) if directory.exists() else []
    if built:
        os.utime(directory)  # most recently used: kept by the pruning below
        return built[0]
    WHEELS.mkdir(parents=True, exist_ok=True)
    with (
        step(f"building the project wheel ({directory.relative_to(REPO)})"),
        tempfile.TemporaryDirectory(prefix="src-", dir=WHEELS) as scratch,
    ):
        # Build from a clean copy: setuptools' build/ folder in the tree may
        # hold modules that no longer exist.
        source = Path(scratch) / "src"
        for relative, data in sources.items():
            target = source / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        out = Path(scratch) / "out"
        run(
            [
                *(sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check"),
                *("--no-deps", "--wheel-dir", str(out), str(source)),
            ],
            log_file=BUILD / "logs/project-wheel.log",
            # Fixed zip timestamps: the same sources give the same wheel, so
            # another clone of the same commit computes the same image tags.
            env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"},
        )
        wheels = list(out.glob("tetherbed-*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"expected one tetherbed wheel, pip made {wheels}")
        staging = Path(scratch) / "done"
        staging.mkdir()
        shutil.move(wheels[0], staging / wheels[0].name)
        staging.rename(directory)
    olds = sorted(WHEELS.glob("project-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in olds[KEEP_PROJECT_WHEELS:]:
        shutil.rmtree(old, ignore_errors=True)
    return next(directory.glob("tetherbed-*.whl"))


# --- 3. hub and machine images --------------------------------------------------


def image_files(name: str) -> list[tuple[str, Path]]:
    """(name in the build context, source) for an image: common files, then its own."""
    files: dict[str, Path] = {}
    for folder in (IMAGES_DIR / "common", IMAGES_DIR / name):
        for path in files_under(folder):
            files[str(path.relative_to(folder))] = path
    if "Dockerfile" not in files:
        raise BuildError(f"{IMAGES_DIR / name}/Dockerfile is missing")
    return sorted(files.items())


def image_tag(name: str, base: str, wheels: WheelSet, project_wheel: Path) -> str:
    parts = [RECIPE_VERSION, name, base]
    for relative, path in image_files(name):
        parts += [relative, path.read_bytes()]
    parts += wheels.digest_parts()
    parts.append(f"{project_wheel.name} {sha256_file(project_wheel)}")
    return f"tetherbed/{name}:{digest_of(parts)}"


def build_image(name: str, tag: str, base: str, wheels: WheelSet, project_wheel: Path) -> None:
    """`docker build` from a small context of exactly what goes into the image."""
    context = BUILD / "context" / name
    if context.exists():
        shutil.rmtree(context)
    (context / "wheels").mkdir(parents=True)
    (context / "project").mkdir()
    for relative, path in image_files(name):
        target = context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    for filename in wheels.files:
        os.link(wheels.directory / filename, context / "wheels" / filename)
    (context / "wheels" / "requirements.txt").write_text("\n".join(wheels.requirements) + "\n")
    os.link(project_wheel, context / "project" / project_wheel.name)
    try:
        with step(f"building {tag}"):
            run(
                [
                    *("docker", "build", "--build-arg", f"BASE={base}", "--tag", tag),
                    *("--label", f"org.tetherbed.content-hash={tag.partition(':')[2]}"),
                    str(context),
                ],
                log_file=BUILD / f"logs/{name}.log",
            )
    finally:
        shutil.rmtree(context, ignore_errors=True)


def prune(keep: set[str]) -> None:
    """Remove tetherbed/* images of older content hashes."""
    result = subprocess.run(
        [
            *("docker", "image", "ls", "--filter", "reference=tetherbed/*"),
            *("--format", "{{.Repository}}:{{.Tag}}"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = [
        tag
        for tag in result.stdout.split()
        if tag not in keep and not tag.endswith((":latest", ":<none>"))
    ]
    if stale:
        log(f"removing {len(stale)} older image tag(s): {' '.join(stale)}")
        subprocess.run(["docker", "image", "rm", *stale], capture_output=True, check=False)


def build_all(*, prune_old: bool) -> None:
    started = time.monotonic()
    built: list[str] = []
    check_python()
    base = base_tag()
    if ensure_base(base):
        built.append("base")
    wheel_sets = ensure_dependency_wheels()
    project_wheel = ensure_project_wheel()
    tags = {"base": base}
    for name in IMAGES:
        tag = image_tag(name, base, wheel_sets[name], project_wheel)
        tags[name] = tag
        if not image_exists(tag):
            build_image(name, tag, base, wheel_sets[name], project_wheel)
            built.append(name)
    for name, tag in tags.items():
        # Humans and `docker compose up` without images.env get :latest.
        run(["docker", "tag", tag, f"tetherbed/{name}:latest"])
    env = "".join(f"TETHERBED_{name.upper()}_IMAGE={tag}\n" for name, tag in tags.items())
    ENV_FILE.write_text(env)
    if prune_old:
        prune(set(tags.values()))
    elapsed = time.monotonic() - started
    for tag in tags.values():
        print(f"{tag}  {image_size_mb(tag):.0f} MB")
    if not built:
        what = "warm: nothing to build"
    else:
        what = f"{'cold' if 'base' in built else 'partial'}: {', '.join(built)} built"
    print(f"images ready in {elapsed:.1f} s ({what}); tags in {ENV_FILE.relative_to(REPO)}")


def ensure_compose_command() -> None:
    """Make `docker compose` work where only Compose v1 is installed.

    Debian bookworm packages Compose v1 (`docker-compose`) and no v2 plugin,
    and no registry is reachable to fetch one; a small CLI plugin hands
    `docker compose ...` to `docker-compose ...`.
    """
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if probe.returncode == 0 or not Path("/usr/bin/docker-compose").exists():
        return
    plugins = Path.home() / ".docker" / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    target = plugins / "docker-compose"
    shutil.copyfile(REPO / "compose" / "docker-compose-v1-plugin.sh", target)
    target.chmod(0o755)
    log(f"installed {target}: `docker compose` now runs docker-compose (v1)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--prune", action="store_true", help="remove tetherbed/* images of older hashes"
    )
    args = parser.parse_args(argv)
    try:
        ensure_compose_command()
        with build_lock():
            build_all(prune_old=args.prune)
    except BuildError as exc:
        log(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
