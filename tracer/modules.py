"""Which module an allocation belongs to: forward hooks keep the path stack, and when a module returns, every autograd
node its forward created (reached from its outputs, not yet claimed by a module inside it) is tagged with its path,
so a backward allocation names the module whose forward made the node that runs (``torch._C._current_autograd_node``).
"""
from __future__ import annotations

import contextlib

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._pytree import tree_flatten


def _tag(outputs, path: str) -> None:
    stack = [t.grad_fn for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or "livebytes_module" in node.metadata:
            continue
        node.metadata["livebytes_module"] = path
        stack.extend(n for n, _ in node.next_functions if n is not None)


@contextlib.contextmanager
def module_paths(model, state, wrappers=()):
    """While active, ``state.modules`` is the path stack of the modules being run (their names in
    ``model.named_modules()``, the root ""; a module made during the forward, such as a loss criterion, is its parent's
    path and its class name), and the nodes each creates carry its path. ``wrappers``: modules around ``model`` (peft's
    ``PeftModelForCausalLM`` and ``LoraModel``) that take their caller's path, so the model's paths are its own."""
    names = {id(m): name for name, m in model.named_modules()}
    around = {id(m) for m in wrappers}

    def pre(module, args):
        parent = state.modules[-1] if state.modules else ""
        name = parent if id(module) in around else (   # a module made in the forward: its parent's path and class
            names.get(id(module)) or ".".join(filter(None, (parent, type(module).__name__))))
        state.modules.append(name)

    def post(module, args, output):
        path = state.modules.pop()
        if output is not None:
            _tag(output, path)

    # always_call: checkpoint's recompute stops early by raising inside a module (_StopRecomputationError)
    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
