#!/usr/bin/python3
"""Fine-tuning with frozen weights and LoRA adapters, measured on CPU (PyTorch 1.13).

The model is validation/hf_generate.py's transformers-v4.46-style LlamaForCausalLM (eager
attention) run as a training step: model(input_ids) without a cache, all logits,
ForCausalLMLoss (logits[..., :-1, :].contiguous(), labels[..., 1:].contiguous(), cross_entropy).
LoRA follows peft's lora.Linear (peft/tuners/lora/layer.py): base_layer, then
result = result + lora_B(lora_A(lora_dropout(x))) * scaling, every non-adapter parameter frozen
(mark_only_lora_as_trainable). --freeze cases set requires_grad=False on the parameters whose
name matches a regular expression (named_parameters() order). Optimizer: torch.optim.AdamW over
the parameters that require grad, single-tensor (foreach=False), two steps.

    /usr/bin/python3 validation/hf_lora.py            # -> validation/measured_lora.json
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# (config, batch, seq, lora "r,alpha,dropout,targets" or None, freeze regex or None)
CASES = [
    ("tiny-llama-gqa.json", 2, 32, (8, 16.0, 0.0, ["q_proj", "v_proj"]), None),
    ("tiny-llama-gqa.json", 1, 48, (4, 8.0, 0.0, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]), None),
    ("tiny-llama-mha.json", 2, 16, (16, 32.0, 0.1, ["q_proj", "v_proj"]), None),
    ("tiny-llama-gqa.json", 2, 32, None, r"embed_tokens|layers\.0\."),
    ("tiny-llama-mha.json", 1, 24, None, r"lm_head"),
]


def case_id(c):
    lora = "none" if c[3] is None else f"r{c[3][0]}-a{c[3][1]}-d{c[3][2]}-{'+'.join(c[3][3])}"
    return f"{c[0]}/b{c[1]}/s{c[2]}/lora-{lora}/freeze-{c[4]}"


def wrap_lora(model, r, alpha, dropout, targets):
    import torch
    from torch import nn

    class LoraLinear(nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base_layer = base
            self.lora_dropout = nn.ModuleDict({"default": nn.Dropout(p=dropout) if dropout > 0 else nn.Identity()})
            self.lora_A = nn.ModuleDict({"default": nn.Linear(base.in_features, r, bias=False)})
            self.lora_B = nn.ModuleDict({"default": nn.Linear(r, base.out_features, bias=False)})
            nn.init.zeros_(self.lora_B["default"].weight)
            self.scaling = alpha / r

        def forward(self, x):
            result = self.base_layer(x)
            torch_result_dtype = result.dtype
            x = x.to(self.lora_A["default"].weight.dtype)
            result = result + self.lora_B["default"](self.lora_A["default"](self.lora_dropout["default"](x))) * self.scaling
            result = result.to(torch_result_dtype)
            return result

    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child_name in targets:
                setattr(module, child_name, LoraLinear(child))
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad_(False)


def measure(case):
    import torch
    from torch import nn
    import memtrace
    import hf_generate
    name, batch, seq, lora, freeze = case
    cfg = json.load(open(os.path.join(HERE, "hf-configs", name)))
    torch.manual_seed(0)
    rec = memtrace.Recorder(use_shim=False)
    with rec:
        model, _ = hf_generate.build_model(cfg)
        if lora is not None:
            wrap_lora(model, *lora)
        if freeze is not None:
            for n, p in model.named_parameters():
                if re.search(freeze, n):
                    p.requires_grad_(False)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, foreach=False)
        x = torch.randint(0, cfg["vocab_size"], (batch, seq))
        labels = torch.randint(0, cfg["vocab_size"], (batch, seq))
        vocab = cfg["vocab_size"]
        rec.mark("P:baseline")
        for s in (1, 2):
            rec.mark(f"P:step{s}:forward")
            logits, _ = model(x, None, num_logits_to_keep=0)
            logits = logits.float()
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss = nn.CrossEntropyLoss()(shift_logits.view(-1, vocab), shift_labels.view(-1))
            del shift_logits, shift_labels
            rec.mark(f"P:step{s}:backward")
            loss.backward()
            del logits, loss
            rec.mark(f"P:step{s}:optimizer")
            opt.step()
            opt.zero_grad(set_to_none=True)
        rec.mark("P:end")
    rp = memtrace.Replay(rec.trace, rec.marks)
    phases = [p for p in rp.phases if p["name"] not in ("start", "baseline", "end")]
    peak = max(p["peak"] for p in phases)
    first = next(p for p in phases if p["peak"] == peak)
    return dict(config=name, batch=batch, seq=seq,
                lora=None if lora is None else dict(r=lora[0], alpha=lora[1], dropout=lora[2], targets=lora[3]),
                freeze=freeze, trainable_parameters=sum(p.numel() for p in trainable),
                parameters=sum(p.numel() for p in model.parameters()),
                peak_bytes=peak, peak_phase=first["name"], phase_peaks={p["name"]: p["peak"] for p in phases})


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        c = next(c for c in CASES if case_id(c) == sys.argv[2])
        print("RESULT " + json.dumps(measure(c), sort_keys=True), flush=True)
        return
    results = []
    for c in CASES:
        out = subprocess.run(["/usr/bin/python3", __file__, "--case", case_id(c)], capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        if out.returncode != 0:
            sys.exit(out.stderr)
        line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
        results.append(json.loads(line[len("RESULT "):]))
        print(case_id(c), results[-1]["peak_bytes"], results[-1]["peak_phase"], flush=True)
    with open(os.path.join(HERE, "measured_lora.json"), "w") as f:
        json.dump(dict(method="memtrace.Recorder replay of c10 CPU allocator events (validation/README.md)",
                       cases=results), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
