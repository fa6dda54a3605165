"""Issue 27: an expand()-ed example input of 4.8 GB is never materialized by convert: a static
conversion traces it as it is, a dynamic one refuses its verify run before allocating its inputs
(saying how much memory it would take and how to skip it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import torch
    import torch2trt_lite
    from torch2trt_lite.errors import ConversionError

    class Pool(torch.nn.Module):
        def forward(self, x):
            return x.mean((2, 3)) + 1

    x = torch.zeros(1, 1, 1, 1).expand(1, 3, 20000, 20000)  # 4.8 GB once materialized
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 30), vm + (2 << 30)))  # 2 GiB more than after imports
    trt = torch2trt_lite.convert(Pool().eval(), [x], backend="sim")
    assert trt.metadata["inputs"][0]["shape"] == [1, 3, 20000, 20000]
    try:
        torch2trt_lite.convert(Pool().eval(), [x], backend="sim", max_batch_size=2)
    except ConversionError as e:
        assert "verify=False" in str(e) and "GiB" in str(e), str(e)
        print("REFUSED", e)
    else:
        sys.exit("the dynamic conversion was not refused")
    """
)


def test_expanded_example_converts_or_is_refused_without_materializing() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "REFUSED the dynamic verify run would allocate" in proc.stdout, proc.stdout
