"""A user's own model and batches in the training-step engine.

    train.model=package.module:factory     factory(train) -> torch.nn.Module
    train.batch=package.module:function    function(train, rank, world_size, seed) -> iterable of (inputs, targets)

The engine calls the model as `model(inputs, targets)` and takes the loss as the
returned tensor, its `.loss` (a Hugging Face ModelOutput) or the last element of a
tuple (nanoGPT's `(logits, loss)`). Its blocks are the first `nn.ModuleList` in the
module tree (nanoGPT's and Hugging Face GPT-2's `transformer.h`, Llama's
`model.layers`, the preset's `h`): activation checkpointing wraps each of them, and
FSDP2 shards each as a unit of its own.

`import_path` is the one place where an import path becomes an object (the training
step and any other workload that takes user code by import path use it);
`check_import_path` checks one at plan time without running the module, so the
driver imports neither torch nor the user's code. Stdlib only at import time.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
from typing import Any, Iterator, Optional, Tuple


def import_path(path: str, key: str) -> Any:
    """The object that 'package.module:name' names; an error that names `key` when there is none."""
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:                 # ImportError, or whatever the module raised while importing
        raise RuntimeError(f"{key}={path!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from exc
    if not hasattr(module, name):
        raise RuntimeError(f"{key}={path!r}: {module_name!r} has no {name!r}")
    return getattr(module, name)


def check_import_path(path: str, key: str) -> Optional[str]:
    """Why `path` cannot name anything, found without running the module: the module is not
    on the path, or its source defines no top-level `name`. None when it looks fine (a module
    that makes names dynamically, or is not Python source, is left to the trial)."""
    module_name, _, name = path.partition(":")
    try:
        spec = importlib.util.find_spec(module_name)     # imports the parent packages only
    except (ImportError, ValueError) as exc:
        return f"{key}={path!r}: cannot find module {module_name!r} ({exc}); is its folder on PYTHONPATH?"
    if spec is None:
        return f"{key}={path!r}: cannot find module {module_name!r}; is its folder on PYTHONPATH (run from it)?"
    names = _top_level_names(spec.origin)
    if names is not None and name not in names:
        return f"{key}={path!r}: {module_name!r} ({spec.origin}) defines no {name!r} at its top level"
    return None


def _top_level_names(origin: Optional[str]) -> Optional[set]:
    """Names a Python source file binds at its top level; None when that cannot be known."""
    if not origin or not origin.endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), origin)
    except (OSError, SyntaxError, ValueError):
        return None                                 # the trial's import says what is wrong
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return None if "__getattr__" in names else names


# -- in the trial (torch is imported by then) -------------------------------------------
def build_user_model(train):
    """The user's model, built by its factory from the trial's train config."""
    import torch

    model = import_path(train.model, "train.model")(train)
    if not isinstance(model, torch.nn.Module):
        raise RuntimeError(f"train.model={train.model!r}: the factory returned {type(model).__name__}, "
                           f"not a torch.nn.Module")
    return model


def find_blocks(model) -> Optional[Any]:
    """The model's blocks: the first nn.ModuleList in its module tree, or None."""
    import torch.nn as nn

    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            return module
    return None


def loss_of(output: Any, key: str = "train.model"):
    """The loss in a model's output: the tensor itself, `.loss` (or ["loss"]), or a tuple's last element."""
    import torch

    loss = output
    if not isinstance(loss, torch.Tensor):
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, dict):
            loss = output.get("loss")
        if loss is None and isinstance(output, (tuple, list)) and output:
            loss = output[-1]
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise RuntimeError(f"{key}: model(inputs, targets) returned {type(output).__name__}, from which no scalar "
                           f"loss was found: return the loss tensor, an object with .loss, or a tuple ending in it")
    return loss.reshape(())


class UserBatches:
    """Micro-batches from the user's function; a new pass over it when it runs out."""
    needs_h2d = True

    def __init__(self, cfg, rank: int, world_size: int, device):
        self.path = cfg.train.batch
        self.make = import_path(self.path, "train.batch")
        self.args = (cfg.train, rank, world_size, cfg.workload.seed)
        self.device, self.pin = device, device.type == "cuda"
        self.it: Optional[Iterator] = None

    def next(self) -> Tuple[Any, Any]:
        for _ in range(2):
            if self.it is None:
                self.it = iter(self.make(*self.args))
            try:
                batch = next(self.it)
                break
            except StopIteration:
                self.it = None
        else:
            raise RuntimeError(f"train.batch={self.path!r}: the function made no batch")
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise RuntimeError(f"train.batch={self.path!r}: each item must be a pair (inputs, targets), got {type(batch).__name__}")
        return batch

    def to_device(self, batch):
        return tuple(t.to(self.device, non_blocking=self.pin) if hasattr(t, "to") else t for t in batch)

    def close(self) -> None:
        self.it = None
