#include "meshmodel/decode_step.h"

#include <algorithm>

#include "mesh/wormhole_spec.h"
#include "model/lm_head.h"
#include "util/error.h"

namespace wc {

std::string GraphLabel(const DecodeStepOptions& o) {
  std::string label;
  auto add = [&label](const std::string& what) { label += (label.empty() ? "" : ", ") + what; };
  if (o.aiclk_ghz) add(Cat(*o.aiclk_ghz, " GHz"));
  if (o.dram_sharded) add("DRAM-sharded weights");
  if (o.op_floors_2025) add("2025 op floors");
  if (o.eth_links > 1) add(Cat(o.eth_links, " links"));
  if (o.flash_decode) add("FlashDecode");
  if (o.tokens_per_user > 1) add(Cat("verify ", o.tokens_per_user, " tokens a user"));
  if (o.large_subblocks) add("large subblocks");
  return label.empty() ? "measured" : label;
}

DecodeStepEstimate EstimateDecodeStep(const ModelConfig& c, const DecodeStepOptions& o) {
  const MeshSpec mesh = MeshPreset(o.mesh);
  if (o.eth_links < 0 || o.eth_links > 4)
    throw Error(Cat("Ethernet links must be in [1, 4], got ", o.eth_links));
  if (o.aiclk_ghz && !(*o.aiclk_ghz > 0.1 && *o.aiclk_ghz <= 2.0))
    throw Error(Cat("the clock must be in (0.1, 2] GHz, got ", *o.aiclk_ghz));
  if (o.kv && *o.kv == TileFormat::kBFP4)
    throw Error("--kv-dtype bfp4: tt-metal's Falcon caches are bf16 or bfp8");
  TtGraphOptions g;
  g.chips = mesh.chips;
  g.phase = o.phase;
  g.users = o.users;
  g.ctx = o.ctx;
  g.attn_weights = o.attn_weights.value_or(o.weights);
  g.mlp_weights = o.mlp_weights.value_or(o.weights);
  g.lm_head_weights = o.lm_head_weights.value_or(o.weights);
  g.kv = o.kv;
  g.lm_head_vocab = FracturedLMHead::PaddedVocab(c.vocab_size, o.lm_head_fractures);
  g.flash_decode = o.flash_decode;
  g.dram_sharded = o.dram_sharded;
  g.tokens_per_user = o.tokens_per_user;
  g.large_subblocks = o.large_subblocks;
  const TtGraph graph = BuildTtGraph(c, g);

  TtSoftware sw = MeasuredSoftware();
  if (o.aiclk_ghz) sw.aiclk_ghz = *o.aiclk_ghz;
  if (o.eth_links > 0) sw.eth_links = o.eth_links;
  if (o.op_floors_2025) {
    sw.fixed_move_cycles = 1070;
    sw.fixed_compute_cycles = 2780;
  }

  DecodeStepEstimate e;
  e.program = graph.program;
  e.graph = GraphLabel(o);
  e.chips = graph.chips;
  e.aiclk_ghz = sw.aiclk_ghz;
  e.kv = graph.kv;
  for (const TtOp& op : graph.ops) {
    const OpCost cost = CostOf(op, graph.chips, mesh.chip, sw);
    auto it = std::find_if(e.ops.begin(), e.ops.end(),
                           [&](const StepOp& s) { return s.name == op.name; });
    if (it == e.ops.end()) {
      e.ops.push_back(StepOp{op.name, TtOpKindName(op.kind)});
      it = e.ops.end() - 1;
    }
    StepOp& s = *it;
    s.per_step += op.runs;
    s.us += op.runs * cost.us;
    s.fixed_us += op.runs * cost.fixed_us;
    // The body goes to the resource that bounds it.
    const double body = cost.us - cost.fixed_us;
    if (cost.eth_us > 0)
      s.eth_us += op.runs * body;
    else if (cost.compute_us >= std::max(cost.dram_us, cost.noc_us))
      s.compute_us += op.runs * body;
    else if (cost.dram_us >= cost.noc_us)
      s.dram_us += op.runs * body;
    else
      s.noc_us += op.runs * body;
    e.programs += op.runs;
  }
  for (const StepOp& s : e.ops) {
    e.step_us += s.us;
    e.fixed_us += s.fixed_us;
    e.dram_us += s.dram_us;
    e.compute_us += s.compute_us;
    e.noc_us += s.noc_us;
    e.eth_us += s.eth_us;
  }
  e.phase = o.phase;
  if (o.phase == TtPhase::kPrefill) {
    e.tokens_per_s = o.ctx * 1e6 / e.step_us;
  } else {
    e.tokens_per_s_per_user = 1e6 / e.step_us;
    e.tokens_per_s = e.tokens_per_s_per_user * o.users;
  }
  e.weight_bytes_per_chip = graph.weight_bytes;
  e.kv_bytes_per_chip = graph.kv_bytes;
  return e;
}

}  // namespace wc
