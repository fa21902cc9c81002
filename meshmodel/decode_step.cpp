#include "meshmodel/decode_step.h"

#include <algorithm>

#include "mesh/experiments.h"
#include "mesh/wormhole_spec.h"
#include "meshmodel/collectives.h"
#include "model/lm_head.h"
#include "util/error.h"

namespace wc {
namespace {

// SFPU passes per 32 x 32 tile of the element-wise ops (each pass one sfpu_tile_cycles op, the
// unit the attention model counts softmax in):
constexpr int kLayerNormPasses = 6;  // sum (mean), subtract, square + sum (variance), rsqrt and
                                     // scale, x gamma, + beta
constexpr int kRopePasses = 4;       // x cos, rotate half, x sin, add
constexpr int kGeluPasses = 1;       // fused into the up-projection's packer, approximate mode
constexpr int kAddPasses = 1;

// Accumulates the step's ops by name, in first-seen order.
class StepBuilder {
 public:
  // `times` runs of an op costing `c` each.
  void Add(const std::string& name, const OpCost& c, int times) {
    StepOp& op = Op(name);
    op.per_step += times;
    op.us += times * c.us;
    op.launch_us += times * c.launch_us;
    const double body = c.us - c.launch_us;
    (c.dram_us >= c.compute_us ? op.dram_us : op.compute_us) += times * body;
  }
  void AddCollective(const std::string& name, const CollectiveCost& cc, double launch_us,
                     int times) {
    StepOp& op = Op(name);
    op.per_step += times;
    op.us += times * (cc.us + launch_us);
    op.eth_us += times * cc.us;
    op.launch_us += times * launch_us;
  }
  std::vector<StepOp> Take() { return std::move(ops_); }

 private:
  StepOp& Op(const std::string& name) {
    for (StepOp& op : ops_)
      if (op.name == name) return op;
    ops_.push_back(StepOp{name});
    return ops_.back();
  }
  std::vector<StepOp> ops_;
};

}  // namespace

DecodeStepEstimate EstimateDecodeStep(const FalconConfig& c, const DecodeStepOptions& o) {
  const MeshSpec mesh = MeshPreset(o.mesh);
  const WormholeChipSpec& chip = mesh.chip;
  if (o.users < 1 || o.users > 1024)
    throw Error(Cat("--users must be in [1, 1024], got ", o.users));
  if (o.ctx < 1 || o.ctx > (1 << 24))
    throw Error(Cat("--ctx must be in [1, 16777216], got ", o.ctx));
  if (o.kv == TileFormat::kBFP4)
    throw Error("--kv-dtype bfp4: the attention model reads bf16 or bfp8 caches");
  if (o.eth_links < 1) throw Error(Cat("Ethernet links must be >= 1, got ", o.eth_links));
  const int n = mesh.chips;
  const int64_t users = o.users, hidden = c.hidden_size, ffn = c.ffn_hidden_size;
  const int64_t hd = c.head_dim();
  const int64_t q_per_chip = (c.n_head + n - 1) / n;
  const int64_t kv_per_chip = std::max<int64_t>(1, (c.n_kv_heads + n - 1) / n);
  const double launch_us = LaunchUs(chip);
  const int layers = c.n_layers;

  DecodeStepEstimate est;
  est.chips = n;
  StepBuilder b;
  // The residual and every gathered activation: [users, hidden] in the activation format.
  const double act_bytes =
      static_cast<double>(Tiles(users) * Tiles(hidden)) * TileBytes(o.activations);
  RingSpec gather{n, o.eth_links, /*bidirectional=*/true, mesh.eth};
  RingSpec scatter = gather;
  scatter.bidirectional = false;  // tt-metal's reduce_scatter: "only unidirectional supported"
  const CollectiveCost ag = RingCollective(CollectiveKind::kAllGather, gather, act_bytes);
  const CollectiveCost rs = RingCollective(CollectiveKind::kReduceScatter, scatter, act_bytes);
  const bool multi = n > 1;

  b.Add("embedding", EltwiseCost(chip, 0, 0, static_cast<double>(users * hidden) * 2.0 / n), 1);
  const OpCost ln = EltwiseCost(chip, Tiles(users) * Tiles(hidden), kLayerNormPasses, 0);
  const TileFormat w_attn = o.attn_weights.value_or(o.weights);
  const TileFormat w_mlp = o.mlp_weights.value_or(o.weights);
  const TileFormat w_lm_head = o.lm_head_weights.value_or(o.weights);
  const OpCost qkv =
      MatmulCost(chip, users, hidden, (q_per_chip + 2 * kv_per_chip) * hd, w_attn, o.fidelity);
  const OpCost heads = EltwiseCost(chip, 0, 0, 0);
  const OpCost rope =
      EltwiseCost(chip, (q_per_chip + kv_per_chip) * Tiles(users) * Tiles(hd), kRopePasses, 0);
  // update_cache rewrites each user's tile row of K (then V): read and write a tile per user.
  const OpCost kv_update = EltwiseCost(
      chip, 0, 0, 2.0 * static_cast<double>(kv_per_chip * users * Tiles(hd)) * TileBytes(o.kv));
  const OpCost dense = MatmulCost(chip, users, hidden, (hidden + n - 1) / n, w_attn, o.fidelity);
  OpCost up = MatmulCost(chip, users, hidden, (ffn + n - 1) / n, w_mlp, o.fidelity);
  const OpCost gelu = EltwiseCost(chip, Tiles(users) * Tiles((ffn + n - 1) / n), kGeluPasses, 0);
  up.compute_us += gelu.compute_us;
  up.us = up.launch_us + std::max(up.dram_us, up.compute_us);
  const OpCost down = MatmulCost(chip, users, (ffn + n - 1) / n, hidden, w_mlp, o.fidelity);
  const OpCost add = EltwiseCost(chip, Tiles(users) * Tiles((hidden + n - 1) / n), kAddPasses, 0);

  // Attention: the FlashDecode engine's planning run and its performance model, unchanged.
  MeshBenchConfig ac;
  ac.experiment = "decode-step";
  ac.mesh = o.mesh;
  ac.bsz = o.users;
  ac.n_q_heads = c.n_head;
  ac.n_kv_heads = c.n_kv_heads;
  ac.head_dim = static_cast<int>(hd);
  ac.kv_len = o.ctx;
  ac.kv_dtype = TileFormatName(o.kv);
  ac.reduction = Reduction::kTree;
  ac.baseline = o.unfused_attention;
  const MeshBenchRow attn = RunMeshBenchConfig(ac);

  for (int l = 0; l < layers; ++l) {
    if (multi) b.AddCollective("all_gather", ag, launch_us, 1);
    b.Add("layernorm", ln, 2);
    b.Add("qkv", qkv, 1);
    b.Add("heads", heads, 1);
    b.Add("rope", rope, 2);
    b.Add("kv_update", kv_update, 2);
    // FlashDecode streams K/V at the chip's bandwidth: its time past the launch is DRAM time
    // (the model's critical path is the reads; compute overlaps them).
    OpCost attention;
    attention.us = attn.emulated_us;
    attention.launch_us = launch_us;
    attention.dram_us = attn.emulated_us - launch_us;
    b.Add("attention", attention, 1);
    b.Add("heads", heads, 1);
    if (multi) b.AddCollective("all_gather", ag, launch_us, 1);
    b.Add("dense", dense, 1);
    b.Add("residual", add, 1);
    b.Add("mlp", up, 1);
    b.Add("mlp", down, 1);
    if (multi) b.AddCollective("reduce_scatter", rs, launch_us, 1);
    b.Add("residual", add, 1);
  }
  if (multi) b.AddCollective("all_gather", ag, launch_us, 1);
  b.Add("layernorm", ln, 1);
  const int64_t vocab = FracturedLMHead::PaddedVocab(c.vocab_size, o.lm_head_fractures);
  b.Add("lm_head", MatmulCost(chip, users, hidden, (vocab + n - 1) / n, w_lm_head, o.fidelity), 1);

  est.ops = b.Take();
  for (const StepOp& op : est.ops) {
    est.step_us += op.us;
    est.dram_us += op.dram_us;
    est.compute_us += op.compute_us;
    est.eth_us += op.eth_us;
    est.launch_us += op.launch_us;
  }
  est.tokens_per_s_per_user = 1e6 / est.step_us;
  est.tokens_per_s = est.tokens_per_s_per_user * users;
  auto weight_bytes = [&](int64_t k, int64_t cols, TileFormat f) {
    return static_cast<double>(Tiles(k) * Tiles(cols)) * TileBytes(f);
  };
  est.weight_bytes_per_chip =
      layers * (weight_bytes(hidden, (q_per_chip + 2 * kv_per_chip) * hd, w_attn) +
                weight_bytes(hidden, (hidden + n - 1) / n, w_attn) +
                2 * weight_bytes(hidden, (ffn + n - 1) / n, w_mlp)) +
      weight_bytes(hidden, (vocab + n - 1) / n, w_lm_head);
  est.kv_bytes_per_chip =
      2.0 * layers * kv_per_chip * users * Tiles(o.ctx) * Tiles(hd) * TileBytes(o.kv);
  return est;
}

}  // namespace wc
