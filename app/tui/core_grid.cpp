#include "app/tui/core_grid.h"

#include <algorithm>
#include <cmath>

#include "app/tui/status_line.h"
#include "app/tui/text_width.h"
#include "util/error.h"

namespace wc::tui {
namespace {

constexpr const char* kShades[] = {"\xC2\xB7", "\xE2\x96\x91", "\xE2\x96\x92", "\xE2\x96\x93",
                                   "\xE2\x96\x88"};  // · ░ ▒ ▓ █
constexpr const char* kDigits[] = {".", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

// Level of `w` among `levels` (1..levels; 0 = idle): the smallest k with w <= max * k / levels.
int Level(int64_t w, int64_t max, int levels) {
  if (w <= 0 || max <= 0) return 0;
  for (int k = 1; k < levels; ++k) {
    if (w * levels <= max * k) return k;
  }
  return levels;
}

// Upper bound of level k, rounded up: ceil(max * k / levels).
int64_t LevelBound(int64_t max, int k, int levels) {
  return (max * k + levels - 1) / levels;
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Packs `items` into lines of at most `width` columns, two spaces apart; an item wider than the
// width is cut.
void PackItems(const std::vector<std::string>& items, int width, std::vector<std::string>* out) {
  std::string line;
  for (const std::string& item : items) {
    const std::string piece = FitWidth(item, width, true);
    if (!line.empty() && DisplayWidth(line) + 2 + DisplayWidth(piece) > width) {
      out->push_back(line);
      line.clear();
    }
    if (!line.empty()) line += "  ";
    line += piece;
  }
  if (!line.empty()) out->push_back(line);
}

}  // namespace

std::vector<std::string> RenderCoreGrid(const CoreGridFigures& g, int width, GridGlyphs glyphs) {
  WC_CHECK(width >= 1, "width ", width);
  WC_CHECK(g.grid_x >= 1 && g.grid_y >= 1 && g.grid_x <= 10 && g.grid_y <= 10 &&
               g.work.size() == static_cast<size_t>(g.grid_x) * g.grid_y,
           "grid ", g.grid_x, "x", g.grid_y, " with ", g.work.size(), " work values");
  int64_t max = 0, active = 0;
  for (const int64_t w : g.work) {
    WC_CHECK(w >= 0, "negative core work ", w);
    max = std::max(max, w);
    active += w > 0;
  }
  const bool shades = glyphs == GridGlyphs::kShades;
  const int levels = shades ? 4 : 9;
  const auto glyph = [&](int level) -> std::string {
    return shades ? kShades[level] : kDigits[level];
  };
  const bool labels = width >= 2 + g.grid_x;
  const int cell = width >= 2 + 2 * g.grid_x ? 2 : 1;

  std::vector<std::string> lines;
  std::string title = Cat("Tensix ", g.grid_x, "x", g.grid_y);
  if (!g.caption.empty()) title += "  " + g.caption;
  lines.push_back(FitWidth(title, width, true));
  if (labels) {
    std::string header = "  ";
    for (int x = 0; x < g.grid_x; ++x) {
      if (x > 0) header += std::string(cell - 1, ' ');
      header += std::to_string(x);
    }
    lines.push_back(FitWidth(header, width));
  }
  for (int y = 0; y < g.grid_y; ++y) {
    std::string row = labels ? std::to_string(y) + " " : "";
    for (int x = 0; x < g.grid_x; ++x) {
      row += Repeat(glyph(Level(g.work[static_cast<size_t>(y) * g.grid_x + x], max, levels)), cell);
    }
    lines.push_back(FitWidth(row, width));
  }

  std::vector<std::string> legend{glyph(0) + " idle"};
  if (max > 0) {
    if (shades) {
      for (int k = 1; k <= levels; ++k) {
        legend.push_back(glyph(k) + " \xE2\x89\xA4" + std::to_string(LevelBound(max, k, levels)));
      }
    } else {
      legend.push_back(Cat("1-9 = ninths of ", max));
    }
  }
  PackItems(legend, width, &lines);
  const std::string summary =
      max > 0 ? Cat(active, "/", g.work.size(), " active, max ", max, " ", g.unit) : "all idle";
  lines.push_back(FitWidth(summary, width, true));
  return lines;
}

CoreGridFigures CoreGridFromTrace(const OpTrace& trace, int chip, const WormholeChipSpec& spec,
                                  double kv_row_bytes) {
  WC_CHECK(kv_row_bytes > 0, "kv_row_bytes ", kv_row_bytes);
  CoreGridFigures g;
  g.grid_x = spec.compute_x;
  g.grid_y = spec.compute_y;
  g.work.assign(static_cast<size_t>(g.grid_x) * g.grid_y, 0);
  g.unit = "K/V rows";
  if (trace.chips_used > 1) g.caption = Cat("chip ", chip, "/", trace.chips_used);
  for (const CoreTrace& ct : trace.cores) {
    if (ct.chip != chip) continue;
    WC_CHECK(ct.core >= 0 && ct.core < static_cast<int>(g.work.size()), "core ", ct.core);
    g.work[ct.core] += std::llround(ct.dram_bytes / (2.0 * kv_row_bytes));
  }
  return g;
}

std::string KVUsageLine(const KVUsage& u, int width) {
  std::vector<std::string> fields;  // in the order they are dropped, last first
  fields.push_back(u.blocks_total > 0 ? Cat("kv ", u.blocks_used, "/", u.blocks_total, " blocks")
                                      : std::string("kv contiguous"));
  if (u.blocks_total > 0) fields.push_back(Cat(u.blocks_total - u.blocks_used, " free"));
  if (!u.format.empty()) fields.push_back(u.format);
  if (u.bytes_used >= 0) {
    std::string bytes = FormatBytes(u.bytes_used);
    if (u.bytes_total >= 0) bytes += " of " + FormatBytes(u.bytes_total);
    fields.push_back(bytes);
  }
  for (size_t n = fields.size(); n >= 1; --n) {
    std::string line = fields[0];
    for (size_t i = 1; i < n; ++i) line += " | " + fields[i];
    if (DisplayWidth(line) <= width || n == 1) return FitWidth(line, width, true);
  }
  return "";
}

}  // namespace wc::tui
