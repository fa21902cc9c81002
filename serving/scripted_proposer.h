// A proposer that knows the text ahead (issue 34's oracle): it proposes the continuation of a
// given token sequence - the model's own greedy output from an earlier run, in `bench model
// --speculate oracle` - with a share of the proposals made wrong on purpose (--oracle-accept).
// Random-weight checkpoints never repeat their prompts, so this is how the verify path's cost and
// gain are measured whatever the weights; tests use it to build steps that accept all, none or
// part of the proposals.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "serving/proposer.h"

namespace wc {

class ScriptedProposerSource final : public ProposerSource {
 public:
  // script: [n] the continuation the row is expected to produce after the history a proposer is
  // reset with (whatever that is: the prompt as the loop framed it, a session's turns). accept: the
  // share of proposals left right, in [0, 1]; which positions are made wrong is a hash of (seed,
  // position), so the same position is right or wrong on every run, whatever k or step proposes it.
  // A wrong proposal is (right + 1) % vocab_size, never the scripted token. Throws wc::Error naming
  // --oracle-accept outside [0, 1].
  ScriptedProposerSource(std::vector<int> script, double accept, int vocab_size, uint64_t seed = 0);
  std::unique_ptr<Proposer> Make(int user_row) override;

  // The token proposed for continuation position `pos` (< script size): right or made wrong.
  int ProposalAt(size_t pos) const;
  const std::vector<int>& script() const { return script_; }

 private:
  std::vector<int> script_;  // [n] the continuation
  double accept_;
  int vocab_size_;
  uint64_t seed_;
};

}  // namespace wc
