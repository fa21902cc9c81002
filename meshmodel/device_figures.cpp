#include "meshmodel/device_figures.h"

namespace wc {

const std::vector<DeviceFigure>& DeviceFigures() {
  // Falcon-7B: models/demos/falcon7b_common/tests/test_falcon_device_perf.py ("avg device kernel
  // samples/s", batch 32 x 1 token; the values of 3216f4bb = 5537283c's content, the kv128 and
  // kv1024 values set at df4e5049, 2024-07-26). samples/s / 32 = tokens/s per user.
  // Falcon-40B: the top-level README.md's "device" column (kernel execution time only, the 129th
  // token, batch 32), 12.2 t/s/u from 3495c524 (v0.51.0-rc13) to 33586c33 (v0.51.0-rc35).
  static const std::vector<DeviceFigure> figures = {
      {"falcon-7b", "n150", 32, 128, 625.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv128: 625 samples/s"},
      {"falcon-7b", "n150", 32, 1024, 568.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv1024: 568 samples/s"},
      {"falcon-7b", "n150", 32, 2047, 550.0 / 32,
       "test_falcon_device_perf.py@5537283c decode kv2047: 550 samples/s"},
      {"falcon-40b", "t3k", 32, 128, 12.2, "README.md@v0.51.0-rc35 Falcon-40B device: 12.2 t/s/u"},
  };
  return figures;
}

}  // namespace wc
