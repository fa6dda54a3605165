"""Libraries' value checks and value branches (issue 23): each rule on the library's own function where
the library is installed (transformers), else on a faithful copy of it (ultralytics is not a test
dependency: :func:`non_max_suppression` below is ultralytics 8.3's ``utils/nms.py`` loop, with the
rotated-box and label branches left out), compared with eager PyTorch."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite.converters import zoo_ultralytics
from torch2trt_lite.converters.impl import sizes as Y

torchvision = pytest.importorskip("torchvision")
transformers = pytest.importorskip("transformers")


# ------------------------------------------------------------------------------------ ultralytics
def xywh2xyxy(x: torch.Tensor) -> torch.Tensor:
    """ultralytics.utils.ops.xywh2xyxy."""
    assert x.shape[-1] == 4, f"input shape last dimension expected 4 but input shape is {x.shape}"
    y = torch.empty_like(x, dtype=torch.float32)
    xy = x[..., :2]
    wh = x[..., 2:] / 2
    y[..., :2] = xy - wh
    y[..., 2:] = xy + wh
    return y


def non_max_suppression(prediction, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic=False,  # type: ignore[no-untyped-def]
                        multi_label=False, labels=(), max_det=300, nc=0, max_time_img=0.05, max_nms=30000,
                        max_wh=7680, in_place=True, rotated=False, end2end=False, return_idxs=False):
    """ultralytics.utils.nms.non_max_suppression (8.3), as it is, less the rotated and labels branches."""
    if isinstance(prediction, (list, tuple)):
        prediction = prediction[0]
    if classes is not None:
        classes = torch.tensor(classes, device=prediction.device)
    bs = prediction.shape[0]
    nc = nc or (prediction.shape[1] - 4)
    extra = prediction.shape[1] - nc - 4
    mi = 4 + nc
    xc = prediction[:, 4:mi].amax(1) > conf_thres
    xinds = torch.arange(prediction.shape[-1], device=prediction.device).expand(bs, -1)[..., None]
    time_limit = 2.0 + max_time_img * bs
    multi_label &= nc > 1
    prediction = prediction.transpose(-1, -2)
    if in_place:
        prediction[..., :4] = xywh2xyxy(prediction[..., :4])
    else:
        prediction = torch.cat((xywh2xyxy(prediction[..., :4]), prediction[..., 4:]), dim=-1)
    t = time.time()
    output = [torch.zeros((0, 6 + extra), device=prediction.device)] * bs
    keepi = [torch.zeros((0, 1), device=prediction.device)] * bs
    for xi, (x, xk) in enumerate(zip(prediction, xinds)):  # noqa: B905 (as ultralytics writes it)
        filt = xc[xi]
        x, xk = x[filt], xk[filt]
        if not x.shape[0]:
            continue
        box, cls, mask = x.split((4, nc, extra), 1)
        if multi_label:
            i, j = torch.where(cls > conf_thres)
            x = torch.cat((box[i], x[i, 4 + j, None], j[:, None].float(), mask[i]), 1)
            xk = xk[i]
        else:
            conf, j = cls.max(1, keepdim=True)
            filt = conf.view(-1) > conf_thres
            x = torch.cat((box, conf, j.float(), mask), 1)[filt]
            xk = xk[filt]
        if classes is not None:
            filt = (x[:, 5:6] == classes).any(1)
            x, xk = x[filt], xk[filt]
        n = x.shape[0]
        if not n:
            continue
        if n > max_nms:
            filt = x[:, 4].argsort(descending=True)[:max_nms]
            x, xk = x[filt], xk[filt]
        c = x[:, 5:6] * (0 if agnostic else max_wh)
        scores = x[:, 4]
        boxes = x[:, :4] + c
        i = torchvision.ops.nms(boxes, scores, iou_thres)
        i = i[:max_det]
        output[xi], keepi[xi] = x[i], xk[i].reshape(-1)
        if (time.time() - t) > time_limit:
            break
    return (output, keepi) if return_idxs else output


Y.specialize_guard(non_max_suppression.__code__, zoo_ultralytics.nms_guard)  # as _register does for ultralytics'


class YoloPost(nn.Module):
    """A YOLOv8 head's output (boxes, sigmoid class scores over 3 classes) and its NMS."""

    def __init__(self, max_nms: int = 30000, return_idxs: bool = False) -> None:
        super().__init__()
        self.max_nms, self.return_idxs = max_nms, return_idxs

    def forward(self, raw: torch.Tensor) -> torch.Tensor:
        pred = torch.cat((raw[:, :4], raw[:, 4:].sigmoid()), 1)
        out = non_max_suppression(pred, conf_thres=0.25, max_nms=self.max_nms, return_idxs=self.return_idxs)
        return out[0][0] if self.return_idxs else out[0]  # type: ignore[no-any-return]


def _raw(passing: int, anchors: int = 40, seed: int = 0) -> torch.Tensor:
    """A head output where ``passing`` anchors score over the threshold (the rest far under it)."""
    g = torch.Generator().manual_seed(seed)
    raw = torch.rand(1, 7, anchors, generator=g)
    raw[:, :2] *= 200
    raw[:, 2:4] = raw[:, 2:4] * 30 + 2
    raw[:, 4:] = -6 + torch.rand(1, 3, anchors, generator=g)  # sigmoid < 0.01
    raw[:, 4:, :passing] = torch.randn(1, 3, passing, generator=g) + 3  # sigmoid > 0.5 mostly
    return raw


@pytest.mark.parametrize("traced", [12, 0], ids=["traced_12", "traced_empty"])
def test_ultralytics_nms_loop_on_every_count(traced: int) -> None:
    """The count branches (``if not n``, ``if n > max_nms``) answered by the rule hold on every count:
    none, fewer than ``max_nms`` and more (truncated), whatever the traced count."""
    m = YoloPost(max_nms=8).eval()
    trt = torch2trt_lite.convert(m, [_raw(traced)], backend="sim")
    for passing in (0, 3, 8, 20):
        x = _raw(passing, seed=passing + 1)
        ref = m(x.clone())
        assert ref.shape[0] == min(passing, 8)  # the branches taken: empty, under max_nms, truncated
        torch.testing.assert_close(trt(x.clone()), ref, rtol=1e-5, atol=1e-4)
    assert torch2trt_lite.check(m, [_raw(traced)]).ok


def test_ultralytics_nms_with_kept_indices_is_refused() -> None:
    """With ``return_idxs=True`` the empty branch returns float32 [0, 1] indices where the general one
    gives int64 [0]: not the same result, so the branch is refused, naming the line."""
    with pytest.raises(torch2trt_lite.ConversionError, match=r"`.*!= 0` .*not for every size"):
        torch2trt_lite.convert(YoloPost(return_idxs=True).eval(), [_raw(12)], backend="sim")


# ----------------------------------------------------------------------------------- transformers
class ImageTokens(nn.Module):
    """Qwen3-VL's ``get_placeholder_mask`` check: as many image tokens as image features, through
    transformers' own ``torch_compilable_check`` (``torch._check_tensor_all_with``, a value read)."""

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        from transformers.utils.import_utils import torch_compilable_check

        mask = input_ids == 7
        n_image_tokens = mask.sum()
        torch_compilable_check(
            n_image_tokens * features.shape[-1] == features.numel(),
            f"Image features and image tokens do not match, tokens: {n_image_tokens}, features: {features.shape[0]}",
        )
        return features.sum(-1) * mask.sum(-1)


def test_transformers_tensor_check_runs_in_the_engine() -> None:
    m = ImageTokens().eval()
    ids, feats = torch.tensor([[7, 1, 7, 2]]), torch.randn(2, 5)
    assert torch2trt_lite.check(m, [ids, feats]).ok
    trt = torch2trt_lite.convert(m, [ids, feats], backend="sim")
    other = torch.tensor([[3, 7, 7, 7]])[:, :4]
    other[0, 1] = 0  # two image tokens again, elsewhere
    torch.testing.assert_close(trt(other, feats), m(other, feats))
    with pytest.raises(torch2trt_lite.RuntimeExecutionError, match="ValueError: Image features and image tokens"):
        trt(torch.tensor([[7, 7, 7, 1]]), feats)  # three tokens, two features: eager raises ValueError too
    with pytest.raises(ValueError, match="do not match"):
        m(torch.tensor([[7, 7, 7, 1]]), feats)


def _config(cls: Any, **kw: Any) -> Any:
    torch.manual_seed(0)
    return cls(**kw)


class _Hidden(nn.Module):
    """``model(input_ids=..., attention_mask=...).last_hidden_state``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        kw: dict[str, Any] = {} if mask is None else {"attention_mask": mask}
        return self.model(input_ids=ids, use_cache=False, **kw).last_hidden_state  # type: ignore[no-any-return]


def _ids(seed: int, n: int = 8) -> torch.Tensor:
    return torch.randint(0, 100, (1, n), generator=torch.Generator().manual_seed(seed))


TOL = {"rtol": 1e-4, "atol": 1e-4}  # fp32 engines of small random models: measured <= 2e-6 (2026-12-06)


def _mamba2() -> nn.Module:
    return transformers.Mamba2Model(transformers.Mamba2Config(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, state_size=8, expand=2, head_dim=8, n_groups=1,
        num_heads=8, chunk_size=4, conv_kernel=4))


def _jamba() -> nn.Module:
    """A hybrid: a Mamba layer, then attention with a mixture-of-experts MLP."""
    return transformers.JambaModel(transformers.JambaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
        attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2))


@pytest.mark.parametrize("build", [_mamba2, _jamba], ids=["mamba2", "jamba_hybrid"])
def test_state_space_models_with_attention_mask(build: Any) -> None:
    """State-space language models (transformers' Mamba2; Jamba, Mamba layers with attention and experts):
    ``create_recurrent_attention_mask`` skips an all-ones mask ``if not is_tracing(attention_mask) and
    torch.all(attention_mask == 1)``; answered as under torch.fx (the tracer's is_tracing), the engine
    applies any mask it is given, traced with none padded."""
    torch.manual_seed(0)
    model = _Hidden(build()).eval()
    ones = torch.ones(1, 8, dtype=torch.int64)
    assert torch2trt_lite.check(model, [_ids(0), ones]).ok
    trt = torch2trt_lite.convert(model, [_ids(0), ones], backend="sim")
    left_padded = ones.clone()
    left_padded[:, :3] = 0
    for ids, mask in ((_ids(1), ones), (_ids(2), left_padded)):
        torch.testing.assert_close(trt(ids, mask), model(ids, mask), **TOL)


# ------------------------------------------------------------------------------ mixture of experts
def _mixtral(implementation: str) -> nn.Module:
    cfg = transformers.MixtralConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2)
    cfg._experts_implementation = implementation
    torch.manual_seed(0)
    return _Hidden(transformers.MixtralModel(cfg)).eval()


def test_transformers_eager_experts_loop_converts() -> None:
    """transformers' eager experts forward iterates ``nonzero()`` of the experts hit (a data-dependent
    count); converted as its own ``batched_mm`` implementation (converters/zoo_transformers.py)."""
    model = _mixtral("eager")
    trt = torch2trt_lite.convert(model, [_ids(0, 6)], backend="sim")
    for seed in (1, 2, 3):
        torch.testing.assert_close(trt(_ids(seed, 6)), model(_ids(seed, 6)), **TOL)


class Expert(nn.Module):
    def __init__(self, h: int, i: int) -> None:
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(h, i, bias=False), nn.Linear(i, h, bias=False), nn.Linear(h, i, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))  # type: ignore[no-any-return]


class SparseMoe(nn.Module):
    """transformers 4.45's ``MixtralSparseMoeBlock.forward`` loop over every expert, with the skip of an
    expert no token chose written as the model's code may (``skip``): none, a size test, ``.any()``."""

    def __init__(self, skip: str = "none", h: int = 16, experts: int = 4) -> None:
        super().__init__()
        self.gate = nn.Linear(h, experts, bias=False)
        self.experts = nn.ModuleList([Expert(h, 32) for _ in range(experts)])
        self.num_experts, self.top_k, self.skip = experts, 2, skip

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        routing_weights = nn.functional.softmax(self.gate(hidden_states), dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        final = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            if self.skip == "any" and not expert_mask[expert_idx].any():
                continue
            idx, top_x = torch.where(expert_mask[expert_idx])
            if self.skip == "size" and top_x.shape[0] == 0:
                continue
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current.to(hidden_states.dtype))
        return final.reshape(batch_size, sequence_length, hidden_dim)


def test_moe_loop_over_every_expert_with_empty_selections() -> None:
    """Every expert runs on its (possibly empty) selection: TensorRT takes zero-size tensors, and an
    ``index_add_`` of zero rows adds nothing; inputs where an expert gets no token included."""
    torch.manual_seed(0)
    m = SparseMoe().eval()
    trt = torch2trt_lite.convert(m, [torch.randn(1, 5, 16)], backend="sim")
    empty = 0
    for seed in range(6):
        x = torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(seed)) * 3
        hit = torch.topk(m.gate(x.view(-1, 16)), 2, -1).indices.unique().numel()
        empty += hit < m.num_experts
        torch.testing.assert_close(trt(x), m(x), **TOL)
    assert empty, "no input left an expert without tokens: the empty selections were not exercised"


@pytest.mark.parametrize(("skip", "error", "match"), [
    ("size", torch2trt_lite.ConversionError, r"`.*== 0` is False at the traced size but not for every size"),
    ("any", torch2trt_lite.UnsupportedOperatorError, r"__bool__ .*reads tensor values.*drop it"),
])
def test_moe_skip_of_empty_experts_is_refused_with_the_line(skip: str, error: type, match: str) -> None:
    """Skipping an expert with no tokens is a branch on values: refused, naming the line, with the fix
    (drop the skip: the loop above converts)."""
    torch.manual_seed(0)
    with pytest.raises(error, match=match) as info:
        torch2trt_lite.convert(SparseMoe(skip).eval(), [torch.randn(1, 5, 16)], backend="sim")
    assert "test_library_rules.py:" in str(info.value)


# ---------------------------------------------------------------------------- values read as numbers
class OnnxWrapper(nn.Module):
    """A segmentation model's ONNX-export wrapper: the original image size is an input, read as numbers
    and passed on to ``interpolate`` (segment-anything's ``SamOnnxModel.mask_postprocessing`` style)."""

    def forward(self, masks: torch.Tensor, orig_im_size: torch.Tensor) -> torch.Tensor:
        h, w = orig_im_size[0].item(), orig_im_size[1].item()
        return nn.functional.interpolate(masks, size=(h, w), mode="bilinear", align_corners=False)


def test_values_read_as_sizes_and_passed_on() -> None:
    size = torch2trt_lite.Input((2,), (2,), (2,), dtype=torch.int64, example=torch.tensor([12, 16]), low=1, high=64)
    trt = torch2trt_lite.convert(OnnxWrapper().eval(), [torch.randn(1, 1, 8, 8), size], backend="sim")
    masks = torch.randn(1, 1, 8, 8)
    for hw in ((12, 16), (33, 9)):
        torch.testing.assert_close(trt(masks, torch.tensor(hw)), OnnxWrapper()(masks, torch.tensor(hw)), **TOL)


class IntRead(nn.Module):
    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n = int(lengths.max())  # Python's int() makes a plain number: it cannot stay symbolic
        return x[:, :n]


class Compared(nn.Module):
    """Speech-model length handling: the longest length checked against the frames, then a mask."""

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n = lengths.max().item()
        if n > x.shape[1]:
            raise ValueError("a length is longer than the input")
        return (torch.arange(n)[None, :] < lengths[:, None]).sum(-1) + x.shape[1]


def _lengths(high: int) -> torch2trt_lite.Input:
    return torch2trt_lite.Input((3,), (3,), (3,), dtype=torch.int64, example=torch.tensor([4, 7, 2]), low=0, high=high)


def test_value_compared_within_its_input_range() -> None:
    """The lengths' Input range (values 0..10) bounds ``n``: ``n > 10`` is False for every input the
    engine takes (trace/values.py), so the branch converts."""
    trt = torch2trt_lite.convert(Compared().eval(), [torch.randn(3, 10), _lengths(11)], backend="sim")
    x = torch.randn(3, 10)
    for lengths in (torch.tensor([9, 1, 3]), torch.tensor([10, 10, 0])):
        torch.testing.assert_close(trt(x, lengths), Compared()(x, lengths))


@pytest.mark.filterwarnings("ignore:__int__ returned non-int:DeprecationWarning")  # Python's own, for int(SymSize)
@pytest.mark.parametrize(("model", "lengths", "match"), [
    (IntRead(), torch.tensor([4, 7, 2]), r"__int__ at .*test_library_rules.py:\d+\) was read as a Python number"),
    (Compared(), _lengths(12), r"item at .*test_library_rules.py:\d+\) \(traced as 7, range \[0, 11\]\).* > 10`"),
])
def test_values_that_cannot_stay_symbolic_name_the_line(model: nn.Module, lengths: Any, match: str) -> None:
    with pytest.raises(torch2trt_lite.ConversionError, match=match):
        torch2trt_lite.convert(model.eval(), [torch.randn(3, 10), lengths], backend="sim")


@pytest.mark.rtx
def test_value_compared_within_its_input_range_builds_on_tensorrt_rtx() -> None:
    """With a dynamic batch: TensorRT-RTX builds the engine (lengths a shape input, its profile the Input's
    range) and the dynamic verify run converts again on the sim with the same value ranges."""

    class Batched(Compared):
        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            return super().forward(x, lengths) + x.sum()

    x = torch2trt_lite.Input((1, 10), (2, 10), (4, 10))
    trt = torch2trt_lite.convert(Batched().eval(), [x, _lengths(11)], backend="tensorrt-rtx", progress=False)
    assert len(trt.plan) > 0 and trt.metadata["inputs"][1]["values"]["max"] == [10, 10, 10]
