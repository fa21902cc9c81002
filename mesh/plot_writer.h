// PNG plots of mesh-bench results, drawn by gnuplot (Debian's gnuplot-nox) run as a subprocess.
#pragma once

#include <string>
#include <vector>

#include "mesh/experiments.h"

namespace wc {

// Draws the figures the rows belong to into one PNG at `png_path`: for seed-fig3-4 rows, TFLOP/s
// (Figure 3) and DRAM GB/s (Figure 4) against kv_len, one panel per head_dim, FlashDecode solid
// and the baseline dashed; for seed-fig5 rows, op latency against kv_len, one panel per mesh, one
// line per max_cores_per_head (flat reduction solid, tree dashed).
// Throws wc::Error naming --plot if gnuplot is not installed, fails, or writes no file.
void PlotMeshBench(const std::vector<MeshBenchRow>& rows, const std::string& png_path);

// Runs gnuplot on `script_text`, which must draw into `png_path` (any stale file there is removed
// first). Throws wc::Error naming --plot if gnuplot is not installed, fails, or writes no file.
void RunGnuplot(const std::string& script_text, const std::string& png_path);

// A gnuplot single-quoted string.
std::string GnuplotQuote(const std::string& s);

}  // namespace wc
