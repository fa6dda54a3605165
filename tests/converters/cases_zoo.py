"""Harness cases: converters added for the model zoo (third-party library helpers)."""

from __future__ import annotations

import importlib.util

import torch

from tests.converters.harness import Case


def _ties() -> list[torch.Tensor]:
    x = torch.tensor([[1.0, 4, 4, 0, 4, 2, 4, 1, 4, 4, 4, 4], [0.0] * 12, [3.0, 3, 1, 1, 2, 3, 3, 3, 1, 1, 1, 1]])
    return [x]


# Tied extremes: torch returns the first index; top-k promises no order among ties (CLIP's pooling
# takes argmax of ``input_ids == eos``, which ties on every padded eos).
CASES: list[Case] = [
    Case("argmax_ties", lambda x: x.argmax(-1), _ties),
    Case("argmin_ties_dim0", lambda x: x.argmin(0), _ties),
    Case("argmax_ties_flat", lambda x: x.argmax(), _ties),
    Case("max_dim_ties", lambda x: x.max(1), _ties),
    Case("min_dim_ties_keepdim", lambda x: x.min(0, keepdim=True), _ties,
         constant="the values are all 0 (a zero row ties with the others); the indices are the check"),
    Case("argmax_ties_int", lambda x: (x == 4).int().argmax(-1), _ties),
    Case("argmax_ties_fp16", lambda x: x.half().argmax(-1), _ties),
]


def _padding_mask() -> list[torch.Tensor]:
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, -2:] = False
    return [mask]


def _bidirectional(mask: torch.Tensor) -> torch.Tensor:
    from transformers.masking_utils import bidirectional_mask_function, sdpa_mask

    out = sdpa_mask(batch_size=2, q_length=6, kv_length=6, mask_function=bidirectional_mask_function,
                    attention_mask=mask, allow_is_causal_skip=False, allow_is_bidirectional_skip=True)
    assert out is not None
    return out


def _causal(mask: torch.Tensor) -> torch.Tensor:
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    out = sdpa_mask(batch_size=2, q_length=6, kv_length=6, mask_function=causal_mask_function,
                    attention_mask=mask, allow_is_causal_skip=True)
    assert out is not None
    return out


def _is_tracing_shortcut(mask: torch.Tensor) -> torch.Tensor:
    """transformers' mask shortcut: skipped while tracing (``is_tracing`` asks ``is_torch_fx_proxy``);
    both branches give the same values where the shortcut is taken, so the engine must equal eager."""
    from transformers.utils.import_utils import is_tracing

    m = mask.float()
    if not is_tracing(mask) and bool(torch.all(mask)):
        return torch.ones_like(m)
    return m


_MOE: list[torch.nn.Module] = []


def _eager_experts(hidden: torch.Tensor) -> torch.Tensor:
    """A Mixtral sparse-MoE block with transformers' eager experts loop (``ExpertsInterface.get_interface``)."""
    if not _MOE:
        import transformers
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

        cfg = transformers.MixtralConfig(hidden_size=16, intermediate_size=32, num_local_experts=4,
                                         num_experts_per_tok=2)
        cfg._experts_implementation = "eager"
        torch.manual_seed(0)
        block = MixtralSparseMoeBlock(cfg).eval()
        with torch.no_grad():  # NOTE: the experts' weights are torch.empty until a PreTrainedModel inits them
            for p in block.parameters():
                p.normal_(0.0, 0.2)
        _MOE.append(block)
    out: torch.Tensor = _MOE[0](hidden)
    return out


def _tokens() -> list[torch.Tensor]:
    return [torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(3))]


# NOTE: the transformers converters are registered only once transformers is imported; without it
# installed there is nothing to cover.
if importlib.util.find_spec("transformers") is not None:
    CASES += [
        Case("hf_bidirectional_mask_padded", _bidirectional, _padding_mask,
             targets=["transformers.masking_utils._ignore_bidirectional_mask_sdpa"]),
        Case("hf_causal_mask_padded", _causal, _padding_mask,
             targets=["transformers.masking_utils._ignore_causal_mask_sdpa"]),
        Case("hf_is_tracing_mask_shortcut", _is_tracing_shortcut, _padding_mask,
             targets=["transformers.utils.import_utils.is_torch_fx_proxy"]),
        Case("hf_mixtral_eager_experts", _eager_experts, _tokens,
             targets=["transformers.integrations.moe.ExpertsInterface.get_interface"]),
    ]
