// --api-key-file, as `wormchat serve` and `wormchat chat --server` read it: the key kept off the
// command line (where `ps` shows it), in a file of one line.
#pragma once

#include <string>

namespace wc {

// The key in `path`: its contents without trailing line breaks and spaces. Throws wc::Error
// "--api-key-file PATH: ..." for a file that cannot be read, is empty, larger than 4 KiB, or holds
// more than one line.
std::string ReadApiKeyFile(const std::string& path);

}  // namespace wc
