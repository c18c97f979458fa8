"""Model zoo of the headroom validation harness.

One entry point:  build(name_with_params, batch, seq=None, dropout=True)
                  -> (model, inputs, targets, loss_fn)

* torchvision 0.14 models, built exactly as named (weights=None).
* plain nn.Module re-implementations of Hugging Face transformers ~4.30/4.31
  BertForSequenceClassification, GPT2LMHeadModel and LlamaForCausalLM (eager
  attention), written op for op after the HF modeling code, with no weights
  downloaded.  MODELS.md lists the exact torch op sequence of each forward.
* `mlp`: N x (Linear(D, D), GELU).

Naming: "name" or "name:key=value,key=value" (e.g. "mlp:layers=4,dim=256",
"llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000",
"bert-base:layers=2").  Preset keys can be overridden the same way.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

TORCHVISION_MODELS = [
    "alexnet", "vgg11", "vgg16", "vgg19", "resnet18", "resnet34", "resnet50",
    "resnet101", "resnet152", "inception_v3", "mobilenet_v2", "densenet121", "vit_b_16",
]

BERT_PRESETS = {
    "bert-base": dict(hidden=768, layers=12, heads=12, ffn=3072, vocab=30522, max_pos=512, type_vocab=2),
    "bert-large": dict(hidden=1024, layers=24, heads=16, ffn=4096, vocab=30522, max_pos=512, type_vocab=2),
}
GPT2_PRESETS = {
    "gpt2": dict(hidden=768, layers=12, heads=12, vocab=50257, n_positions=1024),
    "gpt2-medium": dict(hidden=1024, layers=24, heads=16, vocab=50257, n_positions=1024),
    "gpt2-large": dict(hidden=1280, layers=36, heads=20, vocab=50257, n_positions=1024),
    "gpt2-xl": dict(hidden=1600, layers=48, heads=25, vocab=50257, n_positions=1024),
}
LLAMA_PRESETS = {
    # `seq` = max_position_embeddings (length of the rotary cos/sin caches)
    "llama-2-7b": dict(hidden=4096, layers=32, heads=32, kv_heads=32, ffn=11008, vocab=32000, seq=4096),
    "llama-3-8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq=8192,
                       rope_theta=500000.0),
    "llama-2-70b": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096),
}
LLAMA_DEFAULTS = dict(hidden=256, layers=2, heads=8, kv_heads=None, ffn=688, vocab=1000, seq=2048,
                      rope_theta=10000.0, eps=1e-6)
MLP_DEFAULTS = dict(layers=16, dim=1024)

# Published parameter counts the reference modules must reproduce.
KNOWN_PARAM_COUNTS = {
    "bert-base": 109_483_778,      # bert-base-uncased + 2-label classification head
    "gpt2": 124_439_808,           # lm_head tied to wte
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
}


# --------------------------------------------------------------------------
# name parsing
# --------------------------------------------------------------------------
def _num(v):
    lv = v.lower()
    if lv in ("true", "on", "yes"):
        return True
    if lv in ("false", "off", "no"):
        return False
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def parse_name(name):
    """'mlp:layers=4,dim=256' -> ('mlp', {'layers': 4, 'dim': 256})"""
    base, _, rest = name.partition(":")
    params = {}
    if rest:
        for kv in rest.split(","):
            k, _, v = kv.partition("=")
            params[k.strip()] = _num(v.strip())
    return base.strip(), params


def _family(base):
    if base in TORCHVISION_MODELS:
        return "torchvision"
    if base == "mlp":
        return "mlp"
    if base in BERT_PRESETS or base == "bert":
        return "bert"
    if base in GPT2_PRESETS:
        return "gpt2"
    if base == "llama" or base in LLAMA_PRESETS:
        return "llama"
    raise ValueError(f"unknown model {base!r}")


def family(name):
    return _family(parse_name(name)[0])


# --------------------------------------------------------------------------
# shared HF-style init (normal(0, 0.02), zero bias, LayerNorm 1/0); only to
# get realistic values -- memory does not depend on it.
# --------------------------------------------------------------------------
def _hf_init(module, std=0.02):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Linear, Conv1D)):
                m.weight.normal_(0.0, std)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, std)
                if m.padding_idx is not None:
                    m.weight[m.padding_idx].zero_()
            elif isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()


# --------------------------------------------------------------------------
# MLP
# --------------------------------------------------------------------------
class MLP(nn.Sequential):
    def __init__(self, layers, dim):
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(dim, dim), nn.GELU()]
        super().__init__(*mods)


# --------------------------------------------------------------------------
# BERT  (transformers 4.30 modeling_bert.py, absolute positions, encoder only)
# --------------------------------------------------------------------------
class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"], padding_idx=0)
        self.position_embeddings = nn.Embedding(c["max_pos"], c["hidden"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])
        # HF registers both buffers with persistent=False; they are part of the model.
        self.register_buffer("position_ids", torch.arange(c["max_pos"]).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size()[1]
        position_ids = self.position_ids[:, 0:seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c["heads"]
        self.attention_head_size = c["hidden"] // c["heads"]
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(c["hidden"], self.all_head_size)
        self.key = nn.Linear(c["hidden"], self.all_head_size)
        self.value = nn.Linear(c["hidden"], self.all_head_size)
        self.dropout = nn.Dropout(c["attn_dropout"])

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden"], c["ffn"])

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        return nn.functional.gelu(hidden_states)  # HF GELUActivation: exact erf GELU


class BertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["ffn"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        layer_output = self.output(intermediate_output, attention_output)
        return layer_output


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden"], c["hidden"])
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.dense(first_token_tensor)
        pooled_output = self.activation(pooled_output)
        return pooled_output


def _bert_custom_forward(module):
    # HF's create_custom_forward: the layer called with (hidden_states, attention_mask); head mask and
    # cross-attention inputs are None for an encoder-only BERT.
    def custom_forward(hidden_states, attention_mask, head_mask, encoder_hidden_states, encoder_mask):
        return module(hidden_states, attention_mask)
    return custom_forward


class BertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embeddings = BertEmbeddings(c)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([BertLayer(c) for _ in range(c["layers"])])
        self.encoder.gradient_checkpointing = False  # set by ckpt.apply
        self.pooler = BertPooler(c)

    def forward(self, input_ids):
        batch_size, seq_length = input_ids.size()
        if self.config["mask"] == "hf":
            # HF 4.30 BertModel.forward with attention_mask=None:
            attention_mask = torch.ones((batch_size, seq_length), device=input_ids.device)
            # ModuleUtilsMixin.get_extended_attention_mask (encoder, 2-D mask), in the model's
            # dtype (self.dtype: float32 unless the model was converted, as the bf16 CUDA cases are):
            dtype = self.embeddings.word_embeddings.weight.dtype
            extended_attention_mask = attention_mask[:, None, None, :]
            extended_attention_mask = extended_attention_mask.to(dtype=dtype)
            extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        else:  # mask=none: no mask is built and nothing is added to the scores
            extended_attention_mask = None
        buffered_token_type_ids = self.embeddings.token_type_ids[:, :seq_length]
        token_type_ids = buffered_token_type_ids.expand(batch_size, seq_length)
        hidden_states = self.embeddings(input_ids, token_type_ids)
        for layer_module in self.encoder.layer:
            if self.encoder.gradient_checkpointing and self.training:
                # HF 4.30 BertEncoder: checkpoint(create_custom_forward(layer_module), hidden_states,
                # attention_mask, layer_head_mask, encoder_hidden_states, encoder_attention_mask);
                # the mask is an input (and a saved tensor) of every segment; the Nones cost nothing.
                hidden_states = torch.utils.checkpoint.checkpoint(
                    _bert_custom_forward(layer_module), hidden_states, extended_attention_mask, None, None, None)
            else:
                hidden_states = layer_module(hidden_states, extended_attention_mask)
        sequence_output = hidden_states
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


class BertForSequenceClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = BertModel(c)
        self.dropout = nn.Dropout(c["dropout"])
        self.classifier = nn.Linear(c["hidden"], c["num_labels"])
        _hf_init(self)

    def forward(self, input_ids):
        outputs = self.bert(input_ids)
        pooled_output = outputs[1]
        pooled_output = self.dropout(pooled_output)
        logits = self.classifier(pooled_output)
        return logits


class BertLoss(nn.Module):
    """HF single_label_classification: CrossEntropyLoss()(logits.view(-1, num_labels), labels.view(-1))"""

    def __init__(self, num_labels):
        super().__init__()
        self.num_labels = num_labels
        self.ce = nn.CrossEntropyLoss()

    def forward(self, logits, labels):
        return self.ce(logits.view(-1, self.num_labels), labels.view(-1))


# --------------------------------------------------------------------------
# GPT-2  (transformers 4.30 modeling_gpt2.py)
# --------------------------------------------------------------------------
class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        max_positions = c["n_positions"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = c["hidden"]
        self.num_heads = c["heads"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(c["attn_pdrop"])
        self.resid_dropout = nn.Dropout(c["resid_pdrop"])

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype,
                                                 device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output, attn_weights = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, c):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, c["hidden"])
        self.c_proj = Conv1D(c["hidden"], intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(c["resid_pdrop"])

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        hidden_size = c["hidden"]
        self.ln_1 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.mlp = GPT2MLP(4 * hidden_size, c)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab"], c["hidden"])
        self.wpe = nn.Embedding(c["n_positions"], c["hidden"])
        self.drop = nn.Dropout(c["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(c) for _ in range(c["layers"])])
        self.gradient_checkpointing = False  # set by ckpt.apply
        self.ln_f = nn.LayerNorm(c["hidden"], eps=1e-5)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        past_length = 0
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long,
                                    device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        if self.gradient_checkpointing == "nested":  # ckpt.py: one call over the blocks, each checkpointed
            import ckpt
            hidden_states = ckpt.call(ckpt._checkpointed_blocks(self.h), hidden_states)
        else:
            for block in self.h:
                if self.gradient_checkpointing:  # HF: torch.utils.checkpoint.checkpoint(block, ...)
                    import ckpt  # through ckpt.call: the scheme picks use_reentrant
                    hidden_states = ckpt.call(block, hidden_states)
                else:
                    hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        return hidden_states


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        _hf_init(self)
        self.lm_head.weight = self.transformer.wte.weight  # tie_weights()

    def forward(self, input_ids):
        hidden_states = self.transformer(input_ids)
        lm_logits = self.lm_head(hidden_states)
        return lm_logits


class CausalLMLoss(nn.Module):
    """HF GPT2LMHeadModel / LlamaForCausalLM next-token loss."""

    def forward(self, lm_logits, labels):
        shift_logits = lm_logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        loss_fct = nn.CrossEntropyLoss()
        return loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


# --------------------------------------------------------------------------
# Llama  (transformers 4.31 modeling_llama.py, pretraining_tp=1, eager attention)
# --------------------------------------------------------------------------
class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.max_seq_len_cached = max_position_embeddings
        t = torch.arange(self.max_seq_len_cached, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = torch.get_default_dtype()
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :].to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :].to(dtype), persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached:
            raise ValueError("seq longer than the rotary cache (raise seq= in the model name)")
        return (self.cos_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
                self.sin_cached[:, :, :seq_len, ...].to(dtype=x.dtype))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)  # [seq_len, dim]
    sin = sin.squeeze(1).squeeze(0)  # [seq_len, dim]
    cos = cos[position_ids].unsqueeze(1)  # [bs, 1, seq_len, dim]
    sin = sin[position_ids].unsqueeze(1)  # [bs, 1, seq_len, dim]
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.hidden_size = c["hidden"]
        self.num_heads = c["heads"]
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = c["kv_heads"]
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, max_position_embeddings=c["seq"],
                                               base=c["rope_theta"])

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        kv_seq_len = key_states.shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, position_ids)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        attn_output = self.o_proj(attn_output)
        return attn_output


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = LlamaRMSNorm(c["hidden"], eps=c["eps"])
        self.post_attention_layernorm = LlamaRMSNorm(c["hidden"], eps=c["eps"])

    def forward(self, hidden_states, attention_mask, position_ids):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask, position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


def _make_causal_mask(input_ids_shape, dtype, device, past_key_values_length=0):
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.tensor(torch.finfo(dtype).min, device=device), device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)


def _expand_mask(mask, dtype, tgt_len=None):
    bsz, src_len = mask.size()
    tgt_len = tgt_len if tgt_len is not None else src_len
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"], padding_idx=None)
        self.layers = nn.ModuleList([LlamaDecoderLayer(c) for _ in range(c["layers"])])
        self.gradient_checkpointing = False  # set by ckpt.apply
        self.norm = LlamaRMSNorm(c["hidden"], eps=c["eps"])

    def _prepare_decoder_attention_mask(self, attention_mask, input_shape, inputs_embeds, past_key_values_length):
        combined_attention_mask = None
        if input_shape[-1] > 1:
            combined_attention_mask = _make_causal_mask(input_shape, inputs_embeds.dtype,
                                                        device=inputs_embeds.device,
                                                        past_key_values_length=past_key_values_length)
        if attention_mask is not None:
            expanded_attn_mask = _expand_mask(attention_mask, inputs_embeds.dtype,
                                              tgt_len=input_shape[-1]).to(inputs_embeds.device)
            combined_attention_mask = (expanded_attn_mask if combined_attention_mask is None
                                       else expanded_attn_mask + combined_attention_mask)
        return combined_attention_mask

    def forward(self, input_ids):
        batch_size, seq_length = input_ids.shape
        seq_length_with_past = seq_length
        past_key_values_length = 0
        device = input_ids.device
        position_ids = torch.arange(past_key_values_length, seq_length + past_key_values_length,
                                    dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0).view(-1, seq_length)
        inputs_embeds = self.embed_tokens(input_ids)
        attention_mask = torch.ones((batch_size, seq_length_with_past), dtype=torch.bool,
                                    device=inputs_embeds.device)
        attention_mask = self._prepare_decoder_attention_mask(attention_mask, (batch_size, seq_length),
                                                              inputs_embeds, past_key_values_length)
        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            if self.gradient_checkpointing:  # HF 4.31: checkpoint(decoder_layer, h, mask, position_ids)
                hidden_states = torch.utils.checkpoint.checkpoint(decoder_layer, hidden_states, attention_mask,
                                                                  position_ids)
            else:
                hidden_states = decoder_layer(hidden_states, attention_mask, position_ids)
        hidden_states = self.norm(hidden_states)
        return hidden_states


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        _hf_init(self)

    def forward(self, input_ids):
        hidden_states = self.model(input_ids)
        logits = self.lm_head(hidden_states)
        logits = logits.float()
        return logits


# --------------------------------------------------------------------------
# configs and arithmetic parameter counts
# --------------------------------------------------------------------------
def config(name):
    base, p = parse_name(name)
    fam = _family(base)
    if fam == "bert":
        c = dict(BERT_PRESETS.get(base, BERT_PRESETS["bert-base"]))
        c.update(num_labels=2, dropout=0.1, attn_dropout=0.1, mask="hf")
    elif fam == "gpt2":
        c = dict(GPT2_PRESETS[base])
        c.update(embd_pdrop=0.1, attn_pdrop=0.1, resid_pdrop=0.1)
    elif fam == "llama":
        c = dict(LLAMA_DEFAULTS)
        c.update(LLAMA_PRESETS.get(base, {}))
    elif fam == "mlp":
        c = dict(MLP_DEFAULTS)
    else:
        c = {}
    for k, v in p.items():
        if fam != "torchvision" and k not in c:
            raise ValueError(f"{base}: unknown parameter {k!r} (known: {sorted(c)})")
        c[k] = v
    if fam == "llama" and c.get("kv_heads") is None:
        c["kv_heads"] = c["heads"]
    return c


def param_count(name):
    """Arithmetic parameter count (no instantiation) for mlp/bert/gpt2/llama."""
    base, _ = parse_name(name)
    fam = _family(base)
    c = config(name)
    if fam == "mlp":
        return c["layers"] * (c["dim"] * c["dim"] + c["dim"])
    if fam == "bert":
        H, F_, L = c["hidden"], c["ffn"], c["layers"]
        emb = (c["vocab"] + c["max_pos"] + c["type_vocab"]) * H + 2 * H
        layer = 4 * (H * H + H) + 2 * H + (H * F_ + F_) + (F_ * H + H) + 2 * H
        return emb + L * layer + (H * H + H) + (H * c["num_labels"] + c["num_labels"])
    if fam == "gpt2":
        H, L = c["hidden"], c["layers"]
        emb = (c["vocab"] + c["n_positions"]) * H
        layer = 2 * H + (H * 3 * H + 3 * H) + (H * H + H) + 2 * H + (H * 4 * H + 4 * H) + (4 * H * H + H)
        return emb + L * layer + 2 * H  # lm_head tied
    if fam == "llama":
        H, L, F_ = c["hidden"], c["layers"], c["ffn"]
        hd = H // c["heads"]
        attn = H * H + 2 * H * (c["kv_heads"] * hd) + H * H
        layer = attn + 3 * H * F_ + 2 * H
        return 2 * c["vocab"] * H + L * layer + H
    raise ValueError(f"no arithmetic count for {name}")


# --------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------
def _disable_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0


def _torchvision(base, p, dropout):
    import torchvision.models as tvm
    kw = {}
    if base == "inception_v3":
        kw["aux_logits"] = bool(p.get("aux", True))
        kw["init_weights"] = False
    fn = getattr(tvm, base)
    model = fn(weights=None, **kw)
    if not dropout:
        _disable_dropout(model)
    return model


class InceptionLoss(nn.Module):
    """CE(logits) + 0.4 * CE(aux_logits) when the aux head produced output (training), else CE(logits)."""

    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, out, target):
        if isinstance(out, tuple):  # torchvision InceptionOutputs(logits, aux_logits)
            logits, aux = out
            if aux is not None:
                return self.ce(logits, target) + 0.4 * self.ce(aux, target)
            return self.ce(logits, target)
        return self.ce(out, target)


def default_seq(name):
    if name.startswith(("captured:", "detection:")):
        return None
    fam = family(name)
    return 128 if fam in ("bert", "gpt2", "llama") else None


def build(name, batch, seq=None, dropout=True, checkpoint=None):
    """build_plain(), then activation checkpointing by `checkpoint` (a ckpt.py scheme) if given.
    "captured:NAME" is a module of captured.py (known to headroom only through capture)."""
    if name.startswith("captured:"):
        import captured
        return captured.build(name[len("captured:"):], batch)
    if name.startswith("detection:"):
        import detection
        return detection.build(name[len("detection:"):], batch)
    model, inputs, targets, loss_fn = build_plain(name, batch, seq, dropout)
    if checkpoint is not None:
        import ckpt
        ckpt.apply(model, name, checkpoint)
    return model, inputs, targets, loss_fn


def build_plain(name, batch, seq=None, dropout=True):
    """-> (model, inputs, targets, loss_fn). Model is in train mode; caller flips it.

    All tensors are created here (so they are part of the measured baseline).
    The caller is expected to have called torch.manual_seed(0) before.
    """
    base, p = parse_name(name)
    fam = _family(base)
    c = config(name)
    if fam == "torchvision":
        unknown = set(p) - ({"aux"} if base == "inception_v3" else set())
        if unknown:
            raise ValueError(f"{base}: unknown parameter(s) {sorted(unknown)}")
        model = _torchvision(base, p, dropout)
        size = 299 if base == "inception_v3" else 224
        inputs = torch.randn(batch, 3, size, size)
        targets = torch.randint(0, 1000, (batch,), dtype=torch.int64)
        loss_fn = InceptionLoss() if base == "inception_v3" else nn.CrossEntropyLoss()
        return model, inputs, targets, loss_fn
    if fam == "mlp":
        model = MLP(c["layers"], c["dim"])
        inputs = torch.randn(batch, c["dim"])
        targets = torch.randn(batch, c["dim"])
        return model, inputs, targets, nn.MSELoss()
    if seq is None:
        seq = default_seq(name)
    if fam == "bert":
        if not dropout:
            c["dropout"] = c["attn_dropout"] = 0.0
        model = BertForSequenceClassification(c)
        inputs = torch.randint(0, c["vocab"], (batch, seq), dtype=torch.int64)
        targets = torch.randint(0, c["num_labels"], (batch,), dtype=torch.int64)
        return model, inputs, targets, BertLoss(c["num_labels"])
    if fam == "gpt2":
        if not dropout:
            c["embd_pdrop"] = c["attn_pdrop"] = c["resid_pdrop"] = 0.0
        model = GPT2LMHeadModel(c)
        inputs = torch.randint(0, c["vocab"], (batch, seq), dtype=torch.int64)
        targets = torch.randint(0, c["vocab"], (batch, seq), dtype=torch.int64)
        return model, inputs, targets, CausalLMLoss()
    if fam == "llama":
        model = LlamaForCausalLM(c)
        inputs = torch.randint(0, c["vocab"], (batch, seq), dtype=torch.int64)
        targets = torch.randint(0, c["vocab"], (batch, seq), dtype=torch.int64)
        return model, inputs, targets, CausalLMLoss()
    raise AssertionError(fam)


def has_dropout(name):
    """True if the model (as built with dropout on) contains a dropout with p > 0."""
    fam = family(name)
    if fam in ("bert", "gpt2"):
        return True
    if fam in ("llama", "mlp"):
        return False
    return family(name) == "torchvision" and parse_name(name)[0] in (
        "alexnet", "vgg11", "vgg16", "vgg19", "inception_v3", "mobilenet_v2")
