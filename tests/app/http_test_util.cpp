#include "tests/app/http_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace wc::test {

std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const timeval guard{60, 0};  // a server that never closes fails the test, never hangs it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

std::string Http(int port, const std::string& method, const std::string& path,
                 const std::string& body, const std::string& extra_headers) {
  return Exchange(port, method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers +
                            "Content-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

std::string Body(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  if (head == std::string::npos) return "";
  std::string rest = response.substr(head + 4);
  if (response.find("Transfer-Encoding: chunked") == std::string::npos) return rest;
  std::string body;
  size_t pos = 0;
  while (pos < rest.size()) {
    const size_t eol = rest.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(rest.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    body += rest.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return body;
}

}  // namespace wc::test
