#include "serving/scripted_proposer.h"

#include <algorithm>

#include "util/error.h"

namespace wc {
namespace {

// splitmix64's finalizer: a well-mixed 64-bit hash of one word.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Follows the tokens appended after the history it was reset with while they are the script's;
// proposes what comes next.
class ScriptedProposer final : public Proposer {
 public:
  explicit ScriptedProposer(const ScriptedProposerSource& source) : source_(source) {}
  void Reset(const std::vector<int>& /*history*/) override {
    kept_ = 0;
    on_script_ = true;
  }
  void Append(int token) override {
    const std::vector<int>& script = source_.script();
    on_script_ = on_script_ && kept_ < script.size() && script[kept_] == token;
    ++kept_;
  }
  std::vector<int> Propose(int k) override {
    std::vector<int> out;
    if (!on_script_ || k <= 0) return out;
    const size_t end = std::min(source_.script().size(), kept_ + static_cast<size_t>(k));
    for (size_t pos = kept_; pos < end; ++pos) out.push_back(source_.ProposalAt(pos));
    return out;
  }

 private:
  const ScriptedProposerSource& source_;
  size_t kept_ = 0;        // tokens appended since the reset
  bool on_script_ = true;  // they equal the script's first kept_ tokens
};

}  // namespace

ScriptedProposerSource::ScriptedProposerSource(std::vector<int> script, double accept,
                                               int vocab_size, uint64_t seed)
    : script_(std::move(script)), accept_(accept), vocab_size_(vocab_size), seed_(seed) {
  if (!(accept >= 0.0 && accept <= 1.0))
    throw Error(Cat("--oracle-accept must be in 0-1, got ", accept));
  if (vocab_size < 2) throw Error(Cat("scripted proposals need a vocabulary of 2 or more tokens"));
}

std::unique_ptr<Proposer> ScriptedProposerSource::Make(int /*user_row*/) {
  return std::make_unique<ScriptedProposer>(*this);
}

int ScriptedProposerSource::ProposalAt(size_t pos) const {
  const int right = script_[pos];
  // The top 53 bits as a double in [0, 1): exact, and the same on every machine.
  const double u = static_cast<double>(Mix(seed_ ^ Mix(pos)) >> 11) * 0x1.0p-53;
  return u < accept_ ? right : (right + 1) % vocab_size_;
}

}  // namespace wc
