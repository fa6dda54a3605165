"""Detection post-processing end to end in one engine (issue 15): torchvision nms / batched_nms through
TensorRT's INMSLayer, gathers by their data-dependent result, top-k beyond TensorRT's k limit of 3840,
sort along a dynamic dim and torch.unique; every result compared with eager PyTorch / torchvision on
the sim, and what TensorRT-RTX 1.7's CPU-only builder accepts or refuses, per layer.

Ties: where eager's order is unspecified (equal scores in NMS, equal values in top-k / sort) the tests
check what TensorRT promises (same values, a valid selection) and not the order; everywhere else the
indices must equal eager's exactly.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
import torchvision

import torch2trt_lite
from tests.converters.cases_detection import boxes_scores, distinct, with_classes
from torch2trt_lite import Input
from torch2trt_lite.errors import (
    BackendUnavailableError,
    RuntimeExecutionError,
    Torch2TRTError,
    UnsupportedOperatorError,
)

NO_RUNNER = "has no runners that implement it"


class Fn(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


def convert(fn: Any, xs: list[Any], **kw: Any) -> Any:
    kw.setdefault("backend", "sim")
    return torch2trt_lite.convert(Fn(fn).eval(), xs, progress=False, **kw)


def same(got: Any, want: Any) -> None:
    torch.testing.assert_close(got, want, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------ NMS
@pytest.mark.parametrize("iou", [0.0, 0.2, 0.45, 0.7, 1.0, 1.5])
def test_nms_matches_torchvision_at_several_thresholds(iou: float) -> None:
    boxes, scores = boxes_scores(300, seed=3)

    def fn(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return torchvision.ops.nms(b, s, iou)

    trt = convert(fn, [boxes, scores])
    for seed in (3, 4, 5):  # other boxes and scores of the same count: other kept lengths
        b, s = boxes_scores(300, seed=seed)
        want = torchvision.ops.nms(b, s, iou)
        if iou < 1.0:
            assert 0 < want.numel() < 300, "the data must keep some boxes and suppress others"
        got = trt(b, s)
        assert got.dtype == torch.int64
        same(got, want)


def test_nms_output_dim_is_data_dependent() -> None:
    d = torch2trt_lite.define_network(Fn(lambda b, s: torchvision.ops.nms(b, s, 0.5)).eval(), boxes_scores(40),
                                      backend="sim")
    nms_layers = [(name, outs) for name, t, outs in d.layers() if t == "NMS"]
    assert len(nms_layers) == 1
    assert nms_layers[0][1][0][0][0] == -1  # SelectedIndices [-1, 3]
    assert d.layers()[-1][2][0] == ((-1,), "INT64")


def test_nms_then_gather_boxes_and_scores() -> None:
    def fn(b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = torchvision.ops.nms(b, s, 0.5)
        return b[keep], s[keep]

    trt = convert(fn, boxes_scores(200))
    for seed in (1, 2):
        xs = boxes_scores(200, seed=seed)
        same(trt(*xs), fn(*xs))


def test_nms_with_a_dynamic_box_count() -> None:
    boxes, scores = boxes_scores(100)
    specs = [Input((1, 4), (100, 4), (300, 4), example=boxes), Input((1,), (100,), (300,), example=scores)]

    def fn(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return b[torchvision.ops.nms(b, s, 0.5)]

    trt = convert(fn, specs)
    for n in (1, 37, 100, 300):
        xs = boxes_scores(n, seed=n)
        same(trt(*xs), fn(*xs))


def test_nms_after_a_score_filter_can_keep_nothing() -> None:
    """boxes[scores > t] then NMS: when no score passes, the engine returns an empty result, as torch."""
    def fn(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        m = s > 0.6
        b, s = b[m], s[m]
        return b[torchvision.ops.nms(b, s, 0.5)]

    boxes, scores = boxes_scores(120)
    trt = convert(fn, [boxes, scores])
    same(trt(boxes, scores), fn(boxes, scores))
    low = scores * 0.5  # every score <= 0.475: nothing passes
    want = fn(boxes, low)
    assert want.shape == (0, 4)
    same(trt(boxes, low), want)


def test_nms_ties_give_a_valid_selection() -> None:
    """Equal scores: TensorRT leaves their order unspecified. Disjoint boxes are all kept (any order among
    the tied); overlapping tied boxes keep exactly one of each overlapping pair."""
    grid = torch.arange(6.0) * 50
    xy = torch.stack(torch.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2)
    boxes = torch.cat([xy, xy + 20], 1)  # 36 disjoint boxes
    scores = torch.tensor([0.5, 0.7, 0.9]).repeat(12)
    trt = convert(lambda b, s: torchvision.ops.nms(b, s, 0.5), [boxes, scores])
    got, want = trt(boxes, scores), torchvision.ops.nms(boxes, scores, 0.5)
    same(torch.sort(got).values, torch.sort(want).values)
    assert bool((scores[got][1:] <= scores[got][:-1]).all()), "kept boxes must come by decreasing score"
    twins = torch.cat([boxes, boxes + 1])  # each box and its shifted twin (IoU ~0.8), same score
    tied = torch.cat([scores, scores])
    got = convert(lambda b, s: torchvision.ops.nms(b, s, 0.5), [twins, tied])(twins, tied)
    assert got.numel() == 36 and bool(((got % 36).sort().values == torch.arange(36)).all())


def test_batched_nms_matches_torchvision() -> None:
    for iou in (0.3, 0.6):
        def fn(b: torch.Tensor, s: torch.Tensor, c: torch.Tensor, iou: float = iou) -> torch.Tensor:
            return torchvision.ops.batched_nms(b, s, c, iou)

        trt = convert(fn, with_classes(400))
        xs = with_classes(400)
        want = fn(*xs)
        assert 0 < want.numel() < 400
        same(trt(*xs), want)
        rolled = [xs[0], torch.roll(xs[1], 7), xs[2]]
        same(trt(*rolled), fn(*rolled))


def _classed(n: int, classes: int, seed: int) -> list[torch.Tensor]:
    b, s = boxes_scores(n, seed=seed, spread=300.0)
    return [b, s, torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))]


def test_batched_nms_beyond_5000_boxes_groups_the_classes() -> None:
    """6000 boxes of 60 classes (INMSLayer's limit: 5000 candidates per batch item): one batch item per
    class group, the kept boxes ordered by score over all groups, equal to torchvision's."""
    def fn(b: torch.Tensor, s: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torchvision.ops.batched_nms(b, s, c, 0.5)

    trt = convert(fn, _classed(6000, 60, 0))
    for seed in (0, 1):
        xs = _classed(6000, 60, seed)
        want = fn(*xs)
        assert 5000 < want.numel() < 6000, "more kept boxes than one NMS could consider"
        same(trt(*xs), want)


def test_batched_nms_of_a_dynamic_count_beyond_5000_and_its_run_time_check() -> None:
    ex = _classed(100, 60, 0)
    specs = [Input((1, 4), (100, 4), (8000, 4), example=ex[0]), Input((1,), (100,), (8000,), example=ex[1]),
             Input((1,), (100,), (8000,), example=ex[2], dtype=torch.int64)]

    def fn(b: torch.Tensor, s: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torchvision.ops.batched_nms(b, s, c, 0.5)

    trt = convert(fn, specs)
    for n in (1, 5500):
        xs = _classed(n, 60, n)
        same(trt(*xs), fn(*xs))
    one_class = _classed(7000, 60, 3)
    one_class[2] = torch.zeros_like(one_class[2])  # 7000 candidates of one class: past what TensorRT's NMS takes
    with pytest.raises(Torch2TRTError, match=r"more than 5000 candidate boxes fell into one of the engine's 8 class"):
        trt(*one_class)


def test_nms_traced_with_no_box_then_run_with_some() -> None:
    """The count at trace time does not decide the engine: a filter that keeps no box while tracing."""
    def fn(b: torch.Tensor, s: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = s > 0.6
        b, s, c = b[m], s[m], c[m]
        return b[torchvision.ops.batched_nms(b, s, c, 0.5)], b[torchvision.ops.nms(b, s, 0.5)]

    b, s, c = with_classes(300)
    trt = convert(fn, [b, s * 0.5, c])
    for xs in ([b, s, c], [b, s * 0.5, c]):
        got, want = trt(*xs), fn(*xs)
        same(got, want)
    assert want[0].shape == (0, 4) and got[0].shape == (0, 4)


def test_topk_of_a_count_that_may_be_zero() -> None:
    """``scores[scores > t].topk(min(n, 40))`` (torchvision's per-class candidates): a class no score
    reaches gives k = 0, which ITopKLayer does not take; the engine returns the empty result as torch."""
    from torchvision.models.detection import _utils as det_utils

    def fn(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = s[s > 0.5]
        return s.topk(det_utils._topk_min(s, 40, 0))

    x = distinct(200)[0] + 0.5  # values in [0, 1), no ties
    trt = convert(fn, [x])
    for y in (x, x.roll(3), x * 0.2 + 0.45, x * 0.0):  # 100, 100, some and no scores above 0.5
        same(trt(y), fn(y))
    assert fn(x * 0.0)[0].numel() == 0


def test_efficientdet_style_postprocess_in_one_engine() -> None:
    """Class scores of 2000 anchors x 4 classes: top-5000 of the flattened scores (past TensorRT's k limit),
    anchor and class from the flat index, a score threshold (a data-dependent count), per-class NMS, then
    the kept boxes, scores and classes."""
    anchors, classes = 2000, 4

    def fn(boxes: torch.Tensor, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scores, flat = logits.sigmoid().reshape(-1).topk(5000)
        anchor, cls = flat // classes, flat % classes
        m = scores > 0.9
        b, scores, cls = boxes[anchor[m]], scores[m], cls[m]
        keep = torchvision.ops.batched_nms(b, scores, cls, 0.5)
        return b[keep], scores[keep], cls[keep]

    g = torch.Generator().manual_seed(0)
    boxes = boxes_scores(anchors, seed=1, spread=400.0)[0]
    logits = distinct(anchors, classes, seed=2)[0] * 8
    trt = convert(fn, [boxes, logits])
    want = fn(boxes, logits)
    assert 0 < want[0].shape[0] < 5000
    same(trt(boxes, logits), want)
    logits2 = logits[torch.randperm(anchors, generator=g)]
    same(trt(boxes, logits2), fn(boxes, logits2))


def test_nms_refusals_are_clear() -> None:
    xs = boxes_scores(30)
    with pytest.raises(UnsupportedOperatorError, match=r"iou_threshold must be >= 0"):
        convert(lambda b, s: torchvision.ops.nms(b, s, -0.1), xs)
    big = boxes_scores(5001)
    with pytest.raises(UnsupportedOperatorError, match=r"5001 boxes exceeds TensorRT's NMS limit of 5000"):
        convert(lambda b, s: torchvision.ops.nms(b, s, 0.5), big)
    specs = [Input((1, 4), (30, 4), (6000, 4), example=xs[0]), Input((1,), (30,), (6000,), example=xs[1])]
    with pytest.raises(UnsupportedOperatorError, match=r"up to 6000 boxes exceeds TensorRT's NMS limit"):
        convert(lambda b, s: torchvision.ops.nms(b, s, 0.5), specs)


# ---------------------------------------------------------------------------------------- top-k
def test_topk_5000_matches_torch_exactly() -> None:
    (x,) = distinct(4, 20000, seed=5)
    trt = convert(lambda t: t.topk(5000, dim=1), [x])
    for other in (x, distinct(4, 20000, seed=6)[0]):
        same(trt(other), torch.topk(other, 5000, dim=1))


def test_topk_5000_with_ties_gives_torch_values_and_a_valid_index_set() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50, (2, 12000), generator=g).float()  # many ties
    v, i = convert(lambda t: t.topk(5000), [x])(x)
    ev, _ = x.topk(5000)
    same(v, ev)
    same(torch.gather(x, 1, i), v)  # the indices point at the returned values
    assert all(int(row.unique().numel()) == 5000 for row in i), "no index may be returned twice"


def test_sort_of_more_than_3840_and_the_round_limit() -> None:
    (x,) = distinct(10000, seed=1)
    same(convert(lambda t: torch.sort(t, descending=True), [x])(x), torch.sort(x, descending=True))
    (big,) = distinct(70000, seed=1)
    with pytest.raises(UnsupportedOperatorError, match=r"more than 61440 would need over 16 rounds"):
        convert(lambda t: t.sort(), [big])
    with pytest.raises(UnsupportedOperatorError, match=r"TensorRT's top-k takes k <= 3840"):
        convert(lambda t: t.topk(62000), [big])


def test_sort_argsort_topk_along_a_dynamic_dim() -> None:
    (x,) = distinct(6, 5, seed=2)
    spec = [Input((1, 5), (6, 5), (12, 5), example=x)]
    trt = convert(lambda t: (t.sort(0, descending=True), t.argsort(dim=0), t.topk(1, 0)), spec)
    for n in (1, 6, 12):
        (y,) = distinct(n, 5, seed=n)
        same(trt(y), (y.sort(0, descending=True), y.argsort(dim=0), y.topk(1, 0)))
    d = torch2trt_lite.define_network(Fn(lambda t: t.sort(0)).eval(), spec, backend="sim")
    assert [outs for _, t, outs in d.layers() if t == "TOPK"] == [[((-1, 5), "FLOAT"), ((-1, 5), "INT32")]]
    too_long = [Input((1,), (10,), (5000,), example=torch.randn(10))]
    with pytest.raises(Torch2TRTError, match=r"may exceed TensorRT's top-k limit of 3840"):
        convert(lambda t: t.sort(), too_long)


# --------------------------------------------------------------------------------------- unique
@pytest.mark.parametrize("kw", [{}, {"return_inverse": True}, {"return_counts": True},
                                {"return_inverse": True, "return_counts": True}])
def test_unique_matches_torch(kw: dict[str, bool]) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-20, 20, (6, 7), generator=g)
    trt = convert(lambda t: torch.unique(t, **kw), [x])
    for other in (x, torch.randint(0, 5, (6, 7), generator=g), torch.arange(42).reshape(6, 7)):
        same(trt(other), torch.unique(other, **kw))


def test_unique_floats_and_a_dynamic_input() -> None:
    x = (torch.randn(40) * 3).round()
    spec = [Input((1,), (40,), (80,), example=x)]
    trt = convert(lambda t: t.unique(return_inverse=True, return_counts=True), spec)
    for n in (1, 40, 80):
        y = (torch.randn(n) * 3).round()
        same(trt(y), y.unique(return_inverse=True, return_counts=True))
    with pytest.raises(UnsupportedOperatorError, match=r"dim=None"):
        convert(lambda t: torch.unique(t, dim=0), [x])


# ------------------------------------------------------------- non-finite scores (README: data-dependent shapes)
def test_nms_never_keeps_minus_inf_nan_or_lowest_scores() -> None:
    """INMSLayer keeps scores above its score threshold, the lowest float32: a score of -inf, NaN or
    exactly -3.4028e38 is never kept. torchvision keeps -inf boxes last (the engine's result is its
    result without them) and visits NaN first (NaN sorts above every number, and may suppress other
    boxes): the engine's result is then torchvision's NMS of the other boxes."""
    b, s = boxes_scores(300, seed=3)
    trt = convert(lambda b, s: torchvision.ops.nms(b, s, 0.5), [b, s])
    lowest = torch.finfo(torch.float32).min

    s_inf = s.clone()
    s_inf[::7] = float("-inf")
    s_inf[1] = lowest
    eager = torchvision.ops.nms(b, s_inf, 0.5)
    dropped = torch.isinf(s_inf[eager]) | (s_inf[eager] == lowest)
    assert bool(dropped.any()), "torchvision keeps some of these boxes"
    same(trt(b, s_inf), eager[~dropped])

    s_nan = s.clone()
    s_nan[5::13] = float("nan")
    others = torch.nonzero(~torch.isnan(s_nan)).flatten()
    same(trt(b, s_nan), others[torchvision.ops.nms(b[others], s_nan[others], 0.5)])
    assert bool(torch.isnan(s_nan[torchvision.ops.nms(b, s_nan, 0.5)[0]])), "torchvision visits NaN first"

    s_pinf = s.clone()
    s_pinf[::9] = float("inf")  # +inf is a score like any other (ties among them: any order, as TensorRT's)
    got, eager = trt(b, s_pinf), torchvision.ops.nms(b, s_pinf, 0.5)
    same(got.sort().values, eager.sort().values)


def _points_at_its_value_or_repeats(x: torch.Tensor, v: torch.Tensor, i: torch.Tensor) -> int:
    """Each index points at an element of its value, or repeats an index returned before in its row;
    returns how many repeat."""
    repeats = 0
    for row, vals, idxs in zip(x.tolist(), v.tolist(), i.tolist(), strict=True):
        taken: set[int] = set()
        for val, idx in zip(vals, idxs, strict=True):
            assert row[idx] == val or idx in taken, (idx, val, row[idx])
            repeats += row[idx] != val
            taken.add(idx)
    return repeats


def test_topk_beyond_3840_reaching_minus_inf_keeps_values_and_may_repeat_an_index() -> None:
    """top-k in rounds of 3840 masks taken elements with -inf (+inf for smallest): a later round that
    reaches the input's own -inf may return an index taken before. Values equal torch's, indices equal
    torch's wherever the value is finite, and every other index points at an element of its value or
    repeats one returned before."""
    x = distinct(2, 9000)[0]
    x[:, 3000:] = float("-inf")
    trt = convert(lambda t: t.topk(5000, dim=1), [x])
    smallest = convert(lambda t: t.topk(5000, dim=1, largest=False), [-x])
    repeats = 0
    for other in (x, torch.flip(x, [1])):
        for engine, y, largest in ((trt, other, True), (smallest, -other, False)):
            v, i = engine(y)
            ev, ei = y.topk(5000, dim=1, largest=largest)
            same(v, ev)
            same(i[:, :3000], ei[:, :3000])
            repeats += _points_at_its_value_or_repeats(y, v, i)
    assert repeats > 0, "the case the README documents: a repeated index where a round reaches -inf"


# ------------------------------------------------------------------- torchvision BoxCoder.decode
def test_box_coder_decode_with_zero_proposals_fails_the_run() -> None:
    """``BoxCoder.decode``'s ``if box_sum > 0`` on a data-dependent proposal count is answered True
    (converters/zoo_torchvision.py): every count >= 1 matches eager; with no proposal eager returns
    its boxes with another rank ([0, 4C], not [0, C, 4]), which one engine cannot, and the run fails
    (TensorRT cannot infer the reshape's -1 of zero rows) instead of returning a result."""
    from torchvision.models.detection._utils import BoxCoder

    coder = BoxCoder((10.0, 10.0, 5.0, 5.0))

    def fn(codes: torch.Tensor, boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        keep = scores > 0.5
        return coder.decode(codes[keep], [boxes[keep]])

    boxes, scores = boxes_scores(20, seed=0)
    codes = torch.randn(20, 12, generator=torch.Generator().manual_seed(0)) * 0.3
    trt = convert(fn, [codes, boxes, scores])
    for s in (scores, torch.roll(scores, 3), torch.where(torch.arange(20) == 4, 0.9, 0.1)):  # 1 proposal last
        want = fn(codes, boxes, s)
        assert want.shape[0] >= 1
        torch.testing.assert_close(trt(codes, boxes, s), want, rtol=1e-5, atol=1e-4)
    none = torch.zeros(20)
    assert fn(codes, boxes, none).shape == (0, 12)
    with pytest.raises(RuntimeExecutionError, match="reshape"):
        trt(codes, boxes, none)


# ------------------------------------------------------------------------------ TensorRT-RTX
def _rtx_verdict(fn: Any, xs: list[Any]) -> tuple[list[Any], list[Any], bool, str]:
    sim = torch2trt_lite.define_network(Fn(fn).eval(), xs, backend="sim")
    real = torch2trt_lite.define_network(Fn(fn).eval(), xs, backend="tensorrt-rtx")
    plan = real.builder.build_serialized_network(real.network, real.builder.create_builder_config())
    return sim.layers(), real.layers(), plan is not None, "; ".join(real.logger.errors)


@pytest.mark.rtx
@pytest.mark.parametrize("what, fn, xs, layer, builds", [
    ("nms", lambda b, s: torchvision.ops.nms(b, s, 0.5), boxes_scores(50), "NMS", False),
    ("batched_nms", lambda b, s, c: torchvision.ops.batched_nms(b, s, c, 0.5), with_classes(50), "NMS", False),
    ("unique", lambda t: torch.unique(t, return_counts=True), [torch.randint(0, 9, (40,))], "NON_ZERO", False),
    ("topk_5000", lambda t: t.topk(5000), distinct(2, 9000), "SCATTER", True),
], ids=lambda v: v if isinstance(v, str) else "")
def test_tensorrt_rtx_per_layer(what: str, fn: Any, xs: list[Any], layer: str, builds: bool) -> None:
    """Measured with TensorRT-RTX 1.7's CPU-only builder: every network defines with the sim's layer
    types, shapes and dtypes; NMS and NonZero then have no CPU-build implementation ("has no runners"),
    a refusal of that builder (TensorRT documents both layers); top-k rounds (TopK + Scatter) build."""
    sim, real, built, errors = _rtx_verdict(fn, xs)
    assert [(t, o) for _, t, o in sim] == [(t, o) for _, t, o in real]
    assert layer in {t for _, t, _ in real}
    assert built == builds, errors
    if not builds:
        assert NO_RUNNER in errors, errors


@pytest.mark.rtx
def test_tensorrt_rtx_builds_topk_with_a_shape_tensor_k() -> None:
    """sort along a dynamic dim: ITopKLayer's k from set_input(1, shape tensor); TensorRT-RTX builds it."""
    spec = [Input((1, 5), (6, 5), (12, 5), example=torch.randn(6, 5))]
    trt = torch2trt_lite.convert(Fn(lambda t: t.sort(0)).eval(), spec, backend="tensorrt-rtx", verify=False,
                                 progress=False)
    assert trt.metadata["backend"] == "tensorrt-rtx"
    for n in (1, 6, 12):  # the engine's results on a GPU; without one, running it is refused
        y = torch.randn(n, 5, generator=torch.Generator().manual_seed(n))
        if trt.runnable:
            same(trt(y.cuda()), tuple(t.cuda() for t in y.cuda().sort(0)))
        else:
            with pytest.raises(BackendUnavailableError):
                trt(y)
    real = torch2trt_lite.define_network(Fn(lambda t: t.sort(0)).eval(), spec, backend="tensorrt-rtx")
    topk = [lay for lay in (real.network.get_layer(i) for i in range(real.network.num_layers))
            if lay.type == importlib.import_module("tensorrt_rtx").LayerType.TOPK]
    assert len(topk) == 1 and topk[0].num_inputs == 2  # k is the layer's input 1
