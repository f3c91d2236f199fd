"""The registry of components `difftest run` knows: name -> component.

A new component (e.g. one with a freshly exported graph) is one class and one entry here: it
names its Lean template (`difftest/templates/<name>.lean.j2`), its Lean modules, its input kinds,
its pybridge module, its NumPy reference and, when an export exists, its graph file.

`lean_default` marks the components the default run evaluates in Lean: every component whose
template calls the executable specification (`KimiK3.Exec`, seconds per case offline:
`base.ExecComponent`; the sequence mixers, `sequence.SequenceMixer`, and `decoder_step`, the
whole decoder token step, leave their `long` kind out); `--lean-all` evaluates every case.
The Kimi Linear variant's components (`kimi_linear.py`) have pybridge's variant as their spec leg;
its three layers have a Lean leg through the executable specification (`Exec.KimiLinear`, in the
default run), the whole model none.
"""

from __future__ import annotations

from difftest.components.base import Component, ErrorModel, LowpCheck
from difftest.components.channel import ExpertComponent, LatentMoEComponent
from difftest.components.decoder import DecoderStepComponent
from difftest.components.depth import AttnResComponent
from difftest.components.kimi_linear import (KimiLinearKDAComponent, KimiLinearMLAComponent, KimiLinearModelComponent,
                                             KimiLinearMoEComponent)
from difftest.components.loss import NextTokenLossComponent
from difftest.components.mxfp4 import MXFP4ExpertComponent
from difftest.components.sequence import KDALayerComponent, KDARecurrenceComponent, MLAComponent
from difftest.components.speculative import SpeculativeStepComponent
from difftest.components.vision import (MergeProjectComponent, MultimodalPrefillComponent, VisionBlockComponent,
                                       VisionEmbedComponent, VisionEncoderComponent)

COMPONENTS: dict[str, Component] = {
    c.name: c
    for c in (
        ExpertComponent(), LatentMoEComponent(), KDARecurrenceComponent(), KDALayerComponent(), MLAComponent(),
        AttnResComponent(), DecoderStepComponent(), SpeculativeStepComponent(), MXFP4ExpertComponent(),
        NextTokenLossComponent(),
        VisionEmbedComponent(), VisionBlockComponent(), MergeProjectComponent(), VisionEncoderComponent(),
        MultimodalPrefillComponent(),
        KimiLinearKDAComponent(), KimiLinearMLAComponent(), KimiLinearMoEComponent(), KimiLinearModelComponent(),
    )
}

__all__ = ["COMPONENTS", "Component", "ErrorModel", "LowpCheck"]
