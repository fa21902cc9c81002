#include "model/tensor_split.h"

#include <algorithm>

#include "model/lm_head.h"
#include "util/error.h"

namespace wc {

TensorSplit TensorSplit::Make(const FalconConfig& c, int lm_head_fractures, int rank, int ranks) {
  if (ranks < 1) throw Error(Cat("--tensor-parallel must be >= 1, got ", ranks));
  WC_CHECK(rank >= 0 && rank < ranks, "rank ", rank, " of ", ranks);
  const int n_head = c.n_head, n_kv = c.n_kv_heads, q_per_kv = n_head / n_kv;
  TensorSplit s;
  s.rank = rank;
  s.ranks = ranks;
  if (n_kv % ranks == 0) {
    s.kv_begin = n_kv / ranks * rank;
    s.kv_end = s.kv_begin + n_kv / ranks;
    s.q_head_begin = s.kv_begin * q_per_kv;
    s.q_head_end = s.kv_end * q_per_kv;
  } else if (n_kv == 1 && n_head % ranks == 0) {
    s.kv_begin = 0;
    s.kv_end = 1;
    s.q_head_begin = n_head / ranks * rank;
    s.q_head_end = s.q_head_begin + n_head / ranks;
  } else {
    throw Error(Cat("--tensor-parallel ", ranks, " must divide the model's ", n_kv,
                    " KV heads (or, with one KV head, its ", n_head,
                    " query heads): each rank holds whole KV-head groups"));
  }
  if (c.ffn_hidden_size % ranks != 0)
    throw Error(Cat("--tensor-parallel ", ranks, " must divide the model's MLP width of ",
                    c.ffn_hidden_size));
  s.ffn_begin = c.ffn_hidden_size / ranks * rank;
  s.ffn_end = s.ffn_begin + c.ffn_hidden_size / ranks;
  const int padded = FracturedLMHead::PaddedVocab(c.vocab_size, lm_head_fractures);
  if (lm_head_fractures % ranks != 0)
    throw Error(Cat("--lm-head-fractures ", lm_head_fractures,
                    " must be a multiple of --tensor-parallel ", ranks,
                    ": each rank computes whole fractures of the LM head"));
  const int per_rank = lm_head_fractures / ranks;
  const int64_t slice = padded / lm_head_fractures;
  s.fracture_begin = per_rank * rank;
  s.fracture_end = s.fracture_begin + per_rank;
  s.vocab_begin = std::min<int64_t>(c.vocab_size, slice * s.fracture_begin);
  s.vocab_end = std::min<int64_t>(c.vocab_size, slice * s.fracture_end);
  return s;
}

int64_t RankWeightBytes(const FalconConfig& c, const TensorSplit& s, int bytes_per_weight) {
  const int64_t hidden = c.hidden_size, hd = c.head_dim();
  const int64_t qkv_rows = (s.n_head() + 2 * int64_t{s.n_kv_heads()}) * hd;
  int64_t per_layer = qkv_rows * hidden + hidden * s.n_head() * hd + 2 * s.ffn() * hidden;
  int64_t vectors = 2 * hidden * (c.two_layernorms() || !c.parallel_attn ? 2 : 1);  // LayerNorms
  if (c.bias) vectors += qkv_rows + hidden + s.ffn() + hidden;
  return c.n_layers * (per_layer * bytes_per_weight + vectors * 4) +
         (s.vocab_end - s.vocab_begin) * hidden * bytes_per_weight + 2 * hidden * 4;
}

WeightGroupBytes RankWeightGroupBytes(const FalconConfig& c, const TensorSplit& s,
                                      const WeightFormat formats[3]) {
  const int64_t hidden = c.hidden_size, hd = c.head_dim();
  const int64_t qkv_rows = (s.n_head() + 2 * int64_t{s.n_kv_heads()}) * hd;
  WeightGroupBytes b;
  b.attn = c.n_layers * (WeightFormatBytes(formats[0], qkv_rows, hidden) +
                         WeightFormatBytes(formats[0], hidden, s.n_head() * hd));
  b.mlp = c.n_layers * (WeightFormatBytes(formats[1], s.ffn(), hidden) +
                        WeightFormatBytes(formats[1], hidden, s.ffn()));
  b.lm_head = WeightFormatBytes(formats[2], s.vocab_end - s.vocab_begin, hidden);
  int64_t vectors = 2 * hidden * (c.two_layernorms() || !c.parallel_attn ? 2 : 1);  // LayerNorms
  if (c.bias) vectors += qkv_rows + hidden + s.ffn() + hidden;
  b.vectors = 4 * (c.n_layers * vectors + 2 * hidden);
  return b;
}

}  // namespace wc
