"""A plain ``pip install`` of the wheel converts: build the wheel, install it (not editable) into a
fresh venv that holds only the core dependencies, and run ``tests/wheel_smoke.py`` there.

    python tools/wheel_check.py [--work DIR] [--keep]

The venv gets torch, numpy and rich (the ``dependencies`` the wheel declares) and their whole
dependency closure, and nothing else (no extras: no TensorRT, transformers, torchvision, modelopt).
They are not downloaded: the closure is computed with ``importlib.metadata`` from the distributions
installed next to this interpreter (requirements, extras and markers evaluated as pip would), and a
folder of symbolic links to exactly their files (whole folders where no other distribution shares
them, namespace folders such as ``nvidia/`` entry by entry) is added to the venv by a ``.pth`` file
(``site.addsitedir``). The wheel is installed with ``pip --python VENV install --no-deps``, then
``pip check`` says whether the venv satisfies every requirement of what it holds.

Exit status: 0 passed, 1 failed, 77 cannot run here (the reason on stderr: no symlinks, no
``venv``, a dependency without a RECORD to link from, ...).
"""

from __future__ import annotations

import argparse
import email.parser
import importlib.metadata as md
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = ROOT / "tests" / "wheel_smoke.py"
_SHADOWED = """
import pathlib, sys, torch, torch2trt_lite
root = pathlib.Path.cwd().resolve()
assert pathlib.Path(torch2trt_lite.__file__).resolve().parent == root / "torch2trt_lite", torch2trt_lite.__file__
m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).eval()
x = torch.randn(2, 3, 8, 8)
with torch.no_grad():
    torch.testing.assert_close(torch2trt_lite.convert(m, [x], backend="sim")(x), m(x), rtol=1e-5, atol=1e-5)
assert pathlib.Path(sys.modules["torch2trt_lite.converters"].__file__).resolve().parent == root / "converters"
print("shadowed: ok")
"""
CANNOT = 77


class CannotRun(Exception):
    """This machine cannot run the check (not a failure of the package)."""


def _name(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def core_requirements(wheel: pathlib.Path) -> list[str]:
    """The wheel's ``Requires-Dist`` entries that no extra asks for."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = email.parser.Parser().parsestr(z.read(meta).decode())
    return [r for r in msg.get_all("Requires-Dist") or [] if "extra ==" not in r.replace("'", '"')]


def closure(requirements: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions ``requirements`` need, recursively (with the extras they ask for)."""
    from packaging.requirements import Requirement

    found: dict[str, md.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = _name(req.name)
        try:
            dist = found.get(key) or md.distribution(req.name)
        except md.PackageNotFoundError:
            raise CannotRun(f"{req.name} (required as {req}) is not installed next to {sys.executable}") from None
        if not req.specifier.contains(dist.version, prereleases=True):
            raise CannotRun(f"{req.name} {dist.version} is installed, {req} is required")
        found[key] = dist
        for extra in ("", *sorted(req.extras)):
            if (key, extra) in done:
                continue
            done.add((key, extra))
            for text in dist.requires or []:
                sub = Requirement(text)
                if sub.marker is None and extra:
                    continue  # a plain requirement: followed with extra ""
                if sub.marker is None or sub.marker.evaluate({"extra": extra}):
                    sub.marker = None
                    todo.append(sub)
    return found


def _owned(dist: md.Distribution) -> list[tuple[str, ...]]:
    files = dist.files
    if files is None:
        raise CannotRun(f"{dist.metadata['Name']} has no RECORD: its files cannot be linked")
    return [p.parts for p in files if p.parts and p.parts[0] != ".."]


def link_tree(site: pathlib.Path, dists: dict[str, md.Distribution], target: pathlib.Path) -> int:
    """Symbolic links in ``target`` to the files of ``dists`` under ``site``: a path whose every owner
    (among all installed distributions) is in ``dists`` is one link, a shared one (a namespace folder)
    a real folder with links to what ``dists`` own in it. Returns the number of links."""
    owners: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for dist in md.distributions(path=[str(site)]):
        name = _name(dist.metadata["Name"] or "")
        for parts in _owned(dist) if dist.files is not None else []:
            for i in range(1, len(parts) + 1):
                owners[parts[:i]].add(name)
    wanted = set(dists)
    links = 0

    def place(path: tuple[str, ...]) -> None:
        nonlocal links
        src, dst = site.joinpath(*path), target.joinpath(*path)
        if not src.exists() or dst.exists():
            return
        if owners[path] <= wanted or not src.is_dir() or src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src, target_is_directory=src.is_dir())
            links += 1
            return
        dst.mkdir(parents=True)
        children = {p[len(path)] for p in owners if len(p) > len(path) and p[: len(path)] == path
                    and owners[p] & wanted}
        for child in sorted(children):
            place((*path, child))

    for dist in dists.values():
        if pathlib.Path(str(dist.locate_file(""))).resolve() != site.resolve():
            raise CannotRun(f"{dist.metadata['Name']} is installed in {dist.locate_file('')}, not in {site}")
        for top in sorted({parts[:1] for parts in _owned(dist)}):
            place(top)
    return links


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[:6]} exited {res.returncode}:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def check(work: pathlib.Path) -> None:
    t0 = time.perf_counter()
    if os.name != "posix":
        raise CannotRun("the core venv is linked with symbolic links (POSIX only)")
    pip = [sys.executable, "-m", "pip"]
    res = subprocess.run([*pip, "--version"], capture_output=True, text=True, check=False)
    version = res.stdout.split()[1] if res.returncode == 0 and len(res.stdout.split()) > 1 else "0"
    if tuple(int(v) for v in version.split(".")[:2] if v.isdigit()) < (22, 3):
        raise CannotRun(f"pip {version} has no --python (pip >= 22.3 does)")
    dist_dir, venv, deps = work / "dist", work / "venv", work / "core-deps"
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist_dir), str(ROOT)])
    (wheel,) = dist_dir.glob("torch2trt_lite-*.whl")
    t_wheel = time.perf_counter()

    reqs = core_requirements(wheel)
    dists = closure(reqs)
    site = pathlib.Path(str(md.distribution("torch").locate_file("")))
    links = link_tree(site, dists, deps)
    t_links = time.perf_counter()
    print(f"core requirements {reqs}: {len(dists)} distributions, {links} links", flush=True)

    try:
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    except RuntimeError as e:
        raise CannotRun(f"python -m venv fails here: {e}") from None
    py = venv / "bin" / "python"
    venv_site = pathlib.Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (venv_site / "core-deps.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    _run([*pip, "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)])
    out = _run([*pip, "--python", str(py), "check"])
    print(out.stdout.strip(), flush=True)
    t_install = time.perf_counter()

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    run_dir = work / "run"
    run_dir.mkdir()
    res = subprocess.run([str(py), "-I", str(SMOKE)], cwd=run_dir, env=env, text=True, capture_output=True,
                         check=False, timeout=900)
    print(res.stdout[-6000:], res.stderr[-6000:], sep="\n", flush=True)
    if res.returncode != 0:
        raise RuntimeError(f"tests/wheel_smoke.py failed in the core venv (exit {res.returncode})")
    # Python started in the checkout's root imports the source folder, not the installed wheel: it
    # must import and convert all the same (torch2trt_lite/_layout.py maps converters/ and plugins_cuda/)
    res = subprocess.run([str(py), "-c", _SHADOWED], cwd=ROOT, env=env, text=True, capture_output=True, check=False,
                         timeout=900)
    print(res.stdout[-3000:], res.stderr[-3000:], sep="\n", flush=True)
    if res.returncode != 0 or "shadowed: ok" not in res.stdout:
        raise RuntimeError(f"the checkout, imported over the installed wheel from its root, failed (exit {res.returncode})")
    t_end = time.perf_counter()
    print(f"wheel check passed in {t_end - t0:.1f}s (wheel {t_wheel - t0:.1f}s, links {t_links - t_wheel:.1f}s, "
          f"venv + install + pip check {t_install - t_links:.1f}s, smoke run {t_end - t_install:.1f}s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--work", type=pathlib.Path, help="a folder for the wheel, links and venv (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args(argv)
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="t2t-wheel-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        check(work)
    except CannotRun as e:
        print(f"wheel check cannot run here: {e}", file=sys.stderr)
        return CANNOT
    except RuntimeError as e:
        print(f"wheel check FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
