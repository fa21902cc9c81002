#include "app/rank_lifecycle.h"

#include "app/model_loader.h"
#include "dist/communicator.h"
#include "model/tensor_parallel.h"

namespace wc {

RankRole FollowUnlessTensorParallelLeader(const ModelRunOptions& o) {
  if (o.tensor_parallel <= 1 || World().rank() == 0) return RankRole::kRunsCommand;
  const LoadedModel m = LoadModel(o, /*need_tokenizer=*/false);
  FollowSteps(*m.model);  // until rank 0 is done: so is this rank
  return RankRole::kFollowed;
}

}  // namespace wc
