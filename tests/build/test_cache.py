"""The engine cache (``convert(..., cache_dir=...)``) and TensorRT's timing cache (``timing_cache=``)."""

from __future__ import annotations

import array
import dataclasses
import enum
import gc
import importlib.util
import json
import logging
import multiprocessing
import os
import pathlib
import subprocess
import sys
import types
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.backends import sim_backend
from torch2trt_lite.build import cache
from torch2trt_lite.build.options import ConvertOptions

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
        gc.collect()  # NOTE: not a collection of earlier tests' garbage inside the timed hit
        again = torch2trt_lite.convert(m, [X], backend="sim", cache_dir=tmp_path)
    assert first.conversion_stats["cache"] == "miss" and again.conversion_stats["cache"] == "hit"
    assert len(CALLS) == calls, "a hit must not trace the model"
    assert cache.stats() == {"hits": 1, "misses": 1, "rebuilt": 0}
    assert "engine cache miss" in caplog.text and "engine cache hit" in caplog.text
    assert first.conversion_time_s is not None and again.conversion_time_s is not None
    assert again.conversion_time_s < first.conversion_time_s, (
        again.conversion_time_s, first.conversion_time_s, again.conversion_stats, first.conversion_stats)
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


# ------------------------------------------------------------------ what the key must cover (issue 22)
# Each model computes from a value that is not a parameter, buffer or plain number: changing that
# value must change the key (a hit would return the engine of the old value).
class DictScale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k = {"scale": 2.0}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.k["scale"]


class Table(torch.nn.Module):
    """A lookup table of floats (a list of 1000 or more: left out of the key before)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = [float(i) for i in range(1024)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.table[7]


@dataclasses.dataclass
class Inner:
    scale: float


@dataclasses.dataclass
class Config:
    name: str
    inner: Inner


class Nested(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cfg = Config("a", Inner(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.cfg.inner.scale


class Mode(enum.Enum):
    DOUBLE = 2
    TRIPLE = 3


class Moded(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mode = Mode.DOUBLE

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if self.mode is Mode.DOUBLE else x * 3


def _change_dict(m: Any) -> None:
    m.k["scale"] = 3.0


def _change_table(m: Any) -> None:
    m.table[7] = -1.5


def _change_nested(m: Any) -> None:
    m.cfg.inner.scale = 3.0


def _change_mode(m: Any) -> None:
    m.mode = Mode.TRIPLE


@pytest.mark.parametrize(("make", "change"), [
    (DictScale, _change_dict), (Table, _change_table), (Nested, _change_nested), (Moded, _change_mode),
], ids=["dict", "list-of-floats", "nested-dataclass", "enum"])
def test_a_changed_attribute_is_not_a_stale_hit(tmp_path: pathlib.Path, make: Any, change: Any) -> None:
    m = make().eval()
    x = torch.randn(2, 3)
    first = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path)
    torch.testing.assert_close(first(x), m(x))
    assert torch2trt_lite.convert(make().eval(), [x], backend="sim", cache_dir=tmp_path).conversion_stats["cache"] == "hit"
    change(m)
    again = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path)
    torch.testing.assert_close(again(x), m(x))  # a stale hit computes with the old value
    assert again.conversion_stats["cache"] == "miss" and len(_entries(tmp_path)) == 2


class LengthMask(torch.nn.Module):
    """The longest length, read from the values, sizes the output (a shape input: its Input's
    low/high are the engine's value range)."""

    def forward(self, feat: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n = lengths.max().item()
        mask = torch.arange(n)[None, :] < lengths[:, None]
        return feat[:, :n] * mask[..., None]


def test_input_value_bounds_are_in_the_key(tmp_path: pathlib.Path) -> None:
    m = LengthMask().eval()
    feat = torch.randn(3, 64, 4)

    def lengths(high: int) -> torch2trt_lite.Input:
        return torch2trt_lite.Input((3,), (3,), (3,), dtype=torch.int64, example=torch.tensor([5, 9, 3]), low=1, high=high)

    small = torch2trt_lite.convert(m, [feat, lengths(10)], backend="sim", cache_dir=tmp_path)
    assert small.metadata["inputs"][1]["values"]["max"] == [9, 9, 9]
    wide = torch2trt_lite.convert(m, [feat, lengths(65)], backend="sim", cache_dir=tmp_path)
    x = torch.tensor([40, 2, 7])  # inside the second range, outside the first (a stale hit refuses it)
    torch.testing.assert_close(wide(feat, x), m(feat, x))
    assert wide.conversion_stats["cache"] == "miss"


class Locked(torch.nn.Module):
    """Its scale lives in a C array (no stable representation: the key cannot hash it)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.lin.factors = array.array("d", [2.0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.lin.factors[0]


def test_an_unrepresentable_attribute_turns_the_cache_off(tmp_path: pathlib.Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    m = Locked().eval()
    x = torch.randn(2, 3)
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        first = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "lin.factors (a array.array)" in warned[0] and "cache" in warned[0], warned
    assert first.conversion_stats["cache"] == "off" and _entries(tmp_path) == []
    m.lin.factors[0] = 3.0
    again = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path)
    assert again.conversion_stats["cache"] == "off" and _entries(tmp_path) == []
    with torch.no_grad():
        torch.testing.assert_close(again(x), m(x))


class Shared(torch.nn.Module):
    """Attributes that loop back (a dict holding itself, an object holding the model) and a set."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        loop: dict[str, Any] = {"scale": 2.0}
        loop["self"] = loop
        self.loop = loop
        self.holder = types.SimpleNamespace(owner=self, helper=self.lin, tags={"b", "a", "c"})
        self.act = torch.nn.functional.gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x)) * self.loop["scale"]


def test_cycles_sets_and_functions_are_keyed() -> None:
    be = sim_backend()
    x = torch.randn(2, 3)
    torch.manual_seed(0)
    m = Shared().eval()
    base = cache.key(m, [x], ["input_0"], _options(), be)
    assert base is not None
    torch.manual_seed(0)
    assert cache.key(Shared().eval(), [x], ["input_0"], _options(), be) == base
    m.loop["scale"] = 3.0
    assert cache.key(m, [x], ["input_0"], _options(), be) != base
    m.loop["scale"] = 2.0
    m.holder.tags.add("d")
    assert cache.key(m, [x], ["input_0"], _options(), be) != base
    m.holder.tags.discard("d")
    m.act = torch.nn.functional.silu
    assert cache.key(m, [x], ["input_0"], _options(), be) != base


_KEY_IN_A_FRESH_PROCESS = """
import sys, torch
sys.path.insert(0, {root!r})
from tests.build.test_cache import Shared, _options
from torch2trt_lite.backends import sim_backend
from torch2trt_lite.build import cache
torch.manual_seed(0)
print(cache.key(Shared().eval(), [torch.zeros(2, 3)], ["input_0"], _options(), sim_backend()))
"""


def test_the_key_is_the_same_in_another_process() -> None:
    """Sets and dicts hash by content, not by the process's string hashes (PYTHONHASHSEED)."""
    torch.manual_seed(0)
    want = cache.key(Shared().eval(), [torch.zeros(2, 3)], ["input_0"], _options(), sim_backend())
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", _KEY_IN_A_FRESH_PROCESS.format(root=root)], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split()[-1] == want


# a value other than the default for each option that is in the key
_OPTION_VALUES: dict[str, Any] = {
    "output_names": ["y"], "max_workspace_size": 1 << 20, "verify": False, "precision": "fp16",
    "fp16_mode": True, "precision_overrides": {torch.nn.LayerNorm: "fp32", torch.nn.functional.softmax: "fp16"},
    "io_dtype": "fp16", "int8_mode": True, "int8_calib_algorithm": "max", "refittable": True, "strip_weights": True,
    "truncate_double": True,
}


def test_every_option_is_in_the_key_or_says_why_not() -> None:
    fields = {f.name for f in dataclasses.fields(ConvertOptions)}
    assert set(cache.NOT_KEYED) <= fields, set(cache.NOT_KEYED) - fields
    keyed = fields - set(cache.NOT_KEYED)
    assert keyed == set(_OPTION_VALUES), (
        f"new convert options {keyed - set(_OPTION_VALUES)}: give each a value here (it is in the cache key), "
        "or name it in cache.NOT_KEYED with the reason"
    )
    base, bad = cache.option_items(ConvertOptions())
    assert base == {} and bad is None  # the defaults: the keys of existing entries stay as they were
    seen = []
    for name, value in _OPTION_VALUES.items():
        items, bad = cache.option_items(ConvertOptions(**{name: value}))
        assert bad is None and list(items) == [f"option {name}"], (name, items, bad)
        seen.append(json.dumps(items, sort_keys=True))
        assert cache.option_items(ConvertOptions(**{name: value})) == (items, None)  # stable
    assert len(set(seen)) == len(seen)
    for name in cache.NOT_KEYED:
        items, _ = cache.option_items(ConvertOptions(**{name: object()}))
        assert items == {}, name


def test_verify_false_entry_is_not_hit_by_verify_true(tmp_path: pathlib.Path) -> None:
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3)
    torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path, max_batch_size=4, verify=False)
    t = torch2trt_lite.convert(m, [x], backend="sim", cache_dir=tmp_path, max_batch_size=4)
    assert t.conversion_stats["cache"] == "miss"
