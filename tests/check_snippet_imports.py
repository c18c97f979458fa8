"""Checks a Python snippet headroom emitted (--emit fsdp): it compiles, and every name it imports
from torch is defined in the installed torch's source. The names are looked up in the source
text rather than imported: torch 1.13's torch.distributed.fsdp does not import under Python 3.11
(a dataclass in torch.distributed._shard has a mutable default), which is also why FSDP cannot
be measured on this machine (docs/distributed.md).

    /usr/bin/python3 tests/check_snippet_imports.py SNIPPET.py [NAME=VALUE ...]

NAME=VALUE: a module-level constant the snippet must define with that value (evaluated from its
assignment, e.g. GLOBAL_BATCH_SIZE=128). Exit 0 when everything holds, 1 with a message otherwise.
"""
import ast
import importlib.util
import os
import sys


def torch_source(module):
    root = os.path.dirname(importlib.util.find_spec("torch").origin)
    rel = module.split(".")[1:]
    base = os.path.join(root, *rel)
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.exists(path):
            return open(path).read()
    raise SystemExit(f"{module}: no such module in {root}")


def main():
    path = sys.argv[1]
    src = open(path).read()
    tree = ast.parse(src, path)
    compile(src, path, "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("torch"):
            text = torch_source(node.module)
            for alias in node.names:
                n = alias.name
                if not any(p in text for p in (f"def {n}(", f"class {n}(", f"class {n}:", f"{n} = ", f"import {n}", f"    {n},")):
                    raise SystemExit(f"{node.module} does not define {n}")
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            consts[node.targets[0].id] = eval(compile(ast.Expression(node.value), path, "eval"), {}, dict(consts))
    for want in sys.argv[2:]:
        name, value = want.split("=", 1)
        if str(consts.get(name)) != value:
            raise SystemExit(f"{name} is {consts.get(name)!r}, expected {value}")
    if "wrap" not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}:
        raise SystemExit("no wrap(model) function")


if __name__ == "__main__":
    main()
