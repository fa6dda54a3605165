"""The command line and the samples run end to end."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from torch2trt_lite import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torch2trt_lite", "--help"], capture_output=True, text=True, check=True
    )
    assert "convert" in out.stdout


@pytest.mark.parametrize("sample", ["custom_converter.py", "custom_plugin.py"])
def test_samples_run(sample: str) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "samples" / sample)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
