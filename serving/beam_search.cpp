#include "serving/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace wc {

void BeamParams::Validate() const {
  if (num_beams < 1 || num_beams > kMaxBeams)
    throw Error(Cat("--beams must be in 1-", kMaxBeams, ", got ", num_beams));
  run_option::kLengthPenalty.Check(length_penalty, "--length-penalty");
  if (num_return < 1 || num_return > num_beams)
    throw Error(Cat("--num-return must be in [1, --beams = ", num_beams, "], got ", num_return));
}

BeamSearch::BeamSearch(const BeamParams& params) : params_(params) {
  params_.Validate();
  live_.emplace_back();  // one live beam before the first step
}

double BeamSearch::Normalized(double score, size_t length) const {
  return score / std::pow(static_cast<double>(length), static_cast<double>(params_.length_penalty));
}

void BeamSearch::AddHypothesis(BeamHypothesis h) {
  if (static_cast<int>(finished_.size()) < params_.num_beams) {
    finished_.push_back(std::move(h));
    return;
  }
  // Full: replace the worst (the last kept among equals) if the new one is better.
  auto worst = finished_.begin();
  for (auto it = finished_.begin(); it != finished_.end(); ++it)
    if (it->score <= worst->score) worst = it;
  if (h.score > worst->score) {
    finished_.erase(worst);
    finished_.push_back(std::move(h));
  }
}

BeamSearch::Step BeamSearch::Advance(const float* logits, int vocab,
                                     const std::function<bool(int, int)>& ends) {
  WC_CHECK(!done_, "Advance after the beam search ended");
  WC_CHECK(vocab > 0, "empty vocabulary");
  const int W = params_.num_beams;
  const int n_live = live();
  const size_t want = static_cast<size_t>(2 * W);
  struct Candidate {
    double score;
    int beam, token;
  };
  // Better first: higher score, then lower beam, then lower token id.
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  };
  std::vector<Candidate> candidates;  // the best `want` of each beam, then of all
  std::vector<int> order(vocab);
  for (int b = 0; b < n_live; ++b) {
    const float* row = logits + static_cast<int64_t>(b) * vocab;
    // log-softmax in double: logit - (max + log sum exp(logit - max)).
    double max = -std::numeric_limits<double>::infinity();
    for (int t = 0; t < vocab; ++t)
      if (!std::isnan(row[t])) max = std::max(max, static_cast<double>(row[t]));
    if (!std::isfinite(max)) throw Error("beam search: the model produced no finite logit");
    double sum = 0;
    for (int t = 0; t < vocab; ++t)
      if (!std::isnan(row[t])) sum += std::exp(static_cast<double>(row[t]) - max);
    const double log_z = max + std::log(sum);
    for (int t = 0; t < vocab; ++t) order[t] = t;
    const size_t k = std::min(want, static_cast<size_t>(vocab));
    auto by_logit = [row](int a, int c) {
      const bool na = std::isnan(row[a]), nc = std::isnan(row[c]);
      if (na || nc) return na == nc ? a < c : nc;
      return row[a] > row[c] || (row[a] == row[c] && a < c);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), by_logit);
    for (size_t i = 0; i < k; ++i) {
      const int t = order[i];
      if (std::isnan(row[t])) break;
      candidates.push_back({live_[b].score + (static_cast<double>(row[t]) - log_z), b, t});
    }
  }
  const size_t k = std::min(want, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), better);
  candidates.resize(k);

  Step step;
  std::vector<Beam> next;
  for (size_t rank = 0; rank < candidates.size() && static_cast<int>(next.size()) < W; ++rank) {
    const Candidate& c = candidates[rank];
    if (ends(c.beam, c.token)) {
      if (static_cast<int>(rank) >= W) continue;
      BeamHypothesis h;
      h.tokens = live_[c.beam].tokens;
      h.tokens.push_back(c.token);
      h.score = Normalized(c.score, h.tokens.size());
      h.ended = true;
      AddHypothesis(std::move(h));
      continue;
    }
    Beam beam;
    beam.tokens = live_[c.beam].tokens;
    beam.tokens.push_back(c.token);
    beam.score = c.score;
    next.push_back(std::move(beam));
    step.parents.push_back(c.beam);
    step.tokens.push_back(c.token);
  }
  live_ = std::move(next);

  // The stopping test, once per step.
  if (live_.empty()) {
    done_ = true;
  } else if (static_cast<int>(finished_.size()) == W) {
    if (params_.early_stopping) {
      done_ = true;
    } else {
      double worst = std::numeric_limits<double>::infinity();
      for (const BeamHypothesis& h : finished_) worst = std::min(worst, h.score);
      const Beam& best = live_.front();  // walked first: the highest score
      done_ = Normalized(best.score, best.tokens.size()) <= worst;
    }
  }
  return step;
}

void BeamSearch::Finalize() {
  for (Beam& beam : live_) {
    if (beam.tokens.empty()) continue;
    BeamHypothesis h;
    h.score = Normalized(beam.score, beam.tokens.size());
    h.tokens = std::move(beam.tokens);
    h.ended = false;
    AddHypothesis(std::move(h));
  }
  live_.clear();
  done_ = true;
}

std::vector<BeamHypothesis> BeamSearch::Best() const {
  std::vector<BeamHypothesis> best = finished_;
  std::stable_sort(best.begin(), best.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) {
    return a.score > b.score;
  });
  if (static_cast<int>(best.size()) > params_.num_return) best.resize(params_.num_return);
  return best;
}

}  // namespace wc
