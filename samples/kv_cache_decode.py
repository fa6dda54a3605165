"""An LLM decode step with a KV cache, as the README shows it: a small Llama (random weights) prefills
a prompt in eager PyTorch, then one engine, built once for every cache length from 1 to 64, decodes
greedily, one call per token, with transformers' DynamicCache in and out. Checked against the same
loop in eager PyTorch (the tokens, and the last logits within 1e-4).

    python samples/kv_cache_decode.py
"""

import torch
import transformers

import torch2trt_lite
from torch2trt_lite import Input

torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2)
lm = transformers.LlamaForCausalLM(cfg).eval()


# README: KV-cache decode step
class DecodeStep(torch.nn.Module):
    """The new token, its mask over cached and new positions, its position and the cache in; the logits
    and the cache one position longer out."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask, position_ids, cache):
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                      use_cache=True)
        return out.logits, out.cache


step = DecodeStep(lm).eval()
cache8 = transformers.DynamicCache(ddp_cache_data=[  # per layer a key and a value: [1, kv heads, 8 positions, 16]
    (torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)) for _ in range(2)])
mask = torch.ones(1, 9, dtype=torch.int64)
mask[:, 0] = 0  # trace with a padded mask: transformers skips an all-ones mask by reading its values
example = [torch.tensor([[5]]), mask, torch.tensor([[8]]), cache8]
one = Input((1, 1), (1, 1), (1, 1), dtype=torch.int64)
ranges = [one, Input((1, 2), (1, 9), (1, 65), dtype=torch.int64), one,  # input_ids, attention_mask, position_ids
          *[Input((1, 2, 1, 16), (1, 2, 8, 16), (1, 2, 64, 16)) for _ in range(4)]]  # the cache: 1 to 64 positions
trt_step = torch2trt_lite.convert(step, example, profiles=[ranges])

prompt = torch.tensor([[1, 17, 42, 7]])
with torch.no_grad():
    out = lm(input_ids=prompt, use_cache=True)  # the prompt in eager PyTorch
cache, token, tokens = out.cache, out.logits[:, -1:].argmax(-1), []
for _ in range(8):  # one engine call per token
    past = cache.get_seq_length()
    logits, cache = trt_step(token, torch.ones(1, past + 1, dtype=torch.int64), torch.tensor([[past]]), cache)
    token = logits[:, -1:].argmax(-1)
    tokens.append(int(token))
# README: end

with torch.no_grad():  # the same loop in eager PyTorch
    out = lm(input_ids=prompt, use_cache=True)
    cache, token, want = out.cache, out.logits[:, -1:].argmax(-1), []
    for _ in range(8):
        past = cache.get_seq_length()
        want_logits, cache = step(token, torch.ones(1, past + 1, dtype=torch.int64), torch.tensor([[past]]), cache)
        token = want_logits[:, -1:].argmax(-1)
        want.append(int(token))
assert tokens == want, (tokens, want)
torch.testing.assert_close(logits, want_logits, rtol=1e-4, atol=1e-4)  # the last step's logits
print("decoded", tokens, "as eager PyTorch does")
