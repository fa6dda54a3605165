"""Model zoo: torchvision, timm, Hugging Face transformers and recurrent models convert on the sim.

Every model is built with random weights (``torch.manual_seed``, no downloads), put in eval mode
with no constant weights left (zero heads, zero gammas, tiny layer scales get random values) and
realistic batch-norm statistics (so BN is not an identity), converted with ``backend="sim"``
and compared with eager PyTorch leaf by leaf: ``max|got - ref| / max|ref| <= 1e-4`` for every output
tensor (outputs may be tensors, tuples, dicts or ``ModelOutput``\\ s), on the traced inputs and on
other inputs.

Inputs are the smallest the model allows, to keep the zoo inside the normal ``make test`` run:
64x64 for CNNs with adaptive pooling, 224x224 only where the architecture fixes it, tiny
transformer configs (hidden 32-64, 2 layers, vocab ~100).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from tests.converters.harness import varied
from tests.weights import nontrivial
from tests.zoo import longtail_models as longtail

timm = pytest.importorskip("timm", reason="the zoo needs timm: pip install -e '.[test]'")
transformers = pytest.importorskip("transformers", reason="the zoo needs transformers: pip install -e '.[test]'")
torchvision = pytest.importorskip("torchvision", reason="the zoo needs torchvision: pip install -e '.[test]'")

MAX_REL_ERR = 1e-4  # of the output's largest magnitude; fp32 models measured <= 5e-6 (2026-11-30)


@dataclass(frozen=True)
class Zoo:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], list[torch.Tensor]]
    xfail: str | None = None  # the exact reason (op and why), when the model cannot convert
    # A second input of the same shapes the engine must also get right (e.g. another attention mask).
    more_inputs: Callable[[], list[torch.Tensor]] | None = None


def _image(*shape: int) -> Callable[[], list[torch.Tensor]]:
    return lambda: [torch.randn(*shape, generator=torch.Generator().manual_seed(1))]


def _tv(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    return lambda: torchvision.models.get_model(name, weights=None, **kwargs)


def _tv_seg(name: str) -> Callable[[], nn.Module]:
    return lambda: torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=5)


def _tv_video(name: str) -> Callable[[], nn.Module]:
    return lambda: torchvision.models.get_model(name, weights=None, num_classes=10)


def _fpn() -> nn.Module:
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    return resnet_fpn_backbone(backbone_name="resnet50", weights=None, trainable_layers=5)


class RaftSmall(nn.Module):
    """torchvision raft_small with 2 flow updates (its minimum input is 128x128)."""

    def __init__(self) -> None:
        super().__init__()
        self.raft = torchvision.models.optical_flow.raft_small(weights=None)

    def forward(self, image1: torch.Tensor, image2: torch.Tensor) -> list[torch.Tensor]:
        return self.raft(image1, image2, num_flow_updates=2)  # type: ignore[no-any-return]


def _ssdlite() -> nn.Module:
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                   num_classes=3, score_thresh=0.3)
    # NOTE: torchvision's own init leaves the random mobilenet features at 0, so every box scores 1/3 and
    # the detections are ties in any order; He-initialized convs give distinct scores
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight)
    return m


def _timm(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    return lambda: timm.create_model(name, pretrained=False, **kwargs)


# --------------------------------------------------------------------- Hugging Face transformers
_SEQ = 12
_VOCAB = 100
_HF_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def _tokens(seed: int = 2, padding: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, _VOCAB, (1, _SEQ), generator=g, dtype=torch.int64)
    mask = torch.ones(1, _SEQ, dtype=torch.int64)
    if padding:
        mask[:, -padding:] = 0  # padded tail: the attention mask is not trivial
    return [ids, mask]


def _tokens_unpadded() -> list[torch.Tensor]:
    """Other ids and no padding: the engine must apply the mask it is given, not the traced one."""
    return _tokens(seed=5, padding=0)


class Keywords(nn.Module):
    """Calls ``model(**{name: x})``: engines take positional tensors, Hugging Face models keywords."""

    def __init__(self, model: nn.Module, *names: str) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.model(**dict(zip(self.names, xs, strict=True)))


def _text(model: nn.Module) -> nn.Module:
    return Keywords(model, "input_ids", "attention_mask")


def _bert() -> nn.Module:
    cfg = transformers.BertConfig(vocab_size=_VOCAB, max_position_embeddings=64, **_HF_SMALL)
    return _text(transformers.BertModel(cfg))


def _distilbert() -> nn.Module:
    cfg = transformers.DistilBertConfig(vocab_size=_VOCAB, max_position_embeddings=64, dim=64, n_layers=2,
                                        n_heads=4, hidden_dim=128)
    return _text(transformers.DistilBertModel(cfg))


def _gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(vocab_size=_VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=1, eos_token_id=2, use_cache=False)
    return _text(transformers.GPT2Model(cfg))


def _hf_vit() -> nn.Module:
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, **_HF_SMALL)
    return transformers.ViTModel(cfg)


_DECODER = dict(vocab_size=_VOCAB, max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                use_cache=False, **_HF_SMALL)


def _llama() -> nn.Module:  # RoPE, grouped-query attention, RMSNorm, SiLU-gated MLP
    return _text(transformers.LlamaModel(transformers.LlamaConfig(num_key_value_heads=2, **_DECODER)))


def _mistral() -> nn.Module:  # sliding-window causal mask
    return _text(transformers.MistralModel(transformers.MistralConfig(num_key_value_heads=2, sliding_window=4,
                                                                      **_DECODER)))


def _bloom() -> nn.Module:  # ALiBi position biases
    cfg = transformers.BloomConfig(vocab_size=_VOCAB, hidden_size=64, n_layer=2, n_head=4, bos_token_id=1,
                                   eos_token_id=2, pad_token_id=0, use_cache=False)
    return _text(transformers.BloomModel(cfg))


def _t5_encoder() -> nn.Module:  # relative position buckets
    cfg = transformers.T5Config(vocab_size=_VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)
    return _text(transformers.T5EncoderModel(cfg))


def _bart() -> nn.Module:  # encoder-decoder: causal self-attention and cross-attention
    cfg = transformers.BartConfig(vocab_size=_VOCAB, d_model=64, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                  decoder_ffn_dim=128, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                                  eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2, use_cache=False)
    return _text(transformers.BartModel(cfg))


def _deberta_v2() -> nn.Module:  # disentangled relative attention (gathers of relative positions)
    cfg = transformers.DebertaV2Config(vocab_size=_VOCAB, max_position_embeddings=64, relative_attention=True,
                                       pos_att_type=["p2c", "c2p"], **_HF_SMALL)
    return _text(transformers.DebertaV2Model(cfg))


_CLIP_EOS = _VOCAB - 1


def _clip_text() -> nn.Module:  # pools at the first eos: argmax over ties
    cfg = transformers.CLIPTextConfig(vocab_size=_VOCAB, max_position_embeddings=64, bos_token_id=_CLIP_EOS - 1,
                                      eos_token_id=_CLIP_EOS, pad_token_id=_CLIP_EOS, **_HF_SMALL)
    return _text(transformers.CLIPTextModel(cfg))


def _clip_tokens(seed: int = 2, length: int = 9) -> list[torch.Tensor]:
    """CLIP pads with eos: every padded position ties with the real eos, the first one must win."""
    ids, mask = _tokens(seed, padding=0)
    ids = ids.clamp(max=_CLIP_EOS - 2)
    ids[:, length - 1:] = _CLIP_EOS
    mask[:, length:] = 0
    return [ids, mask]


def _mamba() -> nn.Module:  # selective state-space scan (a Python loop over the sequence)
    cfg = transformers.MambaConfig(vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, state_size=8,
                                   use_cache=False)
    return Keywords(transformers.MambaModel(cfg), "input_ids")


def _whisper_encoder() -> nn.Module:  # conv1d front end on log-mel features
    cfg = transformers.WhisperConfig(vocab_size=_VOCAB, d_model=64, encoder_layers=2, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=8, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2, decoder_start_token_id=3)
    return transformers.WhisperModel(cfg).get_encoder()


def _wav2vec2() -> nn.Module:  # strided conv feature encoder, group norm, weight-normed positional conv
    cfg = transformers.Wav2Vec2Config(vocab_size=_VOCAB, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **_HF_SMALL)
    return transformers.Wav2Vec2Model(cfg)


def _detr() -> nn.Module:  # ResNet backbone, sine position embedding from the pixel mask, object queries
    backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                         out_features=["stage4"])
    cfg = transformers.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone,
                                  d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                  decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10)
    return transformers.DetrModel(cfg)


def _segformer() -> nn.Module:  # efficient attention with spatial reduction, Mix-FFN depthwise convs
    cfg = transformers.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                       num_attention_heads=[1, 2], decoder_hidden_size=32)
    return transformers.SegformerModel(cfg)


def _dinov2() -> nn.Module:  # bicubic interpolation of the position embeddings, layer scale
    return transformers.Dinov2Model(transformers.Dinov2Config(image_size=56, patch_size=14, **_HF_SMALL))


# ------------------------------------------------------------------------------------- recurrent
class SequenceModel(nn.Module):
    """Embedding -> 2-layer bidirectional LSTM -> GRU -> linear head over every step."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(_VOCAB, 24)
        self.lstm = nn.LSTM(24, 32, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(64, 32, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, _ = self.lstm(self.embed(ids))
        y, h = self.gru(y)
        return self.head(y), h


def _ids() -> list[torch.Tensor]:
    return [torch.randint(0, _VOCAB, (1, _SEQ), generator=torch.Generator().manual_seed(3), dtype=torch.int64)]


# ------------------------------------------------------------------------------------------ zoo
_CNN = _image(1, 3, 64, 64)
_224 = _image(1, 3, 224, 224)
_VIDEO = _image(1, 3, 4, 32, 32)

ZOO = [
    # torchvision classification
    Zoo("tv_alexnet", _tv("alexnet"), _CNN),
    Zoo("tv_vgg16_bn", _tv("vgg16_bn"), _CNN),
    Zoo("tv_resnet18", _tv("resnet18"), _CNN),
    Zoo("tv_resnet50", _tv("resnet50"), _CNN),
    Zoo("tv_densenet121", _tv("densenet121"), _CNN),
    Zoo("tv_squeezenet1_1", _tv("squeezenet1_1"), _CNN),
    Zoo("tv_mobilenet_v2", _tv("mobilenet_v2"), _CNN),
    Zoo("tv_mobilenet_v3_large", _tv("mobilenet_v3_large"), _CNN),
    Zoo("tv_mobilenet_v3_small", _tv("mobilenet_v3_small"), _CNN),
    Zoo("tv_shufflenet_v2_x1_0", _tv("shufflenet_v2_x1_0"), _CNN),
    Zoo("tv_mnasnet1_0", _tv("mnasnet1_0"), _CNN),
    Zoo("tv_efficientnet_b0", _tv("efficientnet_b0"), _CNN),
    Zoo("tv_efficientnet_v2_s", _tv("efficientnet_v2_s"), _CNN),
    Zoo("tv_regnet_y_400mf", _tv("regnet_y_400mf"), _CNN),
    Zoo("tv_regnet_x_400mf", _tv("regnet_x_400mf"), _CNN),
    Zoo("tv_googlenet", _tv("googlenet", aux_logits=False, init_weights=False), _CNN),
    Zoo("tv_inception_v3", _tv("inception_v3", aux_logits=False, init_weights=False), _image(1, 3, 75, 75)),
    Zoo("tv_convnext_tiny", _tv("convnext_tiny"), _CNN),
    Zoo("tv_vit_b_16", _tv("vit_b_16"), _224),
    Zoo("tv_swin_t", _tv("swin_t"), _CNN),
    Zoo("tv_swin_v2_t", _tv("swin_v2_t"), _CNN),
    Zoo("tv_maxvit_t", _tv("maxvit_t"), _224),
    # torchvision video
    Zoo("tv_r3d_18", _tv_video("r3d_18"), _VIDEO),
    Zoo("tv_r2plus1d_18", _tv_video("r2plus1d_18"), _VIDEO),
    # torchvision optical flow (correlation pyramid, grid_sample lookups, recurrent GRU updates)
    Zoo("tv_raft_small", RaftSmall, lambda: [_image(1, 3, 128, 128)()[0], _image(1, 3, 128, 128)()[0].flip(-1)]),
    # torchvision segmentation and detection backbone
    Zoo("tv_fcn_resnet50", _tv_seg("fcn_resnet50"), _CNN),
    Zoo("tv_deeplabv3_mobilenet_v3_large", _tv_seg("deeplabv3_mobilenet_v3_large"), _CNN),
    Zoo("tv_lraspp_mobilenet_v3_large", _tv_seg("lraspp_mobilenet_v3_large"), _CNN),
    Zoo("tv_resnet50_fpn_backbone", _fpn, _CNN),
    # detection end to end in one engine (data-dependent sizes: converters/datadep.py, converters/detection.py)
    Zoo("tv_ssdlite320_mobilenet_v3_large", _ssdlite, lambda: [torch.rand(1, 3, 64, 64)]),
    # timm
    Zoo("timm_resnet50d", _timm("resnet50d"), _CNN),
    Zoo("timm_efficientnet_b0", _timm("efficientnet_b0"), _CNN),
    Zoo("timm_convnext_nano", _timm("convnext_nano"), _CNN),
    Zoo("timm_vit_tiny_patch16_224", _timm("vit_tiny_patch16_224", img_size=64), _CNN),
    Zoo("timm_deit_tiny_patch16_224", _timm("deit_tiny_patch16_224", img_size=64), _CNN),
    Zoo("timm_swin_tiny_patch4_window7_224", _timm("swin_tiny_patch4_window7_224", img_size=64, window_size=4), _CNN),
    Zoo("timm_mobilenetv3_large_100", _timm("mobilenetv3_large_100"), _CNN),
    Zoo("timm_regnety_002", _timm("regnety_002"), _CNN),
    Zoo("timm_mobilevit_xxs", _timm("mobilevit_xxs"), _CNN),
    Zoo("timm_poolformer_s12", _timm("poolformer_s12"), _CNN),
    Zoo("timm_eva02_tiny_patch14_224", _timm("eva02_tiny_patch14_224", img_size=56), _image(1, 3, 56, 56)),
    Zoo("timm_beit_base_patch16_224_depth2", _timm("beit_base_patch16_224", img_size=64, depth=2), _CNN),
    Zoo("timm_mixer_s16_224", _timm("mixer_s16_224", img_size=64), _CNN),
    Zoo("timm_levit_128s", _timm("levit_128s", img_size=64), _CNN),
    Zoo("timm_tiny_vit_5m_224", _timm("tiny_vit_5m_224"), _CNN),
    Zoo("timm_efficientvit_m0", _timm("efficientvit_m0"), _CNN),
    Zoo("timm_pvt_v2_b0", _timm("pvt_v2_b0"), _CNN),
    Zoo("timm_hrnet_w18_small", _timm("hrnet_w18_small"), _CNN),
    Zoo("timm_resnest14d", _timm("resnest14d"), _CNN),
    Zoo("timm_mobilenetv4_conv_small", _timm("mobilenetv4_conv_small"), _CNN),
    Zoo("timm_sam2_hiera_tiny", _timm("sam2_hiera_tiny"), _CNN),
    # Hugging Face transformers (tiny configs, random weights)
    Zoo("hf_bert", _bert, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_distilbert", _distilbert, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_gpt2", _gpt2, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_vit", _hf_vit, _image(1, 3, 32, 32)),
    Zoo("hf_llama", _llama, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_mistral", _mistral, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_bloom", _bloom, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_t5_encoder", _t5_encoder, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_bart", _bart, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_deberta_v2", _deberta_v2, _tokens, more_inputs=_tokens_unpadded),
    Zoo("hf_clip_text", _clip_text, _clip_tokens, more_inputs=lambda: _clip_tokens(seed=6, length=5)),
    Zoo("hf_mamba", _mamba, _ids),
    Zoo("hf_whisper_encoder", _whisper_encoder, _image(1, 16, 16)),
    Zoo("hf_wav2vec2", _wav2vec2, _image(1, 400)),
    Zoo("hf_detr", _detr, _CNN),
    Zoo("hf_segformer", _segformer, _CNN),
    Zoo("hf_dinov2", _dinov2, _image(1, 3, 56, 56)),
    # recurrent
    Zoo("lstm_gru_sequence", SequenceModel, _ids),
    # the long tail of issue 23 (tests/zoo/longtail_models.py)
    Zoo("mel_mfcc_front_end", longtail.MelFrontEnd, longtail.waveform),
    Zoo("embedding_bag_recommender", longtail.Recommender, longtail.recommender_inputs,
        more_inputs=longtail.recommender_more),
    Zoo("gru_lstm_cell_loop", longtail.CellLoop, longtail.sequence),
    Zoo("patch_time_series", longtail.PatchTimeSeries, longtail.series),
]


def _leaves(out: Any, prefix: str = "out") -> dict[str, torch.Tensor]:
    """Output tensors by path (``out['last_hidden_state']``, ``out[1]``)."""
    if isinstance(out, torch.Tensor):
        return {prefix: out}
    found: dict[str, torch.Tensor] = {}
    if isinstance(out, dict):
        for k, v in out.items():
            found.update(_leaves(v, f"{prefix}[{k!r}]"))
    elif isinstance(out, (tuple, list)):
        for i, v in enumerate(out):
            found.update(_leaves(v, f"{prefix}[{i}]"))
    elif out is not None:
        raise TypeError(f"{prefix}: unexpected output type {type(out).__name__}")
    return found


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    scale = ref.abs().max().item()
    err = (got.float() - ref.float()).abs().max().item()
    return err / scale if scale > 0 else err


def _param(z: Zoo) -> Any:
    marks = [pytest.mark.xfail(reason=z.xfail, strict=True, raises=torch2trt_lite.Torch2TRTError)] if z.xfail else []
    return pytest.param(z, id=z.name, marks=marks)


def test_zoo_is_large_enough() -> None:
    assert len([z for z in ZOO if not z.xfail]) >= 40
    assert len({z.name for z in ZOO}) == len(ZOO)


def _compare(model: nn.Module, trt_model: nn.Module, xs: list[torch.Tensor]) -> None:
    with torch.no_grad():
        ref = _leaves(model(*[x.clone() for x in xs]))
    got = _leaves(trt_model(*[x.clone() for x in xs]))
    assert list(got) == list(ref), f"output structure differs: {list(got)} vs {list(ref)}"
    for key, r in ref.items():
        g = got[key]
        assert g.shape == r.shape and g.dtype == r.dtype, f"{key}: {g.shape}/{g.dtype} vs {r.shape}/{r.dtype}"
        if r.is_floating_point() and r.numel() > 1:
            assert float(r.float().std()) > 0, f"{key}: the reference output is constant; the comparison would be trivial"
        err = max_rel_err(g, r)
        assert err <= MAX_REL_ERR, f"{key}: max rel err {err:.3g} > {MAX_REL_ERR}"


@pytest.mark.parametrize("zoo", [_param(z) for z in ZOO])
def test_zoo_model_matches_eager(zoo: Zoo) -> None:
    torch.manual_seed(0)
    model = zoo.build().eval()
    nontrivial(model)
    xs = zoo.inputs()
    trt_model = torch2trt_lite.convert(model, [x.clone() for x in xs], backend="sim")
    _compare(model, trt_model, xs)
    # not only the traced inputs: a value frozen into the engine would still match those
    _compare(model, trt_model, zoo.more_inputs() if zoo.more_inputs is not None else varied(xs))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_hf_mask_without_padding_converts_as_under_tracing(dynamic: bool) -> None:
    """transformers skips an all-ones mask by reading its values, except while tracing
    (``is_tracing(padding_mask)``); answered as under tracing (converters/zoo_transformers.py), the
    engine builds the mask from its input and applies any mask it is given, padded or not."""
    torch.manual_seed(0)
    model = _bert().eval()
    xs = _tokens_unpadded()
    given: list[Any] = xs
    if dynamic:  # the README's first try: Input ranges, an unpadded example mask
        given = [torch2trt_lite.Input((1, 2), (1, _SEQ), (2, 32), dtype=x.dtype, example=x, low=lo, high=hi)
                 for x, (lo, hi) in zip(xs, ((0, _VOCAB), (1, 2)), strict=True)]
    trt_model = torch2trt_lite.convert(model, given, backend="sim")
    _compare(model, trt_model, xs)
    _compare(model, trt_model, _tokens(seed=7, padding=4))  # padding the traced mask did not have


def test_converters_do_not_import_transformers() -> None:
    """The transformers converters wait for the user's import: loading the converters stays light."""
    code = (
        "import sys\n"
        "from torch2trt_lite.registry import load_builtin_converters\n"
        "load_builtin_converters()\n"
        "assert 'transformers' not in sys.modules, 'loading the converters imported transformers'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
