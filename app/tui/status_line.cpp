#include "app/tui/status_line.h"

#include <cstdio>
#include <string_view>
#include <vector>

#include "app/tui/text_width.h"

namespace wc::tui {
namespace {

std::string Printf(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// One decimal below 100, none from there.
std::string Figure(double v) {
  return Printf(v < 99.95 ? "%.1f" : "%.0f", v);
}

// A bar's fields with their short forms; `drop` ranks the droppable ones (1 goes first; 0 stays).
struct Field {
  std::string full, abbreviated;
  int drop = 0;
  bool shown = true, short_form = false;
};

std::string Join(const std::vector<Field>& fields, std::string_view sep) {
  std::string out;
  for (const Field& f : fields) {
    if (!f.shown) continue;
    if (!out.empty()) out += sep;
    out += f.short_form ? f.abbreviated : f.full;
  }
  return out;
}

// Drops fields by rank, then switches to one-space separators, then abbreviates the fields in
// `abbreviate_order` (indices), then cuts: the first form that fits `width`.
std::string Fit(std::vector<Field> fields, int width, const std::vector<size_t>& abbreviate_order,
                bool cut_with_ellipsis) {
  std::string line = Join(fields, " | ");
  for (int rank = 1; DisplayWidth(line) > width; ++rank) {
    bool any = false;
    for (Field& f : fields) {
      if (f.drop >= rank) any = true;
      if (f.drop == rank) f.shown = false;
    }
    if (!any) break;
    line = Join(fields, " | ");
  }
  if (DisplayWidth(line) > width) line = Join(fields, " ");
  for (size_t k = 0; k < abbreviate_order.size() && DisplayWidth(line) > width; ++k) {
    fields[abbreviate_order[k]].short_form = true;
    line = Join(fields, " ");
  }
  return FitWidth(line, width, cut_with_ellipsis);
}

}  // namespace

std::string StatusLine(const StatusFigures& f, int width) {
  std::vector<Field> fields;
  switch (f.state) {
    case ChatState::kIdle:
      fields.push_back({"idle", "idle"});
      break;
    case ChatState::kPrefill: {
      const std::string pct =
          f.prefill_percent < 0 ? std::string() : " " + std::to_string(f.prefill_percent) + "%";
      fields.push_back({"prefill" + pct, "pf" + pct});
      break;
    }
    case ChatState::kGenerating:
      fields.push_back({"generating", "gen"});
      break;
  }
  const std::string speed = f.tokens_per_s < 0 ? "-" : Figure(f.tokens_per_s);
  fields.push_back({speed + " tok/s", speed + "t/s"});
  if (!f.note.empty()) fields.push_back({f.note, f.note, 7});
  if (f.tokens_per_step >= 0) {
    const std::string per_step = Printf("%.1f tok/step", f.tokens_per_step);
    fields.push_back({per_step, per_step, 4});
  }
  if (f.ttft_ms >= 0) {
    const std::string t =
        f.ttft_ms < 999.5 ? Printf("%.0f ms", f.ttft_ms) : Printf("%.2f s", f.ttft_ms / 1000.0);
    fields.push_back({"ttft " + t, "ttft " + t, 5});
  }
  if (f.ctx_tokens >= 0) {
    std::string ctx = std::to_string(f.ctx_tokens);
    if (f.ctx_size > 0) ctx += "/" + std::to_string(f.ctx_size);
    fields.push_back({"ctx " + ctx, "ctx " + ctx, 6});
  }
  if (f.reused_tokens > 0) {
    const std::string reused = "reused " + std::to_string(f.reused_tokens);
    fields.push_back({reused, reused, 3});
  }
  if (f.kv_fill >= 0 || f.kv_bytes >= 0) {
    std::string kv = "kv";
    if (f.kv_fill >= 0) kv += Printf(" %.0f%%", f.kv_fill * 100.0);
    if (f.kv_bytes >= 0) kv += " " + FormatBytes(f.kv_bytes);
    fields.push_back({kv, kv, 2});
  }
  if (f.mesh_us_per_tok >= 0) {
    // The whole model's step as tt-metal's measured program runs it (meshmodel/model_estimate.h).
    const std::string mesh = "mesh " + Figure(f.mesh_us_per_tok) + " us/tok";
    // A layout tt-metal published no program for (Falcon-RW, Falcon3) is an estimate nothing
    // measured checks.
    fields.push_back(
        {mesh + (f.mesh_estimated ? " (estimate, no device figure)" : " (tt-metal's graph)"), mesh,
         1});
  }
  if (!f.unavailable.empty()) fields.push_back({f.unavailable, f.unavailable, 1});
  // The chat file could not be written: kept whatever the width ("not saved" when narrow).
  size_t unsaved = fields.size();
  if (!f.unsaved.empty()) fields.push_back({f.unsaved, "not saved"});
  const std::string seed = std::to_string(f.seed);
  fields.push_back({"seed " + seed, "s" + seed});
  const size_t state = 0, tok_s = 1, last = fields.size() - 1;
  std::vector<size_t> abbreviate = {state, tok_s, last};
  if (!f.unsaved.empty()) abbreviate.insert(abbreviate.begin(), unsaved);
  return Fit(std::move(fields), width, abbreviate, false);
}

std::string TitleLine(const TitleInfo& t, int width) {
  std::vector<Field> fields;
  fields.push_back({"wormchat", "wormchat", 5});
  fields.push_back({t.model, t.model});
  if (t.n_params >= 0) fields.push_back({FormatCount(t.n_params), "", 4});
  if (!t.dtype.empty()) fields.push_back({t.dtype, "", 3});
  if (!t.kv_format.empty()) fields.push_back({"kv " + t.kv_format, "", 2});
  if (!t.mesh.empty()) fields.push_back({"mesh " + t.mesh, "", 1});
  return Fit(std::move(fields), width, {}, /*cut_with_ellipsis=*/true);
}

std::string FormatCount(int64_t n) {
  if (n < 1000) return std::to_string(n);
  static const char kUnits[] = "KMBT";
  double v = static_cast<double>(n) / 1000.0;
  int unit = 0;
  while (v >= 999.5 && unit < 3) {
    v /= 1000.0;
    ++unit;
  }
  return Printf(v < 9.95 ? "%.1f" : "%.0f", v) + kUnits[unit];
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (v >= 999.5 && unit < 3) {
    v /= 1024.0;
    ++unit;
  }
  return Figure(v) + " " + kUnits[unit];
}

}  // namespace wc::tui
