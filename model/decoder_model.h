// A decoder model of any architecture in the table (model/architecture.h): embeddings ->
// n_layers x the architecture's layer graph (model/<arch>/<arch>_graph.cpp: norms, projections,
// attention over the KV cache through the FlashDecode engine, MLP, residuals) -> final norm ->
// padded, fractured LM head. What every architecture shares lives here and in the layer context
// (model/layer_context.h): weights by role, tensor-parallel slices and sums, the interrupt,
// attention. Everything above model/ sees this class, never an architecture.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attention/flash_decode.h"
#include "dist/communicator.h"
#include "kernels/ops.h"
#include "kvcache/kv_cache.h"
#include "model/config.h"
#include "model/flash_decode_observer.h"
#include "model/lm_head.h"
#include "model/tensor_parallel.h"
#include "model/token_batch.h"
#include "model/weight_spec.h"
#include "model/weights.h"

namespace wc {

enum class AttentionImpl { kFlashDecode, kReference };

struct ModelOptions {
  int lm_head_fractures = 8;                              // --lm-head-fractures
  AttentionImpl attention = AttentionImpl::kFlashDecode;  // --attention flash|reference
  std::string mesh = "n150";                              // --mesh
  FlashDecodeConfig flash;  // --k-chunk-size, --max-cores-per-head, --reduction
  // How BF16 weight matrices meet their activations (--matmul-precision): bf16 dot products (the
  // default) or exact f32 products. F32 and F16 matrices always multiply f32 activations.
  ActivationPrecision matmul_precision = ActivationPrecision::kBF16;
  // The format each group of matrices is held in (--weights; model/weight_spec.h): auto keeps the
  // checkpoint's. Block-float groups multiply as their decoded values
  // (kernels/gemm/weight_format.h). A loaded model's options() name a converted checkpoint's
  // block-float groups as stored.
  WeightSpec weights;
  // Multiply-adds of a matmul between two polls of Forward's interrupt (~1 ms with AVX-512 BF16 on
  // 2 cores, ~5 ms with AVX2); a matmul is split into slices of output rows this size. Tests shrink
  // it to slice small models.
  int64_t interrupt_slice_macs = int64_t{1} << 28;
  // Tensor parallel (--tensor-parallel): this process is rank comm->rank() of comm->size(), holds
  // that rank's slice of the weights (model/tensor_split.h) and meets the other ranks in every
  // Forward. Null or a group of one: the whole model. Must outlive the model.
  Communicator* tensor_group = nullptr;
  // Called as the matrices are packed at load (ModelWeights::Pack's `progress`); null: none. Not
  // kept: the model's options() hold none.
  ModelWeights::PackProgress pack_progress;
};

class PartialSums;

class DecoderModel {
 public:
  // Loads DIR/config.json (any architecture in the table) and the safetensors weights. Throws
  // wc::Error naming the file on failure.
  static std::unique_ptr<DecoderModel> Load(const std::string& model_dir,
                                            const ModelOptions& options);
  DecoderModel(const ModelConfig& config, ModelWeights weights, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // The LM head (a tensor-parallel rank's: its fractures' rows, as one fracture).
  const FracturedLMHead& lm_head() const { return lm_head_; }
  // What this rank holds (the whole model outside tensor parallel).
  const TensorSplit& split() const { return weights_.split; }
  // The KV cache this rank needs: its KV heads only.
  KVCacheShape CacheShape(int user_rows, int max_seq) const;
  const ModelOptions& options() const { return options_; }
  // Identifies the weights (config, tensor bytes, a hash of the embedding's first rows): what a
  // calibration file is tied to.
  std::string Fingerprint() const;
  // The architecture's row of the table (name, HF class, layout).
  const ArchitectureInfo& architecture() const { return ArchitectureOf(config_.arch); }
  // Called after every layer's attention with its output values (layer, attn [n_tokens, n_head *
  // head_dim]), whichever attention runs; for measurements (e.g. a KV format's attention error).
  // Not thread-safe: set it between Forwards.
  using AttentionObserver = std::function<void(int layer, const float* attn, int64_t n_tokens)>;
  void set_attention_observer(AttentionObserver observer) { observer_ = std::move(observer); }
  // Told of every FlashDecode op the model runs, with its trace and mesh
  // (model/flash_decode_observer.h; mesh/attention_meter.h keeps the emulated mesh's figures).
  // Null: nobody. Not thread-safe: set it between Forwards; it must outlive them.
  void set_flash_decode_observer(FlashDecodeObserver* observer) { flash_observer_ = observer; }

  // Runs `batch` through the decoder, writing each token's K/V into `cache`.
  //   logits: resized to [batch.logit_rows.size(), vocab_size]
  // Tensor parallel: every rank calls Forward with the same batch at the same time (each with its
  // own cache of CacheShape); the partial sums meet in options().tensor_group, so every rank gets
  // the same logits; only rank 0 passes `interrupted`, and its answer stops every rank.
  // Throws wc::Error for a token id outside the vocabulary or a position beyond the cache.
  //
  // `interrupted` (optional) is polled between layers and between slices of each large matmul
  // (every few milliseconds of work): once it returns true, Forward stops and returns false,
  // `logits` untouched. The batch's K/V may then be written for some layers only; positions are
  // written independently, so feeding the same (user_row, position) pairs again overwrites them
  // and gives exactly what an uninterrupted Forward would have. Returns true when it ran to the
  // end. `interrupted` runs on the calling thread.
  using Interrupt = std::function<bool()>;
  bool Forward(const TokenBatch& batch, KVCache& cache, std::vector<float>* logits,
               const Interrupt& interrupted = nullptr) const;
  // Tensor parallel, rank 0: rank 0's Forward first announces the step to the other ranks, which
  // run FollowSteps (model/tensor_parallel.h) until this is called. Idempotent; no-op elsewhere.
  void StopFollowers() const {
    if (leader_) leader_->Stop();
  }

 private:
  friend struct LayerContext;  // the layer graphs' shared steps
  // Tensor parallel: logits [n_out, vocab] from every rank's fractures of normed [n_out, hidden].
  void GatheredLogits(const float* normed, int64_t n_out, float* logits) const;
  bool tensor_parallel() const { return !weights_.split.whole(); }
  // attn [n, n_head, head_dim] = attention of q [n, n_head, head_dim] over each token's user row.
  // (The layer graphs call it through LayerContext::Attention.)
  void Attention(int layer, const TokenBatch& batch, const KVCache& cache, const float* q,
                 float* attn) const;

  ModelOptions options_;
  ModelConfig config_;
  ModelWeights weights_;
  FracturedLMHead lm_head_;
  // ALiBi's bias for this rank's heads (none unless the config says alibi).
  AlibiBias alibi() const;

  Rope rope_;
  std::vector<float> alibi_slopes_;  // [n_head] of the whole model, or empty
  FlashDecodeEngine engine_;
  AttentionObserver observer_;
  FlashDecodeObserver* flash_observer_ = nullptr;
  std::unique_ptr<TensorParallelLeader> leader_;  // rank 0 of a tensor-parallel group
};

}  // namespace wc
