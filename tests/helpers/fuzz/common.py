"""The libFuzzer entry point shared by the harness modules.

``python -m fuzz.<harness> --seeds DIR`` writes the harness's seed corpus into DIR;
``python -m fuzz.<harness> [--write-seeds=DIR] [libFuzzer flags] CORPUS_DIR`` fuzzes
(seeding DIR first). Only the code under test
is instrumented (every function of the named packages, plus generated code such as the
Kafka decoders, via atheris.instrument_func), so libFuzzer's ``cov:`` figure counts edges
of our decoders, not of the standard library. The harness modules stay importable without
atheris: the regression tests call their ``test_one_input`` directly.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FunctionType


def write_seeds(seeds: Iterable[bytes], directory: Path) -> int:
    """One file per distinct seed, named by its hash (as libFuzzer names corpus files)."""
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for seed in seeds:
        path = directory / hashlib.sha1(seed).hexdigest()
        if not path.exists():
            path.write_bytes(seed)
            count += 1
    return count


def _functions(packages: tuple[str, ...]) -> Iterable[FunctionType]:
    for name, module in list(sys.modules.items()):
        if module is None or not any(name == p or name.startswith(p + ".") for p in packages):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, FunctionType) and value.__module__ == name:
                yield value
            elif inspect.isclass(value) and value.__module__ == name:
                for attr in vars(value).values():
                    func = getattr(attr, "__func__", attr)
                    if isinstance(func, FunctionType):
                        yield func


def instrument(packages: tuple[str, ...], extra: Iterable[Callable[..., object]] = ()) -> int:
    """Add coverage instrumentation to every function of ``packages`` and to ``extra``."""
    import atheris

    seen: set[int] = set()
    for func in [*_functions(packages), *extra]:
        if isinstance(func, FunctionType) and id(func.__code__) not in seen:
            atheris.instrument_func(func)
            seen.add(id(func.__code__))
    return len(seen)


def main(
    seeds: Callable[[], Iterable[bytes]],
    test_one_input: Callable[[bytes], None],
    packages: tuple[str, ...],
    extra: Callable[[], Iterable[Callable[..., object]]] = lambda: (),
) -> None:
    argv = sys.argv
    if len(argv) == 3 and argv[1] == "--seeds":
        written = write_seeds(seeds(), Path(argv[2]))
        print(f"wrote {written} seeds to {argv[2]}")
        return
    for arg in argv[1:]:
        if arg.startswith("--write-seeds="):  # seed the corpus, then fuzz (one start-up)
            argv.remove(arg)
            write_seeds(seeds(), Path(arg.split("=", 1)[1]))
    import atheris

    # __main__: the harness's own checks (comparisons there guide the fuzzer too)
    count = instrument((*packages, "__main__"), extra())
    print(f"instrumented {count} functions of {', '.join(packages)}", file=sys.stderr)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
