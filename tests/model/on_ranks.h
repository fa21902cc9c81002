// Tensor parallel inside one test process: R ranks as threads (dist/thread_group.h), each loading
// its slice of a checkpoint, rank 0 leading and the others following (model/tensor_parallel.h).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dist/thread_group.h"
#include "model/decoder_model.h"
#include "model/tensor_parallel.h"

namespace wc::test {

// Loads `dir` with `options` on every rank of a `ranks`-thread group and runs `body(model)` on
// rank 0 while the others follow until it is done. `held`: each rank's ModelWeights::HeldBytes.
// A rank that throws aborts the group; every rank's error is expected to be empty.
template <typename Body>
void OnRanks(const std::string& dir, int ranks, const ModelOptions& options, Body body,
             std::vector<int64_t>* held = nullptr) {
  auto group = MakeThreadGroup(ranks);
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  if (held) held->assign(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        ModelOptions o = options;
        o.tensor_group = group[static_cast<size_t>(r)].get();
        auto model = DecoderModel::Load(dir, o);
        if (held) (*held)[static_cast<size_t>(r)] = model->weights().HeldBytes();
        if (r == 0) {
          body(*model);
          model->StopFollowers();
        } else {
          FollowSteps(*model);
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        group[static_cast<size_t>(r)]->Abort(1);
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace wc::test
