"""Storage groups (no sympy: a compiled model's buffers carry them too)."""
from __future__ import annotations

from enum import Enum


class Group(Enum):
    """Storage groups, in the order tables show them (the KDA report's rows)."""

    INPUTS = "inputs, dO and output"
    SAVED = "forward-saved activations"
    RECOMPUTE = "recompute intermediates"
    STATE = "state series"
    STAGE = "stage buffers"
    MATRIX_GRAD = "chunk-matrix gradients"
    DV = "current dv"
    OUTPUT_GRAD = "output gradients"
    BETA_REDUCTION = "beta gradients and reduction temporaries"
    SCRATCH = "gate-parameter scratch and metadata"
    WORKSPACE = "other workspace"
    FORWARD = "forward intermediates"
    COMMUNICATION = "context-parallel summaries and gathers"
    PARAMETERS = "parameters"                  # a layer's weights (layer models)
    PARAM_GRADS = "parameter gradients"        # their .grad, kept past the step for the optimizer
    ACTIVATIONS = "layer activations"          # a layer's projections, convolutions and norms, and what they save
    ACTIVATION_GRADS = "activation gradients"  # gradients flowing between a layer's modules
    OPTIMIZER_STATES = "optimizer states"      # kept by the optimizer from its first step (AdamW's two moments)
    OPTIMIZER_WORK = "optimizer temporaries"   # made and dropped inside optimizer.step()
    LOSS = "loss"                              # the loss's logits, chunks and the input gradient it precomputes (a
                                               # weight gradient it makes counts in PARAM_GRADS: traced.build.group_of)
    FSDP_GATHER = "FSDP2 all-gathers and unsharded parameters"   # a unit's flat all-gather output, its full weights
    EP_ALL_TO_ALL = "expert-parallel all-to-all outputs"   # the routed tokens dispatched to a rank's experts and back
    FSDP_REDUCE = "FSDP2 reduce-scatter inputs"   # a unit's gradients padded and laid out for the reduce-scatter
    AUTOCAST = "autocast copies"               # the lower-precision copies autocast makes (weights cached to the
                                               # region's end, inputs), and what an operator saves of them

    @property
    def label(self) -> str:
        return self.value

    @property
    def key(self) -> str:
        """The machine name of the group, the JSON's key (``matrix_grad``); ``label`` is its prose."""
        return self.name.lower()
