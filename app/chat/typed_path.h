// File names as the user types them after /export, /save and /load: "~/" expanded, and the
// candidates Tab completes a partial name to. Terminal-free (tested on a temporary directory).
#pragma once

#include <string>
#include <vector>

namespace wc {

// `path` with a leading "~/" (or a lone "~") replaced by $HOME; anything else (and everything
// when HOME is unset or empty) unchanged. "~user/" is not expanded.
std::string ExpandHome(const std::string& path);

// The names `partial` completes to, as typed plus the rest, sorted (byte order): the entries of
// the directory its part up to the last '/' names (the current directory when it has none; a
// leading "~/" is listed as $HOME's but kept as typed) whose names start with the part after the
// last '/'. A directory (a symbolic link to one too) ends in '/'. Entries starting with '.' only
// when that part starts with '.' ("." and ".." never). A lone "~" completes to "~/". An
// unreadable or missing directory has none.
std::vector<std::string> FileNameCandidates(const std::string& partial);

// The longest common prefix of `options` ("" when there are none), cut back to a UTF-8 character
// boundary so that it never ends inside a multi-byte character two options start differently.
std::string CommonPrefix(const std::vector<std::string>& options);

}  // namespace wc
