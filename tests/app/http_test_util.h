// Plain HTTP/1.1 over a socket for the tests of `wormchat serve` as a process (cli_test,
// mpi_test): no client library between the test and the bytes the server sends.
#pragma once

#include <string>

namespace wc::test {

// Sends `request` over a fresh connection to 127.0.0.1:`port`; everything received until the
// server closes it ("" if it cannot connect). A server that never closes fails after 60 s.
std::string Exchange(int port, const std::string& request);

// POST (or GET with an empty body) over a fresh connection with "Connection: close"; the whole
// response as received (status line, headers, body).
std::string Http(int port, const std::string& method, const std::string& path,
                 const std::string& body, const std::string& extra_headers = "");

// The body of a chunked or plain response.
std::string Body(const std::string& response);

}  // namespace wc::test
