#include "app/rank_lifecycle.h"

#include <vector>

#include "app/model_loader.h"
#include "dist/communicator.h"
#include "model/tensor_parallel.h"
#include "util/error.h"

namespace wc {

RankRole FollowUnlessTensorParallelLeader(const ModelRunOptions& o) {
  if (o.tensor_parallel <= 1 || World().rank() == 0) return RankRole::kRunsCommand;
  const LoadedModel m = LoadModel(o, /*need_tokenizer=*/false);
  FollowSteps(*m.model);  // until rank 0 is done: so is this rank
  return RankRole::kFollowed;
}

std::string RanksRefusalMessage(const CLI::App& app) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) return {};
  const CLI::App& cmd = *parsed.front();
  if (cmd.get_name() == "batch") return {};  // the requests are shared out across the ranks
  if (cmd.get_name() == "bench" && cmd.got_subcommand("ranks")) return {};
  const CLI::Option* tp = cmd.get_option_no_throw("--tensor-parallel");
  if (tp != nullptr && tp->count() > 0) return {};  // the model split across the ranks
  const Communicator& world = World();
  if (world.size() <= 1) return {};
  return Cat("wormchat ", cmd.get_name(), " runs in one process, but mpirun started ", world.size(),
             " ranks; under mpirun, run batch (its requests are shared out across the ranks) "
             "or a command with --tensor-parallel ",
             world.size(), " (the model split across the ranks)");
}

void RefuseCommandsThatRunInOneProcess(CLI::App& app) {
  app.parse_complete_callback([&app] {
    const std::string refusal = RanksRefusalMessage(app);
    if (!refusal.empty()) throw RanksRefusal(refusal);
  });
}

}  // namespace wc
