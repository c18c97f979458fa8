"""Activation checkpointing for the validation cases: torch.utils.checkpoint.checkpoint
(reentrant: use_reentrant=True and preserve_rng_state=True, both 1.13's defaults) on
contiguous runs of a model's modules. A scheme name ending in "-nr" makes the same calls with
use_reentrant=False (1.13's _checkpoint_without_reentrant: saved_tensors_hooks that keep nothing
in the forward and re-run the function at the first unpack in the backward); headroom predicts
those with --checkpoint-impl non-reentrant (impl(scheme)).

A scheme names what is checkpointed; `ranges(model, scheme)` gives the equivalent headroom
`--checkpoint FIRST..LAST` op ranges (headroom's op names), `apply(model, name, scheme)` rewires the
built model's forward so that the module calls are exactly the original forward's, with the
checkpointed runs called through checkpoint(). A segment never starts at the model input: with
reentrant checkpoint, a segment none of whose inputs requires grad returns outputs that do not
require grad, and its parameters would get no gradients.

Schemes:
  mlp     "seg8":   modules 2..9, 10..17, 18..25 of the 32-module Sequential (4 layers each)
          "nested": modules 2..25 in one call, which checkpoints 2..9 and 10..17 inside it
          "nested-tail": modules 2..25 in one call, which checkpoints 10..17 and 18..25 inside
                    it: the inner calls end the outer one, so in the backward their nodes come
                    first (non-reentrant: each inner call re-runs from its own closure before
                    the outer call's re-run, which then calls them again under fresh hooks)
  resnet  "blocks": every BasicBlock/Bottleneck;  "layers": every layerN (a run of blocks)
          "nested": every layerN, whose function checkpoints each of its blocks
  gpt2, llama, bert "blocks": every transformer block (HF's gradient_checkpointing loop; BERT's
                    passes the extended attention mask as an input of every segment)
  gpt2    "nested": all blocks in one call, whose function checkpoints each block

Nested schemes are real nested checkpoint calls (reentrant): in the forward the inner calls run
under the outer one's no_grad; when the backward reaches the outer call, its re-run with grad
makes the inner calls checkpoints of their own. Their ranges list the outer range and the inner
ones (headroom accepts nested --checkpoint ranges).
"""
import functools
import types

import torch
from torch.utils.checkpoint import checkpoint

# use_reentrant of every checkpoint call made through call(); set by apply() from the scheme.
_REENTRANT = True


def call(function, *args):
    """torch.utils.checkpoint.checkpoint with the implementation the applied scheme names."""
    return checkpoint(function, *args, use_reentrant=_REENTRANT)


def base_scheme(scheme):
    return scheme[:-3] if scheme.endswith("-nr") else scheme


def impl(scheme):
    """The headroom --checkpoint-impl of a scheme."""
    return "non-reentrant" if scheme.endswith("-nr") else "reentrant"


MLP_SEGMENTS = ((2, 9), (10, 17), (18, 25))
# scheme -> (outer call's modules, the runs its function checkpoints inside it)
MLP_NESTED = {"nested": ((2, 25), ((2, 9), (10, 17))), "nested-tail": ((2, 25), ((10, 17), (18, 25)))}
RESNET_BLOCKS = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}


def _family(model_name):
    base = model_name.split(":")[0]
    if base == "mlp":
        return "mlp"
    if base.startswith("resnet"):
        return "resnet"
    if base.startswith("gpt2"):
        return "gpt2"
    if base == "llama":
        return "llama"
    if base.startswith("bert"):
        return "bert"
    raise ValueError(f"no checkpoint scheme for {model_name}")


def _params(model_name):
    _, _, rest = model_name.partition(":")
    return dict(kv.split("=") for kv in rest.split(",")) if rest else {}


def ranges(model_name, scheme):
    """headroom --checkpoint ranges equivalent to apply(model_name, scheme)."""
    scheme = base_scheme(scheme)
    fam = _family(model_name)
    if fam == "mlp" and scheme == "seg8":
        return [f"{a}..{b}" for a, b in MLP_SEGMENTS]
    if fam == "mlp" and scheme in MLP_NESTED:
        outer, inner = MLP_NESTED[scheme]
        return [f"{a}..{b}" for a, b in (outer,) + inner]
    if fam == "resnet" and scheme == "nested":
        return ranges(model_name, "layers") + ranges(model_name, "blocks")
    if fam == "resnet" and scheme in ("blocks", "layers"):
        blocks = RESNET_BLOCKS[model_name]
        last_relu = "relu#2" if model_name in ("resnet18", "resnet34") else "relu#3"
        out = []
        for li, n in enumerate(blocks, start=1):
            if scheme == "layers":
                out.append(f"layer{li}.0.conv1..layer{li}.{n - 1}.{last_relu}")
            else:
                out += [f"layer{li}.{i}.conv1..layer{li}.{i}.{last_relu}" for i in range(n)]
        return out
    layers = int(_params(model_name).get("layers", 0))
    if fam in ("gpt2", "llama", "bert") and layers <= 0:
        raise ValueError(f"{model_name}: give layers= explicitly for a per-block scheme")
    if fam == "gpt2" and scheme == "nested":
        return ([f"transformer.h.0.ln_1..transformer.h.{layers - 1}.add_mlp"] +
                ranges(model_name, "blocks"))
    if fam == "gpt2" and scheme == "blocks":
        return [f"transformer.h.{i}.ln_1..transformer.h.{i}.add_mlp" for i in range(layers)]
    if fam == "llama" and scheme == "blocks":
        return [f"model.layers.{i}.input_layernorm.pow..model.layers.{i}.add_mlp" for i in range(layers)]
    if fam == "bert" and scheme == "blocks":
        return [f"bert.encoder.layer.{i}.attention.self.query..bert.encoder.layer.{i}.output.LayerNorm"
                for i in range(layers)]
    raise ValueError(f"unknown checkpoint scheme {scheme!r} for {model_name}")


def _mlp_forward(self, x):
    # nn.Sequential.forward (`for module in self: input = module(input)`), with runs checkpointed.
    mods = list(self)

    def run(a, b):
        def f(h):
            for m in mods[a:b + 1]:
                h = m(h)
            return h
        return f

    i = 0
    for a, b in MLP_SEGMENTS:
        for m in mods[i:a]:
            x = m(x)
        x = call(run(a, b), x)
        i = b + 1
    for m in mods[i:]:
        x = m(x)
    return x


def _mlp_nested_forward(scheme, self, x):
    # One checkpoint call over the outer modules whose function checkpoints the inner runs.
    mods = list(self)
    (a0, b0), inner = MLP_NESTED[scheme]

    def run(a, b):
        def f(h):
            for m in mods[a:b + 1]:
                h = m(h)
            return h
        return f

    def outer(h):
        i = a0
        for a, b in inner:
            for m in mods[i:a]:
                h = m(h)
            h = call(run(a, b), h)
            i = b + 1
        for m in mods[i:b0 + 1]:
            h = m(h)
        return h

    for m in mods[:a0]:
        x = m(x)
    x = call(outer, x)
    for m in mods[b0 + 1:]:
        x = m(x)
    return x


def _checkpointed_blocks(blocks):
    # A function running `blocks` with each one checkpointed (the body of a nested call).
    def f(h):
        for block in blocks:
            h = call(block, h)
        return h
    return f


def _resnet_forward(scheme):
    # torchvision 0.14 ResNet._forward_impl, with blocks (or whole layerN) checkpointed.
    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            if scheme == "layers":
                x = call(layer, x)
            elif scheme == "nested":
                x = call(_checkpointed_blocks(layer), x)
            else:
                for block in layer:
                    x = call(block, x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x
    return forward


def apply(model, model_name, scheme):
    global _REENTRANT
    ranges(model_name, scheme)  # validates the scheme
    _REENTRANT = impl(scheme) == "reentrant"
    scheme = base_scheme(scheme)
    fam = _family(model_name)
    if fam == "mlp":
        forward = functools.partial(_mlp_nested_forward, scheme) if scheme in MLP_NESTED else _mlp_forward
        model.forward = types.MethodType(forward, model)
    elif fam == "resnet":
        model.forward = types.MethodType(_resnet_forward(scheme), model)
    elif fam == "gpt2":
        model.transformer.gradient_checkpointing = "nested" if scheme == "nested" else True
    elif fam == "llama":
        model.model.gradient_checkpointing = True
    elif fam == "bert":
        model.bert.encoder.gradient_checkpointing = True
    return model
