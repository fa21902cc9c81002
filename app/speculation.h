// Speculative decoding's flags made real (issue 34): checked before anything is loaded, the draft
// model loaded and checked against the target once it is.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "app/model_loader.h"
#include "app/model_options.h"
#include "serving/request.h"

namespace wc {

// After parsing `cmd` (which registered AddSpeculationOptions): sets s.given; --draft-model given
// without --speculate means --speculate draft. Throws wc::Error, one line naming the flag, for
// --speculate draft without --draft-model, for --draft-model with --speculate off or lookup, and
// (kBeamsDoNotSpeculate) for speculation asked for with beam search (beams > 0); the default
// speculation steps aside for beam search silently (beam requests never speculate).
void CheckSpeculation(const CLI::App& cmd, SpeculationOptions& s, int beams = 0);

// The draft half of those checks, shared with `bench model --speculate`: --draft-model given
// without --speculate (`mode_given` false) sets *mode to draft; draft without a directory, or a
// directory with another mode, is the one-line error.
void ResolveDraftMode(bool mode_given, const std::string& draft_model, std::string* mode);

// --speculate draft: loads --draft-model whole in this process (a tensor-parallel leader's draft
// is its own; only the leader proposes) and sets s.source to a DraftModelSource with `user_rows`
// rows of the target's context, its KV in the checkpoint's own precision. The draft's tokenizer
// must give the target's ids (tokenizer/tokenizer_match.h) and its BOS/EOS ids must be the
// target's; a vocab_size padded beyond the tokenizer, on either side, is accepted (only the
// tokenizer's ids are proposed). Throws wc::Error naming --draft-model otherwise. No-op for other
// modes.
void LoadDraftModel(SpeculationOptions& s, const ModelRunOptions& target_options,
                    const LoadedModel& target, int user_rows);

// How the flags speculate, for a figures line: "prompt lookup, k up to 8, n-grams up to 3" or
// "draft model DIR, k up to 8" ("off" when off).
std::string DescribeSpeculation(const SpeculationOptions& s);

}  // namespace wc
