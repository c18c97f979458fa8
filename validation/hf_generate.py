#!/usr/bin/python3
"""Generation with a growing KV cache, measured on CPU (PyTorch 1.13).

A Hugging Face-style LlamaForCausalLM written out call by call as transformers v4.46
modeling_llama.py runs it with attn_implementation="eager" (PyTorch 1.13 has no
scaled_dot_product_attention), a DynamicCache (cache_utils.py: the prefill appends, each decode
torch.cat's the new token onto the cached keys/values), and generate()'s greedy loop
(generation/utils.py GenerationMixin._sample, no attention_mask, no stopping criteria; the
caller keeps its prompt tensor, as `model.generate(**inputs)` does):

    model_input = input_ids if first else input_ids[:, -1:]   # a view (transformers'
                  # prepare_inputs_for_generation indexes with cache_position: an 8-byte copy per row)
    outputs = model(model_input, past_key_values=cache, num_logits_to_keep=1)
    next_token_logits = outputs.logits[:, -1, :].clone().float()
    next_tokens = torch.argmax(next_token_logits, dim=-1)
    input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    del outputs

Beam search (num_beams > 1) follows GenerationMixin._beam_search and BeamSearchScorer.process
(generation/beam_search.py) without logits processors or an eos token, and
DynamicCache.reorder_cache: the prompt is repeat_interleave'd to batch x beams rows before the
loop, and each iteration after the forward runs

    next_token_logits = outputs.logits[:, -1, :].clone().float()
    next_token_scores = log_softmax(next_token_logits, dim=-1)
    next_token_scores_processed = logits_processor(input_ids, next_token_scores)  # the same tensor
    next_token_scores = next_token_scores_processed + beam_scores[:, None].expand_as(...)
    next_token_scores, next_tokens = topk(next_token_scores.view(B, K * V), 2 * K)
    next_indices = div(next_tokens, V, rounding_mode="floor"); next_tokens = next_tokens % V
    beam_outputs = beam_scorer.process(...)          # three zeros (B, K), filled per element
    input_ids = torch.cat([input_ids[beam_idx, :], beam_next_tokens.unsqueeze(-1)], dim=-1)
    del outputs
    cache.reorder_cache(beam_idx)                    # index_select per layer, key then value

    /usr/bin/python3 validation/hf_generate.py            # -> validation/measured_generate.json

Each case runs in a fresh process (the profiler's memory reporter keeps state) and is measured
with memtrace.Recorder (the same exact replay of c10's CPU allocator events as run.py). The
peak covers everything allocated inside the recorder: weights, the prompt, every forward.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.dirname(HERE)

# (config under validation/hf-configs/, batch, prompt, new tokens, beams, cache)
CASES = [
    ("tiny-llama-gqa.json", 1, 16, 6, 1, "dynamic"),
    ("tiny-llama-gqa.json", 2, 24, 5, 1, "dynamic"),
    ("tiny-llama-mha.json", 1, 32, 4, 1, "dynamic"),
    ("tiny-llama-gqa.json", 1, 2, 40, 1, "dynamic"),
    ("tiny-llama-mha.json", 2, 3, 30, 1, "dynamic"),
    ("tiny-llama-gqa.json", 1, 16, 6, 4, "dynamic"),
    ("tiny-llama-gqa.json", 2, 5, 12, 3, "dynamic"),
    ("tiny-llama-mha.json", 1, 2, 40, 2, "dynamic"),
    ("tiny-llama-gqa.json", 1, 16, 6, 1, "static"),
    ("tiny-llama-mha.json", 2, 3, 30, 1, "static"),
    ("tiny-llama-gqa.json", 2, 5, 12, 3, "static"),
]


def case_id(c):
    return f"{c[0]}/b{c[1]}/p{c[2]}/n{c[3]}" + (f"/k{c[4]}" if c[4] > 1 else "") + (
        "/static" if c[5] == "static" else "")


def build_model(cfg):
    import torch
    from torch import nn

    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    NH = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim", H // NH)
    I, V = cfg["intermediate_size"], cfg["vocab_size"]
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(H))

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + eps)
            return self.weight * hidden_states.to(input_dtype)

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            inv_freq = 1.0 / (theta ** (torch.arange(0, HD, 2, dtype=torch.int64).float() / HD))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            self.attention_scaling = 1.0

        @torch.no_grad()
        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos()
            sin = emb.sin()
            cos = cos * self.attention_scaling
            sin = sin * self.attention_scaling
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        cos = cos.unsqueeze(1)
        sin = sin.unsqueeze(1)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed

    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

    class DynamicCache:
        def __init__(self):
            self.key_cache = []
            self.value_cache = []

        def get_seq_length(self):
            return 0 if not self.key_cache else self.key_cache[0].shape[-2]

        def update(self, key_states, value_states, layer_idx, cache_position):
            if len(self.key_cache) <= layer_idx:
                self.key_cache.append(key_states)
                self.value_cache.append(value_states)
            else:
                self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
                self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states], dim=-2)
            return self.key_cache[layer_idx], self.value_cache[layer_idx]

        def reorder_cache(self, beam_idx):
            for layer_idx in range(len(self.key_cache)):
                self.key_cache[layer_idx] = self.key_cache[layer_idx].index_select(0, beam_idx)
                self.value_cache[layer_idx] = self.value_cache[layer_idx].index_select(0, beam_idx)

    class StaticCache(DynamicCache):
        # cache_utils.StaticCache: zeros [max_batch_size, kv_heads, max_cache_len, head_dim] per
        # layer (key, then value), updated in place with index_copy_ along the sequence. The
        # tokens seen are counted here; transformers' get_seq_length (keys[0, 0].any(-1).sum(),
        # a [max_cache_len] bool and an 8-byte sum, freed at once) is not called.
        def __init__(self, batch, max_cache_len, dtype):
            super().__init__()
            self.max_cache_len = max_cache_len
            self.seen = 0
            for _ in range(L):
                self.key_cache.append(torch.zeros((batch, KV, max_cache_len, HD), dtype=dtype))
                self.value_cache.append(torch.zeros((batch, KV, max_cache_len, HD), dtype=dtype))

        def get_seq_length(self):
            return self.seen

        def update(self, key_states, value_states, layer_idx, cache_position):
            k_out = self.key_cache[layer_idx]
            v_out = self.value_cache[layer_idx]
            k_out.index_copy_(2, cache_position, key_states)
            v_out.index_copy_(2, cache_position, value_states)
            if layer_idx == L - 1:
                self.seen += key_states.shape[-2]
            return k_out, v_out

    class Attention(nn.Module):
        def __init__(self, idx):
            super().__init__()
            self.layer_idx = idx
            self.q_proj = nn.Linear(H, NH * HD, bias=False)
            self.k_proj = nn.Linear(H, KV * HD, bias=False)
            self.v_proj = nn.Linear(H, KV * HD, bias=False)
            self.o_proj = nn.Linear(NH * HD, H, bias=False)

        def forward(self, hidden_states, attention_mask, position_embeddings, past_key_value, cache_position):
            bsz, q_len, _ = hidden_states.size()
            query_states = self.q_proj(hidden_states)
            key_states = self.k_proj(hidden_states)
            value_states = self.v_proj(hidden_states)
            query_states = query_states.view(bsz, q_len, NH, HD).transpose(1, 2)
            key_states = key_states.view(bsz, q_len, KV, HD).transpose(1, 2)
            value_states = value_states.view(bsz, q_len, KV, HD).transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            if past_key_value is not None:
                key_states, value_states = past_key_value.update(key_states, value_states, self.layer_idx,
                                                                 cache_position)
            key_states = repeat_kv(key_states, NH // KV)
            value_states = repeat_kv(value_states, NH // KV)
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(HD)
            if attention_mask is not None:
                causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
                attn_weights = attn_weights + causal_mask
            attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_output = torch.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).contiguous()
            attn_output = attn_output.reshape(bsz, q_len, -1)
            attn_output = self.o_proj(attn_output)
            attn_weights = None
            return attn_output, attn_weights, past_key_value

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(H, I, bias=False)
            self.up_proj = nn.Linear(H, I, bias=False)
            self.down_proj = nn.Linear(I, H, bias=False)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self, idx):
            super().__init__()
            self.self_attn = Attention(idx)
            self.mlp = MLP()
            self.input_layernorm = RMSNorm()
            self.post_attention_layernorm = RMSNorm()

        def forward(self, hidden_states, attention_mask, position_embeddings, past_key_value, cache_position):
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states, self_attn_weights, present_key_value = self.self_attn(
                hidden_states, attention_mask, position_embeddings, past_key_value, cache_position)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            hidden_states = residual + hidden_states
            return (hidden_states,)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, H)
            self.layers = nn.ModuleList([DecoderLayer(i) for i in range(L)])
            self.norm = RMSNorm()
            self.rotary_emb = Rotary()

        def _update_causal_mask(self, input_tensor, cache_position, past_seen_tokens, past_key_values):
            # eager, attention_mask None: target_length = past + S + 1 with a DynamicCache,
            # max_cache_len with a StaticCache
            dtype, device = input_tensor.dtype, input_tensor.device
            sequence_length = input_tensor.shape[1]
            target_length = past_seen_tokens + sequence_length + 1
            if isinstance(past_key_values, StaticCache):
                target_length = past_key_values.max_cache_len
            min_dtype = torch.finfo(dtype).min
            causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype, device=device)
            if sequence_length != 1:
                causal_mask = torch.triu(causal_mask, diagonal=1)
            causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
            causal_mask = causal_mask[None, None, :, :].expand(input_tensor.shape[0], 1, -1, -1)
            return causal_mask

        def forward(self, input_ids, past_key_values):
            inputs_embeds = self.embed_tokens(input_ids)
            past_seen_tokens = past_key_values.get_seq_length() if past_key_values is not None else 0
            cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1])
            position_ids = cache_position.unsqueeze(0)
            causal_mask = self._update_causal_mask(inputs_embeds, cache_position, past_seen_tokens, past_key_values)
            hidden_states = inputs_embeds
            position_embeddings = self.rotary_emb(hidden_states, position_ids)
            for decoder_layer in self.layers:
                layer_outputs = decoder_layer(hidden_states, causal_mask, position_embeddings, past_key_values,
                                              cache_position)
                hidden_states = layer_outputs[0]
            hidden_states = self.norm(hidden_states)
            return hidden_states, past_key_values

    class ForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Model()
            self.lm_head = nn.Linear(H, V, bias=False)

        def forward(self, input_ids, past_key_values, num_logits_to_keep=0):
            hidden_states, past = self.model(input_ids, past_key_values)
            logits = self.lm_head(hidden_states[:, -num_logits_to_keep:, :])
            return logits, past

    return ForCausalLM(), DynamicCache, StaticCache


def process(input_ids, next_scores, next_tokens, next_indices, num_beams):
    """BeamSearchScorer.process without an eos token: no hypothesis is finished."""
    import torch
    batch_size = next_scores.shape[0]
    next_beam_scores = torch.zeros((batch_size, num_beams), dtype=next_scores.dtype)
    next_beam_tokens = torch.zeros((batch_size, num_beams), dtype=next_tokens.dtype)
    next_beam_indices = torch.zeros((batch_size, num_beams), dtype=next_indices.dtype)
    for batch_idx in range(batch_size):
        beam_idx = 0
        for next_token, next_score, next_index in zip(next_tokens[batch_idx], next_scores[batch_idx],
                                                      next_indices[batch_idx]):
            batch_beam_idx = batch_idx * num_beams + next_index
            next_beam_scores[batch_idx, beam_idx] = next_score
            next_beam_tokens[batch_idx, beam_idx] = next_token
            next_beam_indices[batch_idx, beam_idx] = batch_beam_idx
            beam_idx += 1
            if beam_idx == num_beams:
                break
        next_scores[batch_idx].max().item()  # beam_hyp.is_done(best_sum_logprobs, ...)
    return {"next_beam_scores": next_beam_scores.view(-1), "next_beam_tokens": next_beam_tokens.view(-1),
            "next_beam_indices": next_beam_indices.view(-1)}


def beam_loop(rec, model, make_cache, prompt_ids, new_tokens, num_beams):
    import torch
    from torch import nn
    batch = prompt_ids.shape[0]
    input_ids = prompt_ids.repeat_interleave(num_beams, dim=0)  # _expand_inputs_for_generation
    beam_scores = torch.zeros((batch, num_beams), dtype=torch.float)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view((batch * num_beams,))
    cache = make_cache(batch * num_beams)
    for f in range(new_tokens):
        rec.mark("P:prefill" if f == 0 else f"P:decode{f}")
        model_input = input_ids if f == 0 else input_ids[:, -1:]
        outputs = model(model_input, cache, num_logits_to_keep=1)
        next_token_logits = outputs[0][:, -1, :].clone().float()
        next_token_scores = nn.functional.log_softmax(next_token_logits, dim=-1)
        next_token_scores_processed = next_token_scores  # an empty LogitsProcessorList returns its input
        next_token_scores = next_token_scores_processed + beam_scores[:, None].expand_as(next_token_scores_processed)
        vocab_size = next_token_scores.shape[-1]
        next_token_scores = next_token_scores.view(batch, num_beams * vocab_size)
        next_token_scores, next_tokens = torch.topk(next_token_scores, 2 * num_beams, dim=1, largest=True,
                                                    sorted=True)
        next_indices = torch.div(next_tokens, vocab_size, rounding_mode="floor")
        next_tokens = next_tokens % vocab_size
        beam_outputs = process(input_ids, next_token_scores, next_tokens, next_indices, num_beams)
        beam_scores = beam_outputs["next_beam_scores"]
        beam_next_tokens = beam_outputs["next_beam_tokens"]
        beam_idx = beam_outputs["next_beam_indices"]
        input_ids = torch.cat([input_ids[beam_idx, :], beam_next_tokens.unsqueeze(-1)], dim=-1)
        del outputs
        cache.reorder_cache(beam_idx)
    rec.mark("P:end")
    del cache


def greedy_loop(rec, model, make_cache, prompt_ids, new_tokens):
    import torch
    input_ids = prompt_ids
    cache = make_cache(prompt_ids.shape[0])
    for f in range(new_tokens):
        rec.mark("P:prefill" if f == 0 else f"P:decode{f}")
        model_input = input_ids if f == 0 else input_ids[:, -1:]
        outputs = model(model_input, cache, num_logits_to_keep=1)
        next_token_logits = outputs[0][:, -1, :].clone().float()
        next_tokens = torch.argmax(next_token_logits, dim=-1)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        del outputs
    rec.mark("P:end")
    del cache


def measure(case):
    import torch
    import memtrace
    name, batch, prompt, new_tokens, beams, cache_kind = case
    cfg = json.load(open(os.path.join(HERE, "hf-configs", name)))
    torch.manual_seed(0)
    rec = memtrace.Recorder(use_shim=False)
    with rec:
        model, DynamicCache, StaticCache = build_model(cfg)
        model.eval()
        prompt_ids = torch.randint(0, cfg["vocab_size"], (batch, prompt))  # the caller keeps its prompt
        rec.mark("P:baseline")

        def make_cache(rows):
            # generate(): max_batch_size = batch x beams, max_cache_len = max_length = prompt + new tokens
            if cache_kind == "static":
                return StaticCache(rows, prompt + new_tokens, torch.float32)
            return DynamicCache()
        with torch.no_grad():
            if beams == 1:
                greedy_loop(rec, model, make_cache, prompt_ids, new_tokens)
            else:
                beam_loop(rec, model, make_cache, prompt_ids, new_tokens, beams)
    rp = memtrace.Replay(rec.trace, rec.marks)
    phases = [p for p in rp.phases if p["name"] not in ("start", "baseline", "end")]
    peak = max(p["peak"] for p in phases)
    first = next(p for p in phases if p["peak"] == peak)
    return dict(config=name, batch=batch, prompt=prompt, new_tokens=new_tokens, beams=beams, cache=cache_kind,
                baseline_bytes=rp.phase("baseline")["end"], peak_bytes=peak, peak_forward=first["name"],
                forward_peaks={p["name"]: p["peak"] for p in phases})


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        c = next(c for c in CASES if case_id(c) == sys.argv[2])
        print("RESULT " + json.dumps(measure(c), sort_keys=True), flush=True)
        return
    results = []
    for c in CASES:
        out = subprocess.run(["/usr/bin/python3", __file__, "--case", case_id(c)], capture_output=True, text=True,
                             check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
        results.append(json.loads(line[len("RESULT "):]))
        print(case_id(c), results[-1]["peak_bytes"], results[-1]["peak_forward"], flush=True)
    with open(os.path.join(HERE, "measured_generate.json"), "w") as f:
        json.dump(dict(method="memtrace.Recorder replay of c10 CPU allocator events (validation/README.md)",
                       cases=results), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
