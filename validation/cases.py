"""The measured cases (stable order = the order of CASES).

A case is a dict with exactly the fields that map onto the headroom CLI:
    model     -> MODEL                    (name, e.g. "resnet50", "mlp:layers=4,dim=256")
    batch     -> --batch N
    seq       -> --seq N                  (null for models without a sequence)
    mode      -> --mode infer|train
    optimizer -> --optimizer sgd|momentum|adam|adamw   (null for infer)
    foreach   -> --foreach | --no-foreach               (null for infer)
    dropout   -> (nothing) | --dropout off
    precision -> always "fp32" (no flag)
and always --device cpu --json.  See README.md.

Coverage (not a full cross product):
  * every model: inference at 2-3 batch sizes + training with >= 2 optimizers;
  * all 8 optimizer x foreach combinations on mlp, llama (small), resnet18, and on
    2-layer variants of bert-base and gpt2 (full presets are measured with fewer
    optimizers because fp32 matmuls run on the slow reference BLAS here);
  * dropout on/off on the models that have dropout (alexnet, vgg*, inception_v3,
    mobilenet_v2, bert, gpt2); "dropout on" for models without dropout is
    identical to off and is recorded as dropout=true.
"""

OPTS = ("sgd", "momentum", "adam", "adamw")

# small Llama used for measurement (GQA: 8 heads, 4 kv heads)
LLAMA_SMALL = "llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000"
# 2-layer bert-base with a small vocabulary (the checkpointing cases whose peak is inside a segment)
BERT_SMALL_VOCAB = "bert-base:layers=2,vocab=1000"
LLAMA_MHA = "llama:hidden=256,layers=2,heads=8,kv_heads=8,ffn=688,vocab=1000"


def _id(c):
    parts = [c["model"], c["mode"], f"b{c['batch']}"]
    if c["seq"] is not None:
        parts.append(f"s{c['seq']}")
    if c["mode"] == "train":
        parts.append(c["optimizer"])
        parts.append("foreach" if c["foreach"] else "no-foreach")
    parts.append("dropout-on" if c["dropout"] else "dropout-off")
    if c.get("precision", "fp32") != "fp32":
        parts.append(c["precision"])
    if c.get("checkpoint_scheme"):
        parts.append("ckpt-" + c["checkpoint_scheme"])
    return "/".join(parts)


def case(model, mode, batch, seq=None, optimizer=None, foreach=None, dropout=True, precision="fp32"):
    if mode == "infer":
        optimizer = foreach = None
    else:
        assert optimizer in OPTS and foreach in (True, False)
    assert precision in ("fp32", "bf16", "amp-bf16")
    c = dict(model=model, mode=mode, batch=batch, seq=seq, optimizer=optimizer, foreach=foreach,
             dropout=dropout, precision=precision)
    c["id"] = _id(c)
    return c


def checkpointed(model, batches, opts, scheme, seq=None, dropout=True):
    """Training with activation checkpointing (validation/ckpt.py scheme). The case records the
    equivalent headroom ranges under "checkpoint" (-> one --checkpoint FIRST..LAST each)."""
    import ckpt
    out = []
    for c in train(model, batches, opts, seq, dropout):
        c["checkpoint_scheme"] = scheme
        c["checkpoint"] = ckpt.ranges(model, scheme)
        if ckpt.impl(scheme) != "reentrant":
            c["checkpoint_impl"] = ckpt.impl(scheme)  # -> --checkpoint-impl
        c["id"] = _id(c)
        out.append(c)
    return out


def infer(model, batches, seq=None, dropout=True):
    return [case(model, "infer", b, seq, dropout=dropout) for b in batches]


def train(model, batches, opts, seq=None, dropout=True):
    """opts: list of (optimizer, foreach)"""
    return [case(model, "train", b, seq, o, f, dropout) for b in batches for (o, f) in opts]


ALL_OPTS = [(o, f) for o in OPTS for f in (False, True)]


def _build():
    C = []
    # ---- MLP: full optimizer x foreach grid ----------------------------
    C += infer("mlp", [1, 8, 64])
    C += train("mlp", [8], ALL_OPTS)
    C += train("mlp", [64], [("sgd", False), ("adam", True)])
    C += infer("mlp:layers=4,dim=256", [1, 32])
    C += train("mlp:layers=4,dim=256", [1, 32], [("momentum", False), ("adamw", True)])
    # ---- torchvision CNNs ----------------------------------------------
    C += infer("alexnet", [1, 4])
    C += train("alexnet", [1, 4], [("sgd", False), ("adam", True)])
    C += train("alexnet", [4], [("sgd", False)], dropout=False)
    for m in ("vgg11", "vgg16", "vgg19"):
        C += infer(m, [1, 2])
        C += train(m, [1], [("momentum", False), ("adamw", True)])
        if m != "vgg16":
            C += train(m, [2], [("sgd", False)])
    C += train("vgg11", [2], [("sgd", False)], dropout=False)
    C += infer("resnet18", [1, 2, 4])
    C += train("resnet18", [2], ALL_OPTS)
    C += train("resnet18", [1, 4], [("sgd", False), ("adam", True)])
    C += infer("resnet34", [1, 4])
    C += train("resnet34", [1, 2], [("momentum", True), ("adamw", False)])
    C += infer("resnet50", [1, 2, 4])
    C += train("resnet50", [1, 2], [("sgd", False), ("adam", True)])
    C += train("resnet50", [4], [("momentum", False)])
    C += infer("resnet101", [1, 2])
    C += train("resnet101", [1], [("sgd", True)])
    C += train("resnet101", [2], [("adam", False)])
    C += infer("resnet152", [1, 2])
    C += train("resnet152", [1], [("adamw", True)])
    C += train("resnet152", [2], [("sgd", False)])
    C += infer("inception_v3", [1, 2])
    C += train("inception_v3", [2], [("sgd", False), ("adam", True)])
    C += train("inception_v3", [4], [("sgd", False)])
    C += train("inception_v3", [2], [("sgd", False)], dropout=False)
    C += infer("inception_v3:aux=false", [1, 2])
    C += train("inception_v3:aux=false", [1], [("momentum", False), ("adamw", True)])
    C += infer("mobilenet_v2", [1, 2, 4])
    C += train("mobilenet_v2", [1, 2, 4], [("sgd", False), ("adam", True)])
    C += train("mobilenet_v2", [2], [("sgd", False)], dropout=False)
    C += infer("densenet121", [1, 2])
    C += train("densenet121", [1], [("momentum", False), ("adam", True)])
    C += train("densenet121", [2], [("adam", True)])
    C += infer("vit_b_16", [1, 2])
    C += train("vit_b_16", [1], [("sgd", False), ("adamw", True)])
    # ---- transformers (fp32 matmuls run on the reference BLAS here: slow) ---
    C += infer("bert-base", [1, 2], seq=128)
    C += train("bert-base", [1], [("adam", True)], seq=128)
    C += train("bert-base", [2], [("sgd", False)], seq=32)
    C += train("bert-base:layers=2", [2], ALL_OPTS, seq=64)
    C += train("bert-base:layers=2", [2], [("adam", False)], seq=64, dropout=False)
    C += train("bert-base:layers=2,mask=none", [2], [("adam", False)], seq=64)
    C += infer("bert-large", [1], seq=128)
    C += train("bert-large", [1], [("sgd", False)], seq=32)
    C += infer("gpt2", [1, 2], seq=128)
    C += train("gpt2", [1], [("adam", True)], seq=128)
    C += train("gpt2", [2], [("momentum", False)], seq=16)
    C += train("gpt2:layers=2", [2], [("sgd", True), ("momentum", False), ("adam", True), ("adamw", False)], seq=32)
    C += train("gpt2:layers=2", [2], [("sgd", True)], seq=32, dropout=False)
    C += infer("gpt2-medium", [1], seq=128)
    C += infer("gpt2-large", [1], seq=64)
    C += infer("gpt2-xl", [1], seq=32)
    for m in (LLAMA_SMALL,):
        C += infer(m, [1, 2, 4], seq=128)
        C += train(m, [2], ALL_OPTS, seq=128)
        C += train(m, [1, 4], [("sgd", False), ("adamw", True)], seq=128)
    C += infer(LLAMA_MHA, [2], seq=128)
    C += train(LLAMA_MHA, [2], [("adam", False)], seq=128)
    # ---- activation checkpointing (torch.utils.checkpoint, reentrant) ----
    SGD_ADAM = [("sgd", False), ("adam", True)]
    C += checkpointed("mlp", [8], SGD_ADAM, "seg8")
    C += checkpointed("resnet18", [2], SGD_ADAM, "blocks")
    C += checkpointed("resnet18", [2], SGD_ADAM, "layers")
    C += checkpointed("gpt2:layers=2", [2], SGD_ADAM, "blocks", seq=32)
    C += checkpointed(LLAMA_SMALL, [2], SGD_ADAM, "blocks", seq=128)
    # momentum: the peak moves to step 2's backward (gradients + momentum + recomputed segment)
    C += checkpointed("mlp", [64], [("momentum", False)], "seg8")
    C += checkpointed("resnet18", [4], [("momentum", True)], "blocks")
    C += checkpointed("gpt2:layers=2", [2], [("momentum", False)], "blocks", seq=32)
    # BERT: the extended attention mask is an input of every segment (HF's BertEncoder loop)
    C += checkpointed("bert-base:layers=2", [2], SGD_ADAM, "blocks", seq=32)
    C += checkpointed("bert-base:layers=2", [4], [("sgd", False)], "blocks", seq=64)
    C += checkpointed("bert-base:layers=2", [2], [("sgd", False)], "blocks", seq=64, dropout=False)
    C += checkpointed("bert-base:layers=2", [2], [("momentum", False)], "blocks", seq=64)
    C += checkpointed("bert-base:layers=2,mask=none", [2], [("sgd", False)], "blocks", seq=32)
    # with bert-base's 30522-token vocabulary the peak is the word-embedding gradient, after every
    # segment; a 1000-token vocabulary moves it into layer 0's re-run and backward
    C += checkpointed(BERT_SMALL_VOCAB, [2], [("sgd", False), ("momentum", False)], "blocks", seq=128)
    C += checkpointed(BERT_SMALL_VOCAB, [2], [("sgd", False)], "blocks", seq=128, dropout=False)
    C += checkpointed(BERT_SMALL_VOCAB + ",mask=none", [2], [("sgd", False)], "blocks", seq=128)
    # nested checkpoint calls (reentrant): an outer call whose function checkpoints inner runs
    C += checkpointed("mlp", [8], SGD_ADAM, "nested")
    C += checkpointed("resnet18", [2], [("sgd", False)], "nested")
    C += checkpointed("gpt2:layers=2", [2], [("sgd", False)], "nested", seq=32)
    # a 1000-token vocabulary and seq 128 move GPT-2's peak into block 0's backward inside the
    # outer call's re-run (with the 50,257-token one it is the embedding gradient, after both)
    C += checkpointed("gpt2:layers=2,vocab=1000", [2], [("sgd", False)], "nested", seq=128)
    # non-reentrant checkpoint calls (use_reentrant=False): the forward keeps each call's inputs
    # and RNG state, the first unpack in the backward re-runs the call and keeps what it saves
    C += checkpointed("mlp", [8], SGD_ADAM, "seg8-nr")
    C += checkpointed("mlp", [8], [("sgd", False)], "nested-nr")
    C += checkpointed("resnet18", [2], [("sgd", False)], "blocks-nr")
    C += checkpointed("resnet18", [2], [("sgd", False)], "nested-nr")
    C += checkpointed("gpt2:layers=2", [2], [("sgd", False)], "blocks-nr", seq=32)
    C += checkpointed("gpt2:layers=2", [2], [("sgd", False)], "nested-nr", seq=32)
    # peak inside the nested backward (as the reentrant vocab=1000 case above)
    C += checkpointed("gpt2:layers=2,vocab=1000", [2], [("sgd", False)], "nested-nr", seq=128)
    C += checkpointed("gpt2:layers=2,vocab=1000", [2], [("sgd", False)], "blocks-nr", seq=128)
    # inner calls that end the outer one: non-reentrant, each re-runs from its own closure before
    # the outer re-run calls them again under fresh hooks; reentrant, inside the outer's backward.
    # Batch 1024 puts the peak inside them (non-reentrant: the re-run of 18..25; reentrant: the
    # backward of 10..17 inside the outer call's), not in the weights' gradients after them.
    C += checkpointed("mlp", [1024], [("sgd", False)], "nested-tail")
    C += checkpointed("mlp", [1024], [("sgd", False)], "nested-tail-nr")
    return C


def _build_holdout():
    """CUDA only (cuda_run.py --suite holdout -> measured_cuda_holdout.json): the sizes and
    precisions people train at, measured after the CUDA rules were fitted on CASES, to say how
    well they carry over. Never fitted on: a miss here is reported, not tuned away."""
    H = []
    for model, b, seq in (("resnet50", 32, None), ("vgg16", 16, None), ("mobilenet_v2", 64, None),
                          ("densenet121", 16, None), ("inception_v3", 16, None), ("vit_b_16", 16, None),
                          ("bert-base", 8, 128), ("gpt2", 8, 256), (LLAMA_SMALL, 8, 512)):
        H.append(case(model, "train", b, seq, "adamw" if seq or model == "vit_b_16" else "momentum", True))
        H.append(case(model, "train", b, seq, "adamw" if seq or model == "vit_b_16" else "momentum", True,
                      precision="amp-bf16"))
    for model, b, seq in (("resnet50", 64, None), ("vit_b_16", 64, None), ("bert-base", 32, 128),
                          ("gpt2", 8, 512)):
        H.append(case(model, "infer", b, seq))
        H.append(case(model, "infer", b, seq, precision="bf16"))
    H.append(case("resnet18", "train", 128, None, "sgd", False))
    H.append(case(LLAMA_SMALL, "train", 8, 512, "adamw", True, precision="bf16"))
    H.append(case("gpt2-medium", "train", 4, 256, "adamw", True, precision="amp-bf16"))
    H.append(case("bert-large", "train", 4, 128, "adamw", True, precision="amp-bf16"))
    return H


CASES = _build()
HOLDOUT = _build_holdout()
_ids = [c["id"] for c in CASES + HOLDOUT]
assert len(set(_ids)) == len(_ids), "duplicate case ids"


def heavy_gb(c):
    """Rough RAM need in GiB, for the scheduler only (not a prediction)."""
    big = {"gpt2-xl": 8, "gpt2-large": 5, "bert-large": 6, "gpt2-medium": 6, "vgg16": 4, "vgg19": 4,
           "vgg11": 4}
    return big.get(c["model"].split(":")[0], 2)
