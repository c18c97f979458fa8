#!/usr/bin/python3
"""Hugging Face generate() measured on CUDA with the installed transformers (docs/llm.md).

    python3 validation/cuda_generate.py [--out validation/measured_generate_cuda.json] [--jobs N]
                                        [--trace-dir DIR] [--list]

hf_generate.py measures generation on CPU with PyTorch 1.13, which has no SDPA and no fp16/bf16
kernels worth the name: there the model is written out call by call. Here the real
transformers LlamaForCausalLM (from validation/hf-configs, random weights) runs
model.generate() on cuda:0 with the attention implementation, dtype and cache of each case,
greedy or beam search, exactly `new_tokens` new tokens (min_new_tokens = max_new_tokens, no
eos). Each case runs in its own process. A forward pre-hook on the model marks each forward:
the peak of torch.cuda.max_memory_allocated since the previous mark is the peak of the
previous phase (the prompt's setup before the prefill, then prefill, decode1, ...), and the
stop mark is the end of generate(). The weights and the prompt are allocated before the
baseline. With --trace-dir each case's allocator trace is written as cuda_run.py writes it.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _cases():
    out = []
    for cfg in ("tiny-llama-gqa.json", "tiny-llama-mha.json"):
        for dtype in ("float32", "bfloat16", "float16"):
            for attn in ("eager", "sdpa"):
                out.append(dict(config=cfg, dtype=dtype, attention=attn, batch=2, prompt=16, new_tokens=6,
                                beams=1, cache="dynamic"))
    for attn in ("eager", "sdpa"):
        out.append(dict(config="tiny-llama-gqa.json", dtype="bfloat16", attention=attn, batch=4, prompt=128,
                        new_tokens=32, beams=1, cache="dynamic"))
        out.append(dict(config="tiny-llama-gqa.json", dtype="bfloat16", attention=attn, batch=1, prompt=16,
                        new_tokens=6, beams=2, cache="dynamic"))
        out.append(dict(config="tiny-llama-gqa.json", dtype="bfloat16", attention=attn, batch=2, prompt=16,
                        new_tokens=6, beams=1, cache="static"))
    for c in out:
        c["id"] = (f"{c['config'][:-5]} {c['dtype']} {c['attention']} b{c['batch']} p{c['prompt']} "
                   f"n{c['new_tokens']} k{c['beams']} {c['cache']}")
    return out


CASES = _cases()


def worker(case_id, trace_path):
    import torch
    import transformers

    import cuda_run
    c = next(c for c in CASES if c["id"] == case_id)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    if trace_path:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(os.path.join(HERE, "hf-configs", c["config"]))
    dtype = getattr(torch, c["dtype"])
    try:  # transformers >= 4.56 names it dtype
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=c["attention"])
    except TypeError:
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype,
                                                              attn_implementation=c["attention"])
    model.eval()
    model.to(dev)
    prompt = torch.randint(1, config.vocab_size, (c["batch"], c["prompt"])).to(dev)
    marks, marks_us = [], []

    def mark(name):
        torch.cuda.synchronize(dev)
        marks.append(dict(mark=name, allocated_peak_bytes=torch.cuda.max_memory_allocated(dev),
                          allocated_bytes=torch.cuda.memory_allocated(dev),
                          reserved_peak_bytes=torch.cuda.max_memory_reserved(dev)))
        torch.cuda.reset_peak_memory_stats(dev)
        marks_us.append((name, time.time_ns() // 1000))

    forwards = [0]

    def pre_hook(module, args, kwargs):
        forwards[0] += 1
        mark("setup" if forwards[0] == 1 else ("prefill" if forwards[0] == 2 else f"decode{forwards[0] - 2}"))

    mark("baseline")
    handle = model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    gen = dict(max_new_tokens=c["new_tokens"], min_new_tokens=c["new_tokens"], do_sample=False,
               num_beams=c["beams"], eos_token_id=None, pad_token_id=0, use_cache=True)
    if c["cache"] == "static":
        # generate() would compile the forward for a static cache (transformers >= 4.47): eager here.
        gen.update(cache_implementation="static", disable_compile=True)
    with torch.no_grad():
        out = model.generate(prompt, **gen)
    # Each mark is named by the phase that ended there; the last one ends the last forward.
    mark("setup" if forwards[0] == 0 else ("prefill" if forwards[0] == 1 else f"decode{forwards[0] - 1}"))
    handle.remove()
    del out
    phases = {m["mark"]: m["allocated_peak_bytes"] for m in marks[1:]}
    measured = dict(baseline_bytes=marks[0]["allocated_bytes"],
                    peak_bytes=max(m["allocated_peak_bytes"] for m in marks[1:]),
                    reserved_peak_bytes=max(m["reserved_peak_bytes"] for m in marks[1:]),
                    forward_peaks=phases, forwards=forwards[0], marks=marks)
    if trace_path:
        trace = cuda_run.compact_trace(torch.cuda.memory._snapshot(), marks_us)
        trace["id"] = case_id
        with open(trace_path, "w") as f:
            json.dump(trace, f, separators=(",", ":"))
    print("RESULT " + json.dumps(dict(id=case_id, measured=measured)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "measured_generate_cuda.json"))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--trace", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.trace)
    if a.list:
        for c in CASES:
            print(c["id"])
        return
    import torch
    import transformers

    import cuda_run
    if not torch.cuda.is_available():
        sys.exit("cuda_generate: PyTorch sees no CUDA device; nothing measured")
    if a.trace_dir:
        os.makedirs(a.trace_dir, exist_ok=True)

    def run_one(i_c):
        i, c = i_c
        trace = os.path.join(a.trace_dir, f"g{i}.json") if a.trace_dir else None
        return (c,) + cuda_run.run_worker(__file__, c["id"], trace)

    results, errors = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for c, p, res in pool.map(run_one, enumerate(CASES)):
            if p.returncode != 0 or res is None:
                errors.append(dict(id=c["id"], error=(p.stderr or p.stdout)[-3000:]))
                print(f"ERROR {c['id']}\n{errors[-1]['error']}", flush=True)
                continue
            results.append(dict(c, measured=res["measured"]))
            print(f"{c['id']}: peak {res['measured']['peak_bytes']:,} baseline {res['measured']['baseline_bytes']:,}",
                  flush=True)
    p = torch.cuda.get_device_properties(0)
    header = dict(gpu_name=torch.cuda.get_device_name(0), gpu_memory_bytes=p.total_memory,
                  torch_version=torch.__version__, cuda_version=torch.version.cuda,
                  transformers_version=transformers.__version__,
                  date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  method="fresh process per case on cuda:0; model.generate() with a forward pre-hook marking "
                         "each forward; torch.cuda.max_memory_allocated per phase (peaks reset at each mark)",
                  errors=[e["id"] for e in errors], units="bytes")
    with open(a.out + ".tmp", "w") as f:
        json.dump(dict(header=header, cases=results, errors=errors), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(a.out + ".tmp", a.out)
    print(f"wrote {a.out}: {len(results)} measured, {len(errors)} errors")


if __name__ == "__main__":
    main()
