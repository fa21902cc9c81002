// `wormchat bench`: the host benchmarks, one subcommand each (app/bench/).
#include "app/bench/attention.h"
#include "app/bench/beams.h"
#include "app/bench/model.h"
#include "app/bench/ranks.h"
#include "app/bench/serve.h"
#include "app/bench/tokenizer.h"
#include "app/commands/commands.h"

namespace wc {

void RegisterBench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Host benchmarks");
  bench->require_subcommand(1);
  RegisterBenchAttention(bench);
  RegisterBenchServe(bench);
  RegisterBenchModel(bench);
  RegisterBenchBeams(bench);
  RegisterBenchTokenizer(bench);
  RegisterBenchRanks(bench);
}

}  // namespace wc
