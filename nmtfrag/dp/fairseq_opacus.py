"""Exact per-example gradients of fairseq's TransformerModel with opacus hooks.

Why: DP-SGD (Abadi et al. 2016) clips each example's gradient, so it needs the
gradient of every example separately. opacus' GradSampleModule computes them with
forward/backward hooks on each layer, but on fairseq's Transformer it is wrong or
crashes without three runtime fixes (checked against a per-example autograd loop,
tests/dp/test_dp_sgd.py):

1. `MultiheadAttention.forward` does `q *= self.scaling` in place on the output of the
   hooked `q_proj`; full backward hooks return that output as a view, and the in-place
   op then breaks backward. Fix: `q_proj` gets a Linear subclass whose call returns a
   copy of the hooked output (same parameters, same state-dict keys).
2. The attention fast path (`F.multi_head_attention_forward`) uses the projection
   weights directly and never calls the q/k/v/out modules, so their hooks never fire.
   Fix: set each attention module's skip-embed-dim-check flag, which forces fairseq's
   Python path.
3. opacus assumes one global `batch_first`, but embeddings (and the decoder's output
   projection) see batch-first tensors while the layers inside the encoder and decoder
   run time-first (T×B×C). Fix: a per-module batch dimension, by position in the model,
   checked on every pass against the real batch size.

Tied (shared) embedding matrices get the sum of their per-example contributions, as
autograd does; a module shared by encoder and decoder (--share-all-embeddings) is hooked
once (opacus would hook it twice and double its per-example gradients). Layers without
a grad sampler are refused (no silent functorch fallback): the model must consist of
Linear, Embedding and LayerNorm layers.

Two ways to clip (nmtfrag.dp.clipping picks; the log and the certificate say which):
- "hooks": per-example gradients are materialised (B × parameter shape per layer),
  clipped and summed. Works for every trained set, shared matrices and document units.
- "ghost": opacus' ghost clipping (Li et al. 2022, "Large Language Models Can Be Strong
  Differentially Private Learners", §4): the per-example gradient *norm* of a Linear or
  Embedding layer is computed from its activations and output gradients without forming
  the gradient; a second backward pass of Σ cᵢ·lossᵢ (cᵢ the clipping factors) gives the
  clipped sum. Its memory does not grow with the trained parameters, but the second
  backward pass and the T×T products of long sentences make it slower than hooks for
  every set we measured (benchmarks/dp_step.py), so "auto" takes it only when the
  per-example gradients would not fit. opacus refuses a parameter shared by two layers
  (the tied embedding matrices of `--dp-params all`), and a document's norm (of a *sum*
  of per-pair gradients) is not a per-row norm.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..errors import InputError
from ..train.lora import LoRALinear

if TYPE_CHECKING:
    from fairseq.models import FairseqEncoderDecoderModel
    from opacus.grad_sample import GradSampleModule

SUPPORTED = (nn.Linear, nn.Embedding, nn.LayerNorm)
_TIME_FIRST_PREFIXES = ("encoder.layers.", "decoder.layers.", "encoder.layer_norm",
                        "decoder.layer_norm")
# opacus' per-layer functions: (layer, activations, backprops) → {parameter: per-example
# gradients} (GRAD_SAMPLERS) or {parameter: per-example norms} (NORM_SAMPLERS)
Sampler = Callable[..., dict[nn.Parameter, torch.Tensor]]


class CopyOutputLinear(nn.Linear):
    """nn.Linear whose call returns a copy of its (hook-wrapped) output, so that callers
    may modify it in place (fairseq's `q *= self.scaling`)."""

    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs).clone()


def _batch_dim(name):
    return 1 if name.startswith(_TIME_FIRST_PREFIXES) else 0


def prepare_model(model: nn.Module) -> dict[str, int]:
    """Apply fixes 1–3 to a fairseq TransformerModel in place; refuse unsupported layers.

    Returns {module name: batch dim} for the modules that own trainable parameters.
    """
    from fairseq.modules.multihead_attention import MultiheadAttention

    dims = {}
    for name, module in model.named_modules():
        if isinstance(module, MultiheadAttention):
            module._set_skip_embed_dim_check()            # fix 2
            if type(module.q_proj) is nn.Linear:
                module.q_proj.__class__ = CopyOutputLinear  # fix 1
            elif not isinstance(module.q_proj, (CopyOutputLinear, LoRALinear)):
                # (a LoRALinear returns a fresh sum, which may be modified in place)
                raise InputError(f"DP: {name}.q_proj is a {type(module.q_proj).__name__} "
                                 "(quantisation noise?), which DP-SGD does not support")
        own = [p for p in module.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        if not isinstance(module, SUPPORTED):
            raise InputError(f"DP: layer {name} ({type(module).__name__}) has no exact "
                             "per-example gradient in nmtfrag: a model with unsupported "
                             "layers would void the DP guarantee")
        module._nmtfrag_batch_dim = _batch_dim(name)   # fix 3
        dims[name] = _batch_dim(name)
    for name, buf in model.named_buffers():
        if buf.dtype.is_floating_point and "positions" not in name and \
                "_float_tensor" not in name and "version" not in name:
            raise InputError(f"DP: buffer {name} (batch statistics?) is not supported")
    return dims


def restore_model(model: nn.Module) -> None:
    """Undo fix 1 (plain nn.Linear again), e.g. before saving or exporting the model."""
    for module in model.modules():
        if type(module) is CopyOutputLinear:
            module.__class__ = nn.Linear  # type: ignore[assignment]  # class swap (fix 1)


def _float64_inputs(activations, backprops):
    return ([a.double() if a.is_floating_point() else a for a in activations],
            backprops.double())


def _float64_norm_sampler(sampler):
    """opacus' ghost norm `sampler` run on float64 copies of the layer's (float32) inputs
    and output gradients: opacus computes it in float32, whose sums over the T×T token
    products and the hidden size drift with the layer's size, and clipping needs each
    norm at least as large as the float32 gradient the second pass produces."""
    def norm_sample(layer, activations, backprops):
        return sampler(layer, *_float64_inputs(activations, backprops))
    return norm_sample


def _float64_norm_from_grad_sampler(sampler):
    """A norm sampler for a layer ghost clipping would otherwise serve by opacus'
    fallback (per-example gradient, then a float32 `.norm`, e.g. LayerNorm): the same
    per-example gradient in float64 and its float64 norm."""
    def norm_sample(layer, activations, backprops):
        grads = sampler(layer, *_float64_inputs(activations, backprops))
        return {p: gs.reshape(len(gs), -1).square().sum(1).sqrt() for p, gs in grads.items()}
    return norm_sample


def float64_norm_samplers(grad_samplers: Mapping[type[nn.Module], Sampler],
                          norm_samplers: Mapping[type[nn.Module], Sampler]
                          ) -> dict[type[nn.Module], Sampler]:
    """{layer type: float64 norm sampler} for the layers DP-SGD trains (SUPPORTED and
    CopyOutputLinear): opacus' ghost formula where it has one (Linear, Embedding), else
    the float64 norm of the layer's per-example gradient (LayerNorm)."""
    table: dict[type[nn.Module], Sampler] = {}
    for kind in SUPPORTED + (CopyOutputLinear,):
        base = nn.Linear if kind is CopyOutputLinear else kind
        if base in norm_samplers:
            table[kind] = _float64_norm_sampler(norm_samplers[base])
        else:
            table[kind] = _float64_norm_from_grad_sampler(grad_samplers[base])
    return table


def _grad_sample_module_class(clipping="hooks"):
    from opacus.grad_sample import GradSampleModule
    from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
        GradSampleModuleFastGradientClipping)

    for table in (GradSampleModule.GRAD_SAMPLERS,
                  GradSampleModuleFastGradientClipping.NORM_SAMPLERS):
        if CopyOutputLinear not in table:
            table[CopyOutputLinear] = table[nn.Linear]
    base = GradSampleModuleFastGradientClipping if clipping == "ghost" else GradSampleModule

    class FairseqGradSampleModule(base):
        """opacus' module with a per-module batch dimension (fix 3) and, for ghost
        clipping, per-example norms computed in float64 (`float64_norm_samplers`)."""

        expected_batch_size = None
        if clipping == "ghost":
            NORM_SAMPLERS = float64_norm_samplers(GradSampleModule.GRAD_SAMPLERS,
                                                  GradSampleModuleFastGradientClipping
                                                  .NORM_SAMPLERS)

        def iterate_submodules(self, module):
            # A module reachable twice (fairseq's shared encoder/decoder embedding
            # with --share-all-embeddings) must be hooked once, or every per-example
            # gradient through it is counted twice (opacus does not deduplicate).
            seen = set()
            for m in super().iterate_submodules(module):
                if id(m) not in seen:
                    seen.add(id(m))
                    yield m

        def capture_backprops_hook(self, module, _forward_input, forward_output,
                                   loss_reduction, batch_first):
            dim = getattr(module, "_nmtfrag_batch_dim", 0)
            n = self.expected_batch_size
            if n is not None and hasattr(module, "activations") and module.activations:
                got = module.activations[-1][0].shape[dim]
                if got != n:
                    raise RuntimeError(
                        f"per-example gradients: {type(module).__name__} sees batch size "
                        f"{got} on dim {dim}, expected {n}: unsupported model layout")
            return super().capture_backprops_hook(module, _forward_input, forward_output,
                                                  loss_reduction, batch_first=(dim == 0))

    return FairseqGradSampleModule


def wrap(model: nn.Module, clipping: str = "hooks") -> GradSampleModule:
    """prepare_model + opacus hooks. After `loss.backward()` of a *summed* loss:
    "hooks" puts per-example gradients in `p.grad_sample` (batch × param shape);
    "ghost" puts per-example gradient norms in `p._norm_sample` (read by
    `per_example_norms`)."""
    prepare_model(model)
    cls = _grad_sample_module_class(clipping)
    kw = {"use_ghost_clipping": True} if clipping == "ghost" else {}
    return cls(model, batch_first=True, loss_reduction="sum", strict=False, **kw)


def per_example_norms(params: Iterable[nn.Parameter]) -> torch.Tensor:
    """Per-example norms of the whole trained gradient after a ghost-clipping backward
    (float64 throughout: the norm samplers run in float64, `float64_norm_samplers`;
    batch order); each parameter's norms are consumed, so a stale one from an
    earlier batch can never be read."""
    sq = None
    for p in params:
        ns = getattr(p, "_norm_sample", None)
        if ns is None:
            raise RuntimeError("ghost clipping: a trained parameter got no per-example "
                               "norm in this backward pass")
        part = ns.double().reshape(-1) ** 2
        sq = part if sq is None else sq + part
        p._norm_sample = None  # type: ignore[attr-defined]  # opacus' per-parameter slot
    assert sq is not None, "ghost clipping: no trained parameter"
    return sq.sqrt()


def example_losses(model: FairseqEncoderDecoderModel, sample: dict[str, Any], label_smoothing: float = 0.0,
                   pad_idx: int = 1) -> torch.Tensor:
    """Per-example training losses (label-smoothed NLL summed over each target), in the
    collated order of `sample` (see sample["id"] for the dataset indices)."""
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    net_output = model(**sample["net_input"])
    lprobs = model.get_normalized_probs(net_output, log_probs=True)
    target = sample["target"]
    loss, _ = label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1, 1),
                                      label_smoothing, ignore_index=pad_idx, reduce=False)
    return loss.view(target.shape).sum(dim=1)


def per_example_grads(gsm: GradSampleModule, params: Iterable[nn.Parameter] | None = None
                      ) -> list[tuple[Any, torch.Tensor]]:
    """[(param, grad_sample tensor)] after backward; clears nothing. (The parameters
    carry opacus' run-time `grad_sample` attribute, which no static type declares.)"""
    out = []
    for p in params or [p for p in gsm.parameters() if p.requires_grad]:
        gs = p.grad_sample  # type: ignore[attr-defined]  # set by opacus' hooks at run time
        if isinstance(gs, list):
            gs = torch.stack(gs).sum(0) if len(gs) > 1 else gs[0]
        out.append((p, gs))
    return out
