-- bundle: KimiK3.Microscaling.Tables
/-!
# Microscaling: exhaustive code tables at `Float`

Hand-computed values first (`#guard`): E2M1 code `0b0101` is `2^(2−1) · 1.5 = 3`, code `0b1111`
is `−2^(3−1) · 1.5 = −6`; E4M3 code `0x7E` is `2^(15−7) · 1.75 = 448`, code `0x01` is `2^−9`;
E5M2 code `0x7B` is `2^(30−15) · 1.75 = 57344`; E8M0 code 127 is 1, code 0 is `2^−127` (so code 0 times code 254 is 1);
`2.7` encodes to E2M1 code 5 (value 3); the E2M1 midpoints `0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5`
encode to the even codes `0, 2, 2, 4, 4, 6, 6`; `7` saturates to code 7 (6); E8M0 encodes the tie
`3 = (2 + 4) / 2` to the even code 128 (2.0); the OCP floor rule gives `amax = 7` the scale code
127 (`⌊log₂ 7⌋ − 2 = 0`) and the ceil rule 128 (`⌈log₂ (7/6)⌉ = 1`).

Then one JSON line per table (`Microscaling/Tables.lean`), which
`tests/test_microscaling_tables.py` compares code by code with torch, torchao and ml_dtypes.
Run by `tests/test_lean_checks.py` too.
-/
namespace KimiK3.MicroscalingChecks
open KimiK3 KimiK3.Microscaling KimiK3.Microscaling.Tables

#guard decodeE2M1 (α := Float) ⟨5, by decide⟩ == 3
#guard decodeE2M1 (α := Float) ⟨15, by decide⟩ == -6
#guard e4m3.decode (α := Float) ⟨0x7E, by decide⟩ == 448
#guard e4m3.decode (α := Float) ⟨0x01, by decide⟩ == 1 / 512
#guard e5m2.decode (α := Float) ⟨0x7B, by decide⟩ == 57344
#guard E8M0.decode (α := Float) 127 == 1
#guard E8M0.decode (α := Float) 0 * E8M0.decode (α := Float) 254 == 1
#guard (quantizeE2M1 (2.7 : Float)).val == 5
#guard (quantizeE2M1 (0.25 : Float)).val == 0
#guard (quantizeE2M1 (0.75 : Float)).val == 2
#guard (quantizeE2M1 (1.25 : Float)).val == 2
#guard (quantizeE2M1 (1.75 : Float)).val == 4
#guard (quantizeE2M1 (2.5 : Float)).val == 4
#guard (quantizeE2M1 (3.5 : Float)).val == 6
#guard (quantizeE2M1 (5 : Float)).val == 6
#guard (quantizeE2M1 (7 : Float)).val == 7
#guard (E8M0.encode (3 : Float)).val == 128
#guard ScaleRule.ocpFloor.code e2m1 (7 : Float) == 127
#guard ScaleRule.ceil.code e2m1 (7 : Float) == 128

#eval! IO.println (decodeTable "decode_e2m1" e2m1)
#eval! IO.println (decodeTable "decode_e4m3" e4m3)
#eval! IO.println (decodeTable "decode_e5m2" e5m2)
#eval! IO.println e8m0Table
#eval! IO.println (roundTripTable "roundtrip_e2m1" e2m1)
#eval! IO.println (roundTripTable "roundtrip_e4m3" e4m3)
#eval! IO.println (roundTripTable "roundtrip_e5m2" e5m2)
#eval! IO.println e8m0RoundTrip
#eval! IO.println (elementEncodeTable "encode_e2m1_s127" e2m1 127)
#eval! IO.println (elementEncodeTable "encode_e2m1_s120" e2m1 120)
#eval! IO.println (elementEncodeTable "encode_e2m1_s135" e2m1 135)
#eval! IO.println (elementEncodeTable "encode_e4m3_s127" e4m3 127)
#eval! IO.println (elementEncodeTable "encode_e4m3_s120" e4m3 120)
#eval! IO.println (elementEncodeTable "encode_e4m3_s135" e4m3 135)
#eval! IO.println (elementEncodeTable "encode_e5m2_s127" e5m2 127)
#eval! IO.println (elementEncodeTable "encode_e5m2_s120" e5m2 120)
#eval! IO.println (elementEncodeTable "encode_e5m2_s135" e5m2 135)
#eval! IO.println e8m0EncodeTable
#eval! IO.println (scaleRuleTable "scale_ocpFloor_e2m1" e2m1 .ocpFloor)
#eval! IO.println (scaleRuleTable "scale_ceil_e2m1" e2m1 .ceil)

end KimiK3.MicroscalingChecks
