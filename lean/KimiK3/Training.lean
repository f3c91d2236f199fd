module

public import KimiK3.Training.Draft
public import KimiK3.Training.Speculative
public import KimiK3.Training.DraftLoss
public import KimiK3.Training.SpeculativeExample
public import KimiK3.Training.Pretraining
public import KimiK3.Training.ChatTemplate
public import KimiK3.Training.ChatTemplateRoundTrip
public import KimiK3.Training.ChatTemplateMedia
public import KimiK3.Training.ChatTemplateSplice
public import KimiK3.Training.Muon
public import KimiK3.Training.Mopd

/-!
# Training and decoding semantics (report §§3.3–3.4, §4.1.4; k3-spec §§2.11, 2.14)

EAGLE-3: feature fusion with the `[0 0 I]` initialization and the self-feeding training-time
test (`Draft`), lossless speculative sampling over a finite vocabulary (`Speculative`), the
seven-step likelihood loss (`DraftLoss`), the report's example (`SpeculativeExample`); the masked
pretraining loss with its gradient derived (`Pretraining`); the Per-Head Muon layout and
orthogonalizer contract (`Muon`); the MOPD reward and post-training controls (`Mopd`); the XTML
chat template's serializer and parser (`ChatTemplate`) with the round trip `parse_serialize`
(`ChatTemplateRoundTrip`) and one placeholder per media item (`ChatTemplateMedia`), expanded into
the visual splice (`ChatTemplateSplice`). See `Training/README.md`.
-/
