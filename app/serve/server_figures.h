// `wormchat serve`'s extension object "wormchat": the server's figures for a client's status bar
// (the chat's `--server` mode: app/openai/chat_client.h's ServerFigures), sent on the streamed
// chunk that carries a choice's finish_reason and on the usage chunk. Other clients ignore a
// field they do not know, as OpenAI's do. Never on whole (non-streamed) replies.
//
//   kv_blocks_used, kv_blocks_total   paged KV blocks in use now and in the pool (0: contiguous)
//   kv_bytes_used, kv_bytes_total     KV storage: the pool's (or every row's full context) bytes,
//                                     and the part in use (paged: the blocks in use; contiguous:
//                                     the busy rows' whole contexts)
//   kv_format                         "bf16 paged/64", "int8 contiguous", ...
//   ctx_size                          positions per user row
//   rows_busy, user_rows              rows running a request now, and the rows in all
//   queue_length                      requests submitted and not yet given a row
//                                     (the three as /metrics' gauges)
//   mesh                              the run's --mesh preset ("n150")
//   model_us_per_token                the whole model's emulated decode step on that mesh for one
//                                     user at the choice's context (prompt + reply tokens), as the
//                                     chat's status bar computes it (meshmodel/model_estimate.h)
//   model_us_estimated                whether that graph is an estimate rather than tt-metal's
//                                     measured program (WholeModelIsEstimate)
//   mesh_us_per_token                 the emulated attention's device time per token fed (prompt
//                                     tokens prefilled and tokens sampled) over the steps from the
//                                     request's submission to now: every row's attention and
//                                     tokens in those steps, so about the chat's own figure when
//                                     the request ran alone (a prompt's cached tokens are not
//                                     fed); absent without a meter, or when no FlashDecode op ran
//                                     (--attention reference). The meter costs ~2 us per
//                                     attention op (0.2% of the default model's forward time)
// Each is sent when the server knows it: mesh and model_us_* need the source's model and mesh.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "serving/serving_loop.h"

namespace wc {

class AttentionMeter;  // mesh/attention_meter.h
class DecoderModel;    // model/decoder_model.h

// What the figures are computed from besides the serving loop; all may be left empty.
struct ServerFiguresSource {
  const DecoderModel* model = nullptr;    // the loop's model (null: no model_us_*)
  std::string mesh;                       // --mesh ("": neither mesh nor model_us_*)
  const AttentionMeter* meter = nullptr;  // installed on the model (null: no mesh_us_per_token)
};

// Where the meter and the loop's counts stood when a request was submitted.
struct FiguresMark {
  double emulated_us = 0;
  int64_t tokens_fed = 0;
};
FiguresMark MarkFigures(const ServerFiguresSource& source, const ServingLoop& loop);

// The "wormchat" object now, for a choice at `ctx_tokens` positions of context. Never throws.
nlohmann::json FiguresJson(const ServerFiguresSource& source, const ServingLoop& loop,
                           const FiguresMark& since, int ctx_tokens);

}  // namespace wc
