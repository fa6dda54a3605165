"""The engine cache (``convert(..., cache_dir=...)``) and TensorRT's timing cache (``timing_cache=``)."""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
import os
import pathlib
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.backends import sim_backend
from torch2trt_lite.build import cache

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
CALLS: list[int] = []  # forward calls of Net (outside the module: its attributes are part of the key)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(4, 4, 3, padding=1) for _ in range(12))
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(1)
        for c in self.convs:
            x = torch.relu(c(x)) + x
        return self.head(x.mean((2, 3)))


def _net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net().eval()


X = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))


def _entries(d: pathlib.Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".engine"))


def test_miss_then_hit(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    m = _net()
    cache.reset_stats()
    with caplog.at_level(logging.INFO, logger="torch2trt_lite"):
        first = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
        calls = len(CALLS)
        again = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
    assert first.conversion_stats["cache"] == "miss" and again.conversion_stats["cache"] == "hit"
    assert len(CALLS) == calls, "a hit must not trace the model"
    assert cache.stats() == {"hits": 1, "misses": 1, "rebuilt": 0}
    assert "engine cache miss" in caplog.text and "engine cache hit" in caplog.text
    assert first.conversion_time_s is not None and again.conversion_time_s is not None
    assert again.conversion_time_s < first.conversion_time_s, (again.conversion_time_s, first.conversion_time_s)
    (entry,) = _entries(tmp_path)
    assert entry == cache.key(m, [X], ["input_0"], _options(), sim_backend()) + ".engine"
    with torch.no_grad():
        want = m(X)
    torch.testing.assert_close(again(X), want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(first(X), want, rtol=1e-4, atol=1e-5)


def _options(**kw: Any) -> dict[str, Any]:
    opts = {"max_workspace_size": 1 << 30, "compute_capabilities": [], "input_names": ["input_0"],
            "output_names": None}
    opts.update(kw)
    return opts


def test_key_changes() -> None:
    be = sim_backend()
    m = _net()
    base = cache.key(m, [X], ["input_0"], _options(), be)
    assert cache.key(_net(), [X], ["input_0"], _options(), be) == base  # the same model, made again
    with torch.no_grad():
        m.get_parameter("convs.5.weight")[0, 0, 0, 0] += 1e-3  # one parameter value
    assert cache.key(m, [X], ["input_0"], _options(), be) != base
    m = _net()
    setattr(m.get_submodule("convs.0"), "stride", (2, 2))  # noqa: B010 - a plain attribute forward depends on (not in the parameters)
    assert cache.key(m, [X], ["input_0"], _options(), be) != base
    m = _net()
    assert cache.key(m, [X[:1]], ["input_0"], _options(), be) != base  # an input shape
    assert cache.key(m, [X.half()], ["input_0"], _options(), be) != base  # an input dtype
    assert cache.key(m, [X], ["images"], _options(input_names=["images"]), be) != base  # names
    assert cache.key(m, [X], ["input_0"], _options(max_workspace_size=1 << 20), be) != base  # an option
    assert cache.key(m, [X], ["input_0"], _options(), sim_backend("10.16")) != base  # the backend version
    assert cache.key(m, [X], ["input_0"], _options(), be) == base
    if HAS_RTX:
        from torch2trt_lite.backends import real_backend

        assert cache.key(m, [X], ["input_0"], _options(), real_backend("tensorrt-rtx")) != base  # the backend


def test_backend_and_shape_get_their_own_entries(tmp_path: pathlib.Path) -> None:
    m = _net()
    a = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
    b = torch2trt_lite.convert(m, [X[:1]], backend="sim", cache_dir=tmp_path)
    assert a.conversion_stats["cache"] == b.conversion_stats["cache"] == "miss"
    assert len(_entries(tmp_path)) == 2
    with torch.no_grad():
        torch.testing.assert_close(b(X[:1]), m(X[:1]), rtol=1e-4, atol=1e-5)


def test_corrupt_entry_is_rebuilt(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    m = _net()
    torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
    (entry,) = _entries(tmp_path)
    path = tmp_path / entry
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the plan: its SHA-256 no longer matches
    path.write_bytes(bytes(data))
    cache.reset_stats()
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        t = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
    assert t.conversion_stats["cache"] == "miss"
    assert cache.stats() == {"hits": 0, "misses": 1, "rebuilt": 1}
    assert "does not load" in caplog.text and entry in caplog.text
    with torch.no_grad():
        torch.testing.assert_close(t(X), m(X), rtol=1e-4, atol=1e-5)
    assert torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path).conversion_stats["cache"] == "hit"


def _convert_together(folder: str, barrier: Any) -> tuple[str, bool]:
    """Convert Net into ``folder``; the two writers save their entry at the same moment."""
    store = cache.store

    def store_together(module: Any, path: str) -> None:
        barrier.wait(timeout=120)  # both have missed and built: now both write the one entry
        store(module, path)

    cache.store = store_together  # type: ignore[assignment]
    try:
        m = _net()
        t = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=folder, progress=False)
    finally:
        cache.store = store  # type: ignore[assignment]
    again = torch2trt_lite.load(os.path.join(folder, _entries(pathlib.Path(folder))[0]))
    with torch.no_grad():
        want = m(X)
    ok = all(torch.allclose(mod(X), want, rtol=1e-4, atol=1e-5) for mod in (t, again))
    return str(t.conversion_stats["cache"]), ok


def _worker(folder: str, barrier: Any, results: Any) -> None:
    results.put(_convert_together(folder, barrier))


def test_concurrent_writers_of_one_key(tmp_path: pathlib.Path) -> None:
    """This process and a spawned one convert the same model into one cache_dir at once: both miss,
    both write the entry (at the same moment), both get working modules, one file results."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    child = ctx.Process(target=_worker, args=(str(tmp_path), barrier, results))
    child.start()
    try:
        mine = _convert_together(str(tmp_path), barrier)
        theirs = results.get(timeout=180)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    assert [mine, theirs] == [("miss", True), ("miss", True)]
    assert len(_entries(tmp_path)) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left
    t = torch2trt_lite.convert(_net(), [X], backend="sim", cache_dir=tmp_path)
    assert t.conversion_stats["cache"] == "hit"


def test_cache_dir_must_be_a_folder(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="cache_dir"):
        torch2trt_lite.convert(_net(), [X], backend="sim", cache_dir=f)


@pytest.mark.rtx
def test_rtx_engine_cached(tmp_path: pathlib.Path) -> None:
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    first = torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", cache_dir=tmp_path)
    again = torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", cache_dir=tmp_path)
    assert (first.conversion_stats["cache"], again.conversion_stats["cache"]) == ("miss", "hit")
    assert again.backend == "tensorrt-rtx" and again.plan_sha256 == first.plan_sha256
    sim = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path)  # another backend: its own entry
    assert sim.conversion_stats["cache"] == "miss" and len(_entries(tmp_path)) == 2


# -------------------------------------------------------------------------------- timing cache
def test_timing_cache_is_a_no_op_on_the_sim(tmp_path: pathlib.Path) -> None:
    m = _net()
    t = torch2trt_lite.convert(m, [X], backend="sim", timing_cache=tmp_path / "timing.cache")
    assert not (tmp_path / "timing.cache").exists()  # the sim times nothing
    with torch.no_grad():
        torch.testing.assert_close(t(X), m(X), rtol=1e-4, atol=1e-5)


@pytest.mark.rtx
def test_timing_cache_written_and_reused_on_rtx(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    path = tmp_path / "timing.cache"
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", timing_cache=path)
        assert path.stat().st_size > 0
        first = path.read_bytes()
        t = torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", timing_cache=path)
    assert t.backend == "tensorrt-rtx" and path.stat().st_size > 0
    assert len(path.read_bytes()) >= len(first) // 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_cache_hit_keeps_cuda_graph_option(tmp_path: Any) -> None:
    """cuda_graph= reaches the module of a cache hit too (the sim refuses it, as on a miss)."""
    model = torch.nn.ReLU().eval()
    x = torch.randn(2, 3)
    torch2trt_lite.convert(model, [x], backend="sim", cache_dir=tmp_path)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="CUDA graphs need a real TensorRT backend"):
        torch2trt_lite.convert(model, [x], backend="sim", cache_dir=tmp_path, cuda_graph=True)
