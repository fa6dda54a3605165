"""The command line and the samples run end to end."""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_convert_info_and_check(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "r18.engine"
    rc = cli.main(["convert", "torchvision:resnet18", "--shape", "1x3x64x64", "--backend", "sim", "-o", str(engine), "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "sim" and report["layers"] > 20
    assert report["max_rel_err"] <= 1e-4
    assert engine.exists()
    assert cli.main(["info", str(engine)]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"][0]["shape"] == [1, 3, 64, 64]
    assert cli.main(["check", "torchvision:resnet18", "--shape", "1x3x64x64"]) == 0


def test_bad_arguments_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["convert", "torchvision:no_such_net", "--shape", "1x3x8x8"]) == 2
    assert "no model named" in capsys.readouterr().err
    assert cli.main(["convert", "torchvision:resnet18", "--shape", "1xAx8"]) == 2
    assert "--shape" in capsys.readouterr().err
    assert cli.main(["info", "/nonexistent.engine"]) == 2
    assert "cannot read engine file '/nonexistent.engine'" in capsys.readouterr().err


def test_check_reports_unsupported_calls(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bessel_net.py").write_text(
        "import torch\n\n\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.special.bessel_j0(torch.relu(x))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["check", "bessel_net:Net", "--shape", "2x3"]) == 1
    out = capsys.readouterr().out
    assert "bessel_j0" in out and "bessel_net.py:6" in out
    assert cli.main(["convert", "bessel_net:Net", "--shape", "2x3", "--backend", "sim"]) == 2
    err = capsys.readouterr().err
    assert "bessel_j0" in err and "bessel_net.py:6" in err


def test_check_with_a_dynamic_range(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "branchy_net.py").write_text(
        "import torch\n\n\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if x.size(0) > 4:\n"
        "            return x * 2\n"
        "        return x + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["check", "branchy_net:Net", "--shape", "2x3"]) == 0  # static: the branch is Python's
    capsys.readouterr()
    assert cli.main(["check", "branchy_net:Net", "--shape", "1-8x3"]) == 1
    out = capsys.readouterr().out
    assert "branchy_net.py:6" in out and "1 of them refuse a dynamic size" in out
    assert cli.main(["check", "branchy_net:Net", "--shape", "2x3", "--max-batch-size", "3"]) == 0  # [1, 3]: <= 4


def test_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torch2trt_lite", "--help"], capture_output=True, text=True, check=True
    )
    assert "convert" in out.stdout


@pytest.mark.parametrize("sample", ["custom_converter.py", "custom_plugin.py", "kv_cache_decode.py"])
def test_samples_run(sample: str) -> None:
    if sample == "kv_cache_decode.py":
        pytest.importorskip("transformers", reason="the KV-cache sample builds a transformers Llama")
    out = subprocess.run([sys.executable, str(ROOT / "samples" / sample)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_dtype_per_input_and_half_models(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "two_inputs.py").write_text(
        "import torch\n\n\n"
        "class Pick(torch.nn.Module):\n"
        "    def forward(self, x, i):\n"
        "        assert x.dtype == torch.float16 and i.dtype == torch.int64\n"
        "        return x[i] * 2\n\n\n"
        "def make():\n"
        "    return Pick()\n"
    )
    monkeypatch.chdir(tmp_path)  # a local module:factory imports without PYTHONPATH=.
    rc = cli.main(["convert", "two_inputs:make", "--shape", "4x3", "--shape", "2", "--dtype", "float16",
                   "--dtype", "int64", "--high", "4", "--backend", "sim", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["max_rel_err"] == 0.0
    # one --dtype per --shape, or one for all: anything else is refused instead of the last one winning
    assert cli.main(["convert", "two_inputs:make", "--shape", "4x3", "--shape", "2", "--shape", "1",
                     "--dtype", "float16", "--dtype", "int64", "--backend", "sim"]) == 2
    assert "--dtype was given 2 times for 3 --shape(s)" in capsys.readouterr().err
    # a float16 input casts the model too (was: 'expected scalar type Half but found Float' traceback)
    rc = cli.main(["convert", "torchvision:resnet18", "--shape", "1x3x32x32", "--dtype", "float16",
                   "--backend", "sim", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["max_rel_err"] < 1e-2


def test_model_specs(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("timm")
    pytest.importorskip("transformers")
    assert isinstance(cli.load_model("timm:resnet18"), torch.nn.Module)
    model = cli.load_model("hf:BertModel")
    assert type(model).__name__ == "BertModel" and not model.training
    (tmp_path / "net.py").write_text("import torch\n\n\ndef build():\n    return torch.nn.ReLU()\n")
    assert isinstance(cli.load_model(f"{tmp_path / 'net.py'}:build"), torch.nn.ReLU)
    for spec, words in (("timm:no_such_net", "timm has no model"), ("hf:NoSuchModel", "no model class"),
                        ("hf:BertModel=/nonexistent", "not a local folder"), ("resnet18", "expected one of")):
        with pytest.raises(cli.Torch2TRTError, match=words):
            cli.load_model(spec)


def test_eager_failure_is_a_clear_error(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["convert", "torchvision:resnet18", "--shape", "1x4x32x32", "--backend", "sim"]) == 2
    err = capsys.readouterr().err
    assert "fails in eager PyTorch" in err and "1x4x32x32" in err and "Traceback" not in err


def test_help_has_text_for_every_option() -> None:
    parser = cli.build_parser()
    assert "``" not in (parser.description or "")
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help text"


def test_convert_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["convert", "torchvision:squeezenet1_1", "--shape", "1x3x32x32", "--backend", "sim"]) == 0
    assert "converting torchvision:squeezenet1_1 on backend sim" in capsys.readouterr().err


def test_convert_with_a_shape_range_builds_a_dynamic_engine(tmp_path: pathlib.Path) -> None:
    """--shape 1-4x3x64x64: batch 1 to 4, traced at 4; the engine runs every batch in the range."""
    pytest.importorskip("torchvision")
    path = str(tmp_path / "r.engine")
    assert cli.main(["convert", "torchvision:resnet18", "--shape", "1-4x3x64x64", "--backend", "sim", "-o", path]) == 0
    trt = torch2trt_lite.load(path)
    spec = trt.metadata["inputs"][0]
    assert (spec["min"], spec["opt"], spec["max"]) == ([1, 3, 64, 64], [4, 3, 64, 64], [4, 3, 64, 64])
    x = torch.randn(3, 3, 64, 64)
    out = trt(x)  # (the values are the zoo's business: tests/trace/test_dynamic_inputs.py compares them with eager)
    assert out.shape == (3, 1000) and torch.isfinite(out).all()
    assert not torch.allclose(out[0], out[1])  # three different images, three different rows
    path2 = str(tmp_path / "b.engine")
    assert cli.main(["convert", "torchvision:resnet18", "--shape", "2x3x64x64", "--max-batch-size", "8", "--backend", "sim",
                 "-o", path2]) == 0
    spec = torch2trt_lite.load(path2).metadata["inputs"][0]
    assert (spec["min"][0], spec["opt"][0], spec["max"][0]) == (1, 2, 8)


@pytest.mark.parametrize("shape,message", [
    ("1-x3", "expected dimensions like"), ("4-2x3", "min <= opt <= max"), ("1-2-3-4x3", "MIN-OPT-MAX"),
    ("0-2x3", "positive integers"),
])
def test_bad_shape_ranges_are_refused(shape: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["convert", "torchvision:resnet18", "--shape", shape, "--backend", "sim"]) == 2
    assert message in capsys.readouterr().err


_NET = ("import torch\n\n\ndef build():\n    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), "
        "torch.nn.Conv2d(8, 4, 3))\n")


def test_random_weights_are_seeded_so_the_cache_hits(tmp_path: pathlib.Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "net.py").write_text(_NET)
    spec = f"{tmp_path / 'net.py'}:build"
    a, b = cli.load_model(spec).state_dict(), cli.load_model(spec).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a), "one spec, one model"
    assert not torch.equal(cli.load_model(spec, seed=1).state_dict()["0.weight"], a["0.weight"])
    cache = tmp_path / "cache"
    for _ in range(2):
        assert cli.main(["convert", spec, "--shape", "1x3x16x16", "--backend", "sim", "--cache-dir", str(cache),
                         "--json"]) == 0
    capsys.readouterr()
    assert len([p for p in cache.rglob("*") if p.is_file() and p.suffix == ".engine"]) == 1, sorted(cache.rglob("*"))


def test_compare_tolerance_follows_the_precision(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``compare MODEL --shape ... --precision fp16`` passes with fp16's default tolerance
    (measured on resnet18 at 64x64: max rel 1.1e-3 in fp16, past fp32's 1e-3; 7.4e-3 in bf16)."""
    from torch2trt_lite.tools.compare import default_tolerance

    assert default_tolerance("fp32") == 1e-3 and default_tolerance("fp16") == 1e-2
    assert default_tolerance("bf16") == 5e-2 and default_tolerance("fp32", inputs=[torch.zeros(1).half()]) == 1e-2
    (tmp_path / "net.py").write_text(_NET)
    spec = f"{tmp_path / 'net.py'}:build"
    for precision, tol in (("fp16", 1e-2), ("bf16", 5e-2)):
        assert cli.main(["compare", spec, "--shape", "1x3x16x16", "--precision", precision, "--backend", "sim",
                         "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["tolerance"] == tol and report["entries"]


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: pathlib.Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``torch2trt-lite info model.engine | head``: no BrokenPipeError traceback, for every subcommand
    (the handling is in ``cli.main``)."""
    engine = tmp_path / "net.engine"
    (tmp_path / "net.py").write_text(_NET)
    assert cli.main(["convert", f"{tmp_path / 'net.py'}:build", "--shape", "1x3x16x16", "--backend", "sim",
                     "-o", str(engine)]) == 0
    capsys.readouterr()
    for argv in (["info", str(engine)],):
        p = subprocess.Popen([sys.executable, "-m", "torch2trt_lite.cli", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ROOT)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()  # the reader is gone before the command writes
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
