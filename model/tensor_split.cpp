#include "model/tensor_split.h"

#include <algorithm>

#include "model/lm_head.h"
#include "util/error.h"

namespace wc {

TensorSplit TensorSplit::Make(const ModelConfig& c, int lm_head_fractures, int rank, int ranks) {
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

int64_t TensorSlice::rows_held() const {
  int64_t n = 0;
  for (const auto& [b, e] : rows) n += e - b;
  return n;
}

std::vector<std::pair<int64_t, int64_t>> QkvRowRanges(const ModelConfig& c, const TensorSplit& s) {
  const int64_t hd = c.head_dim(), q_per_kv = c.n_head / c.n_kv_heads;
  // One KV head, grouped or multi-query: [n_head q][k][v]; the rank's q heads, then the shared
  // k and v (the same rows when it holds every head).
  if (c.n_kv_heads == 1 && c.qkv_layout() != QkvLayout::kMultiHead) {
    if (s.q_head_end == c.n_head) return {{s.q_head_begin * hd, int64_t{c.n_head + 2} * hd}};
    return {{s.q_head_begin * hd, s.q_head_end * hd},
            {int64_t{c.n_head} * hd, int64_t{c.n_head + 2} * hd}};
  }
  switch (c.qkv_layout()) {
    case QkvLayout::kGrouped:  // [kv groups][q_per_kv q, k, v]
      return {{s.kv_begin * (q_per_kv + 2) * hd, s.kv_end * (q_per_kv + 2) * hd}};
    case QkvLayout::kMultiHead:  // [heads][q, k, v]
      return {{3 * s.q_head_begin * hd, 3 * s.q_head_end * hd}};
    case QkvLayout::kMultiQuery:
      break;  // n_kv_heads == 1, above
  }
  return {};
}

TensorSlice SliceOf(const ModelConfig& c, const TensorSplit& s, const TensorEntry& e) {
  using R = TensorRole;
  const int64_t hd = c.head_dim();
  TensorSlice t;
  t.rows = {{0, e.shape[0]}};
  t.col_end = e.shape.size() > 1 ? e.shape[1] : 0;
  switch (e.role) {
    case R::kOutput:
      t.rows = {{s.vocab_begin, s.vocab_end}};
      break;
    case R::kQkv:
    case R::kQkvBias:
      t.rows = QkvRowRanges(c, s);
      break;
    case R::kQ:
    case R::kQBias:
      t.rows = {{s.q_head_begin * hd, s.q_head_end * hd}};
      break;
    case R::kK:
    case R::kKBias:
    case R::kV:
    case R::kVBias:
      t.rows = {{s.kv_begin * hd, s.kv_end * hd}};
      break;
    case R::kAttnOut:
      t.col_begin = s.q_head_begin * hd;
      t.col_end = s.q_head_end * hd;
      break;
    case R::kGate:
    case R::kGateBias:
    case R::kUp:
    case R::kUpBias:
      t.rows = {{s.ffn_begin, s.ffn_end}};
      break;
    case R::kDown:
      t.col_begin = s.ffn_begin;
      t.col_end = s.ffn_end;
      break;
    default:  // the embeddings, norms, biases added after the sum: whole
      break;
  }
  return t;
}

int64_t RankWeightBytes(const ModelConfig& c, const TensorSplit& s, int bytes_per_weight) {
  int64_t bytes = (s.vocab_end - s.vocab_begin) * c.hidden_size * bytes_per_weight;  // LM head
  for (const TensorEntry& e : ModelTensors(c)) {
    if (e.role == TensorRole::kTokenEmbd || e.role == TensorRole::kOutput) continue;
    const TensorSlice sl = SliceOf(c, s, e);
    bytes += IsMatrixRole(e.role) ? sl.rows_held() * sl.cols_held() * bytes_per_weight
                                  : sl.rows_held() * 4;
  }
  return bytes;
}

WeightGroupBytes RankWeightGroupBytes(const ModelConfig& c, const TensorSplit& s,
                                      const WeightFormat formats[3]) {
  WeightGroupBytes b;
  b.lm_head = WeightFormatBytes(formats[2], s.vocab_end - s.vocab_begin, c.hidden_size);
  for (const TensorEntry& e : ModelTensors(c)) {
    if (e.role == TensorRole::kTokenEmbd || e.role == TensorRole::kOutput) continue;
    const TensorSlice sl = SliceOf(c, s, e);
    if (!IsMatrixRole(e.role)) {
      b.vectors += 4 * sl.rows_held();
      continue;
    }
    const WeightGroup g = *GroupOfRole(e.role);
    (g == WeightGroup::kAttn ? b.attn : b.mlp) +=
        WeightFormatBytes(formats[static_cast<int>(g)], sl.rows_held(), sl.cols_held());
  }
  return b;
}

}  // namespace wc
