"""A stand-in for the CANN runtime libraries the real Mooncake NPU wheel links against, so that it loads here."""

# The wheel's mooncake_master needs no CANN library, but `import mooncake.store` (the guide's verify-install)
# loads libmooncake_store.so and ascend_transport.so, which need libascendcl.so and two more of CANN's
# runtime libraries, and Python loads extension modules with every symbol bound at once (RTLD_NOW). The
# rehearsal has no CANN, so it builds stand-ins: for each library the wheel's shared objects need and this
# machine lacks, a library defining every symbol they leave undefined (Python's own C API aside, which the
# interpreter provides). Each is a function that says which CANN call was made and aborts: loading works, a
# real call (there is none without an NPU) fails loudly. Nothing is copied from CANN: the names come from
# the wheel's own undefined symbols, read with ldd.

from __future__ import annotations

import re
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CannRuntime", "build_cann_runtime"]

_NOT_FOUND = re.compile(r"^\s*(\S+) => not found", re.M)
_UNDEFINED = re.compile(r"^undefined symbol: (\S+)", re.M)
_PYTHON_API = ("Py", "_Py")  # provided by the interpreter that imports the extension


@dataclass(frozen=True)
class CannRuntime:
    """The stand-in libraries built for a wheel."""

    directory: Path  # holds them: put it on LD_LIBRARY_PATH, as CANN's set_env.sh puts its lib64
    libraries: tuple[str, ...]  # their file names (libascendcl.so, ...)
    symbols: int  # how many functions each defines


def _ldd(paths: list[Path], library_path: Path, *, relocations: bool) -> str:
    env = {"LD_LIBRARY_PATH": str(library_path), "PATH": "/usr/bin:/bin"}
    texts = []
    for path in paths:
        command = ["ldd", "-r", str(path)] if relocations else ["ldd", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        texts.append(done.stdout + done.stderr)
    return "\n".join(texts)


def _compile(source: str, target: Path) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False, encoding="utf-8") as handle:
        handle.write(source)
    try:
        done = subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", str(target), handle.name], capture_output=True, text=True, check=False
        )
    finally:
        Path(handle.name).unlink()
    if done.returncode != 0:
        raise OSError(f"cc could not build {target.name}: {done.stderr.strip()}")


def _source(symbols: list[str]) -> str:
    lines = [
        "/* [simulation] guide-guard rehearsal: a stand-in for CANN's runtime libraries, built from the names the",
        "   real Mooncake wheel leaves undefined. Every function aborts: there is no NPU here. */",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static void stand_in(const char *name) {",
        '    fprintf(stderr, "[simulation] CANN runtime stand-in: %s called; no NPU here\\n", name);',
        "    abort();",
        "}",
    ]
    for number, symbol in enumerate(symbols):
        lines.append(f'void cann_{number}(void) __asm__("{symbol}");')
        lines.append(f'void cann_{number}(void) {{ stand_in("{symbol}"); }}')
    return "\n".join(lines) + "\n"


def build_cann_runtime(wheel: Path, directory: Path) -> CannRuntime:
    """Build, in directory, stand-ins for the libraries the wheel's shared objects need and this machine lacks.

    Raises OSError when they cannot be built or the wheel still does not link against them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="guide-guard-wheel-") as unpacked:
        with zipfile.ZipFile(wheel) as archive:
            members = [name for name in archive.namelist() if ".so" in Path(name).name]
            archive.extractall(unpacked, members)
        objects = [Path(unpacked, name) for name in members]
        missing = sorted(set(_NOT_FOUND.findall(_ldd(objects, directory, relocations=False))))
        for library in missing:  # empty first: ldd -r then names every symbol they must define
            _compile("", directory / library)
        undefined = _UNDEFINED.findall(_ldd(objects, directory, relocations=True))
        symbols = sorted({name for name in undefined if not name.startswith(_PYTHON_API)})
        for library in missing:
            _compile(_source(symbols), directory / library)
        left = [name for name in _UNDEFINED.findall(_ldd(objects, directory, relocations=True))]
        left = [name for name in left if not name.startswith(_PYTHON_API)]
        if left:
            raise OSError(f"the stand-in CANN runtime leaves {len(left)} symbols undefined, e.g. {left[0]}")
    return CannRuntime(directory, tuple(missing), len(symbols))
