// The side panel's picture of one Wormhole chip's 8x8 Tensix compute grid during the last
// attention step, and its KV cache usage line. No terminal: the front end draws the lines.
//
// The panel's input is a plain struct of per-core work (e.g. K/V rows each core read).
// FlashDecodeEngine::Run returns it in an OpTrace (attention/flash_decode.h, CoreTrace per active
// core); the chat session's AttentionMeter (mesh/attention_meter.h) keeps the last op's, and
// CoreGridFromTrace turns it into the panel's input.
//
// Glyphs: with shades, an idle core is '·' and a busy one '░', '▒', '▓' or '█' for up to a
// quarter, a half, three quarters or all of the busiest core's work; with digits (terminals
// without those characters), '.' and '1'..'9' in ninths. Widths assume a UTF-8 locale
// (app/tui/text_width.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/flash_decode.h"
#include "mesh/wormhole_spec.h"

namespace wc::tui {

struct CoreGridFigures {
  int grid_x = 8, grid_y = 8;  // compute grid of one chip (WormholeChipSpec::compute_x/_y)
  std::vector<int64_t> work;   // [grid_y * grid_x], core y * grid_x + x; 0 = idle, >= 0
  std::string unit = "rows";   // what `work` counts, for the legend
  std::string caption;         // after the title, e.g. "chip 0/2 layer 59"
};

enum class GridGlyphs { kShades, kDigits };

// The panel's lines, each at most `width` (>= 1) columns:
//   title    "Tensix 8x8" and the caption
//   header   x indices (when the width allows labels)
//   rows     grid_y rows (grid_x, grid_y in 1..10), one glyph per core; doubled ("██") from
//            2 + 2 * grid_x columns so cores look square; y labels from 2 + grid_x columns
//   legend   one or more lines: "· idle  ░ ≤128  ▒ ≤256  ▓ ≤384  █ ≤512" (the upper bound of each
//            shade, rounded up)
//   summary  "48/64 active, max 512 rows" or "all idle"
// An internal error (WC_CHECK) if `work` does not have grid_x * grid_y values or one is negative.
std::vector<std::string> RenderCoreGrid(const CoreGridFigures& g, int width,
                                        GridGlyphs glyphs = GridGlyphs::kShades);

// Per-core work of one chip from a FlashDecode trace: the K/V rows each core read (its K+V DRAM
// bytes / (2 * kv_row_bytes): whole 32-row tiles, as the kernel reads them), summed over the
// works it processed. `kv_row_bytes`: one K row in the stored format (KVView::RowBytes(),
// AttentionShape::kv_row_bytes). Unit "K/V rows", caption "chip C/N" on a mesh of several chips.
CoreGridFigures CoreGridFromTrace(const OpTrace& trace, int chip, const WormholeChipSpec& spec,
                                  double kv_row_bytes);

struct KVUsage {
  int blocks_used = 0, blocks_total = 0;  // paged pool (ServingStatus::kv_blocks_*); 0: contiguous
  std::string format;                     // KV dtype, e.g. "bf16", "int8"
  int64_t bytes_used = -1;                // bytes held; < 0: unknown
  int64_t bytes_total = -1;               // bytes of the pool; < 0: unknown
};

// "kv 12/256 blocks | 244 free | bf16 | 3.0 MiB of 64.0 MiB" (contiguous: "kv contiguous |
// bf16 | ..."). When too wide: the bytes, the format and the free count go in that order, then
// the line is cut with "…". Never exceeds `width`.
std::string KVUsageLine(const KVUsage& u, int width);

}  // namespace wc::tui
