#include "meshmodel/device_figures.h"

namespace wc {

const std::vector<DeviceFigure>& DeviceFigures() {
  // Falcon-7B: models/demos/falcon7b_common/tests/test_falcon_device_perf.py ("avg device kernel
  // samples/s", batch 32 x 1 token; the values of 3216f4bb = 5537283c's content, the kv128 and
  // kv1024 values set at df4e5049, 2024-07-26). samples/s / 32 = tokens/s per user.
  // Prefill (one user, S tokens): the same file's prefill rows (batch 1 x S samples/s = prompt
  // tokens/s; its on-device mask tilizes are inside the measured window).
  // Falcon-40B: the top-level README.md's "device" column (kernel execution time only, the 129th
  // token, batch 32), 12.2 t/s/u from 3495c524 (v0.51.0-rc13) to 33586c33 (v0.51.0-rc35). Prefill:
  // models/demos/t3000/falcon40b/tests/test_perf_device_falcon.py (index commit 9870ee268ec3),
  // the lower bounds its device-perf run asserts for a 1-layer op sum scaled to 60 layers;
  // PR #10043, which set them, measured 1859 and 3355.
  static const std::vector<DeviceFigure> figures = {
      {"falcon-7b", "n150", TtPhase::kDecode, 32, 128, 625.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv128: 625 samples/s"},
      {"falcon-7b", "n150", TtPhase::kDecode, 32, 1024, 568.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv1024: 568 samples/s"},
      {"falcon-7b", "n150", TtPhase::kDecode, 32, 2047, 550.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv2047: 550 samples/s"},
      {"falcon-40b", "t3k", TtPhase::kDecode, 32, 128, 12.2,
       "README.md@v0.51.0-rc35 Falcon-40B device: 12.2 t/s/u"},
      {"falcon-7b", "n150", TtPhase::kPrefill, 1, 128, 2060,
       "test_falcon_device_perf.py@5537283c prefill seq128: 2060 samples/s"},
      {"falcon-7b", "n150", TtPhase::kPrefill, 1, 1024, 2890,
       "test_falcon_device_perf.py@5537283c prefill seq1024: 2890 samples/s"},
      {"falcon-7b", "n150", TtPhase::kPrefill, 1, 2048, 2680,
       "test_falcon_device_perf.py@5537283c prefill seq2048: 2680 samples/s"},
      {"falcon-40b", "t3k", TtPhase::kPrefill, 1, 128, 1900,
       "test_perf_device_falcon.py@9870ee26 prefill_seq128_bfp8_layers1: >= 1900 tok/s"},
      {"falcon-40b", "t3k", TtPhase::kPrefill, 1, 2048, 3400,
       "test_perf_device_falcon.py@9870ee26 prefill_seq2048_bfp8_layers1: >= 3400 tok/s"},
  };
  return figures;
}

}  // namespace wc
