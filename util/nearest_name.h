// "Did you mean ...?": the nearest valid name to a mistyped one, for the command line's unknown
// subcommands and flags (app/cli_errors.h) and the chat's unknown /commands.
#pragma once

#include <string>
#include <vector>

namespace wc {

// The nearest of `candidates` to `word` by edit distance (insertions, deletions, substitutions,
// adjacent transpositions), if it is close enough to be a typo: distance <= max(1, |word| / 3).
// Empty when none is; the first of equally near candidates.
std::string NearestName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace wc
