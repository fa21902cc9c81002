// Command-line usage errors as one line each, with exit status 2 (bad input, files and values
// are 1): CLI11's own errors are mapped here, and a mistyped subcommand or flag gets the nearest
// valid one ("unknown flag --temprature; did you mean --temperature?").
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "util/nearest_name.h"

namespace wc {

inline constexpr int kExitUsage = 2;

// A usage error found by a command's own checks (a missing one-of option, ...): exit 2, as
// CLI11's own errors.
class UsageError : public CLI::ParseError {
 public:
  explicit UsageError(std::string message)
      : CLI::ParseError("UsageError", std::move(message), kExitUsage) {}
};

// Before parsing: the first argument must name a subcommand. Returns the one-line error for an
// unknown one (with the nearest name), or "" when argv is fine.
std::string UnknownSubcommandMessage(const CLI::App& app, int argc, char** argv);

// The one-line message (without "wormchat: error: ") for a CLI11 parse error of `app`: unknown
// flags and extra arguments name the nearest valid flag of the subcommand that was parsed.
std::string UsageMessage(const CLI::App& app, const CLI::ParseError& e);

}  // namespace wc
