#include "app/serve/server_figures.h"

#include <algorithm>
#include <exception>

#include "kvcache/kv_cache.h"
#include "mesh/attention_meter.h"
#include "meshmodel/model_estimate.h"
#include "model/decoder_model.h"
#include "util/error.h"

namespace wc {

using nlohmann::json;

namespace {

int64_t TokensFed(const ServingStatus& s) {
  return s.tokens_prefilled + s.tokens_sampled;
}

}  // namespace

FiguresMark MarkFigures(const ServerFiguresSource& source, const ServingLoop& loop) {
  FiguresMark m;
  if (source.meter) m.emulated_us = source.meter->totals().emulated_us;
  m.tokens_fed = TokensFed(loop.status());
  return m;
}

json FiguresJson(const ServerFiguresSource& source, const ServingLoop& loop,
                 const FiguresMark& since, int ctx_tokens) {
  const ServingStatus s = loop.status();
  const KVCacheOptions& kv = loop.options().kv;
  const int64_t bytes_total = loop.kv_bytes();
  int64_t bytes_used = 0;
  if (s.kv_blocks_total > 0) {  // paged: the blocks in use
    bytes_used = bytes_total / s.kv_blocks_total * s.kv_blocks_used;
  } else if (s.user_rows > 0) {  // contiguous: a busy row holds its whole context
    bytes_used = bytes_total / s.user_rows * (s.active_rows + s.session_rows);
  }
  json w = {{"kv_blocks_used", s.kv_blocks_used},
            {"kv_blocks_total", s.kv_blocks_total},
            {"kv_bytes_used", bytes_used},
            {"kv_bytes_total", bytes_total},
            {"kv_format", Cat(KVDTypeName(kv.dtype),
                              kv.block_size > 0 ? Cat(" paged/", kv.block_size) : " contiguous")},
            {"ctx_size", loop.ctx()},
            {"rows_busy", s.active_rows},
            {"user_rows", s.user_rows},
            {"queue_length", s.queued}};
  if (source.meter) {
    const double us = source.meter->totals().emulated_us - since.emulated_us;
    const int64_t fed = TokensFed(s) - since.tokens_fed;
    if (us > 0 && fed > 0) w["mesh_us_per_token"] = us / static_cast<double>(fed);
  }
  if (!source.mesh.empty()) {
    w["mesh"] = source.mesh;
    if (source.model) {
      try {
        w["model_us_per_token"] =
            WholeModelUsPerToken(*source.model, kv.dtype, source.mesh, 1, std::max(1, ctx_tokens));
        w["model_us_estimated"] = WholeModelIsEstimate(source.model->config());
      } catch (const std::exception&) {
        // A model the estimate cannot shape: the figure is left out, the reply goes on.
      }
    }
  }
  return w;
}

}  // namespace wc
