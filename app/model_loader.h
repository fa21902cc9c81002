// The model loader: ModelRunOptions (app/model_options.h) in, a LoadedModel (the model, its
// tokenizer, chat format and KV format) out. What the ranks of a tensor-parallel group do with it
// is app/rank_lifecycle.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/model_options.h"
#include "kvcache/kv_cache.h"
#include "model/chat/chat_format.h"
#include "model/decoder_model.h"
#include "serving/serving_loop.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// Rank 0 of a tensor-parallel group: ends the other ranks' FollowSteps when the command is done
// (or fails), once everything that runs the model is gone.
struct FollowersStop {
  const DecoderModel* model = nullptr;
  ~FollowersStop();
};

// Everything a text command needs, loaded from ModelRunOptions.
struct LoadedModel {
  std::string dir;
  std::unique_ptr<DecoderModel> model;
  // The model's tokenizer; an IdsTokenizer with --ids; null if `need_tokenizer` was false.
  std::unique_ptr<Tokenizer> tokenizer;
  // --chat-format's, chat_format.json's or the chat template's (ChatFormat::ForModel); with --ids
  // one that frames nothing (ids are fed as given).
  std::optional<ChatFormat> chat_format;
  KVCacheOptions kv;  // format, scales, layout
  int ctx = 0;        // positions per user row
  // Tensor parallel, rank 0: each rank's weight bytes held (ModelWeights::HeldBytes) and peak
  // resident bytes once loaded, [ranks]; empty otherwise.
  std::vector<int64_t> rank_weight_bytes, rank_peak_rss;
  std::unique_ptr<FollowersStop> followers;  // last: destroyed first
};
// Loads the model; with --tensor-parallel R under mpirun -np R, this rank's slice (collective:
// every rank of the group calls it, rank 0 to run the command and the others through
// FollowUnlessTensorParallelLeader or, in bench ranks, to follow by themselves). Applies --threads
// first. Throws wc::Error for bad options or files.
LoadedModel LoadModel(const ModelRunOptions& o, bool need_tokenizer);

// The serving loop's options for a loaded model: its KV format and layout, context, --threads.
ServingOptions ServingOptionsFor(const ModelRunOptions& o, const LoadedModel& m, int user_rows,
                                 int max_batch_tokens = 256);
// The model side of the persisted prefix cache's key (ServingOptions::prefix_cache_key): the
// model's fingerprint (a GGUF file's: its size, header and tensor table; model/fingerprint.h),
// --weights and the numerics flags, the CPU kernels in use, and a digest of this executable. Reads
// a model directory's every weight file once.
std::string PrefixCacheKey(const ModelRunOptions& o, const LoadedModel& m);
}  // namespace wc
