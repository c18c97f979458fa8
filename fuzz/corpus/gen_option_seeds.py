#!/usr/bin/python3
"""Writes the seeds of option_text_fuzz: one file per parser, its first byte the parser's number
(fuzz/option_text_fuzz.cc's switch), the rest a valid text for it, so the fuzzer starts from
inputs that reach past the first check. crash-positive-newline, kept beside them, is the
fuzzer's first find (a newline in --batch made a two-line message). Run: /usr/bin/python3 gen_option_seeds.py"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "options")
SEEDS = {
    "positive": (0, "128"),
    "margin": (1, "5%"),
    "fraction": (2, "0.3"),
    "lora": (3, "r=16,alpha=32,targets=q_proj,v_proj,dropout=0.05"),
    "loss": (4, "ce:out + 0.4*ce:aux"),
    "spec": (5, "gpt2:layers=2,hidden=64,heads=2,vocab=128"),
    "memory": (6, "1.1GiB"),
    "bandwidth": (7, "400Gb/s"),
    "interval": (8, "100ms"),
    "checkpoint": (9, "transformer.h.0.ln_1..transformer.h.1.mlp.c_proj;blocks"),
    "watch_csv": (10, "t_ms,device,device_used_bytes,device_total_bytes,process_used_bytes,gpu_util_pct,memory_util_pct\n"
                      "0,0,1048576,85899345920,524288,10,5\n100,0,2097152,85899345920,1048576,50,20\n"),
    "watch_jsonl": (11, '{"t_ms": 0, "device": 0, "device_used_bytes": 1048576, "device_total_bytes": 85899345920}\n'),
}
os.makedirs(OUT, exist_ok=True)
for name, (which, text) in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([which]) + text.encode())
