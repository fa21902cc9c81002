#include "app/serve/request_deadline.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>

namespace wc {
namespace {

using Clock = std::chrono::steady_clock;

// How often a connection waiting for its next request looks whether the server is stopping.
constexpr Clock::duration kStopPoll = std::chrono::milliseconds(100);

// Waits until `fd` is ready for `events` (or has failed or hung up: the next call on it says
// which), at most until `end`; false when `end` came first. Polls at least once.
bool PollUntil(int fd, short events, Clock::time_point end) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30)));
    if (r > 0 || (r < 0 && errno != EINTR)) return true;
    if (Clock::now() >= end) return false;
  }
}

void IpAndPort(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return;
  }
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host.data(), host.size(), nullptr,
                  0, NI_NUMERICHOST) == 0)
    ip = host.data();
}

// One connection's socket as httplib reads and writes it. Reads are buffered (httplib reads a
// request's lines a byte at a time) and kept across the connection's requests, so a pipelined
// request is never lost; each waits at most the read timeout and never past the current request's
// deadline. Writes wait at most the write timeout, and fail once the client has closed.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, Clock::duration read_timeout, Clock::duration write_timeout)
      : fd_(fd), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // A new request begins: its reads end at `deadline`.
  void Arm(Clock::time_point deadline) {
    deadline_ = deadline;
    expired_ = false;
  }
  // A read of the current request failed because its deadline passed.
  bool expired() const { return expired_; }

  // Waits for the next request's first byte, at most `idle` and never past the deadline; false
  // when none came, or once `stopping` says so (looked at every kStopPoll).
  bool AwaitRequest(Clock::duration idle, const std::function<bool()>& stopping) {
    if (off_ < size_) return true;
    const Clock::time_point end = std::min(Clock::now() + idle, deadline_);
    while (!stopping()) {
      if (PollUntil(fd_, POLLIN, std::min(end, Clock::now() + kStopPoll))) return true;
      if (Clock::now() >= end) return false;
    }
    return false;
  }

  bool is_readable() const override { return off_ < size_ || WaitReadable(); }

  bool is_writable() const override {
    return PollUntil(fd_, POLLOUT, Clock::now() + write_timeout_) && PeerOpen();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == size_) {
      if (!WaitReadable()) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buf_.data(), buf_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      size_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, size_ - off_);
    std::memcpy(ptr, buf_.data() + off_, k);
    off_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      IpAndPort(addr, len, ip, port);
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      IpAndPort(addr, len, ip, port);
  }

  socket_t socket() const override { return fd_; }

 private:
  // Waits for input up to the read timeout, never past the deadline (the request is then
  // expired).
  bool WaitReadable() const {
    if (PollUntil(fd_, POLLIN, std::min(Clock::now() + read_timeout_, deadline_))) return true;
    if (Clock::now() >= deadline_) expired_ = true;
    return false;
  }

  // Whether the client has not closed its side (input pending, or nothing to read yet): a reply
  // to a client that has gone fails at its next write, not after the kernel's buffers fill.
  bool PeerOpen() const {
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  const int fd_;
  const Clock::duration read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool expired_ = false;
  std::array<char, 4096> buf_;
  size_t off_ = 0, size_ = 0;  // buf_[off_, size_): read from the socket, not yet taken
};

// The connection this worker thread serves (for RequestDeadlinePassed), and whether it closes
// after the response being written (CloseConnectionAfterResponse).
thread_local const ConnectionStream* current_connection = nullptr;
thread_local bool close_after_response = false;

}  // namespace

DeadlineHttpServer::DeadlineHttpServer(Clock::duration request_timeout)
    : request_timeout_(request_timeout) {}

void DeadlineHttpServer::SetListenBacklog(int backlog) {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);  // re-listening sets the backlog
}

void DeadlineHttpServer::CloseListener() {
  const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
  if (sock == INVALID_SOCKET) return;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

bool DeadlineHttpServer::process_and_close_socket(socket_t sock) {
  const auto seconds = [](time_t s, time_t us) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(s) +
                                                       std::chrono::microseconds(us));
  };
  ConnectionStream conn(sock, seconds(read_timeout_sec_, read_timeout_usec_),
                        seconds(write_timeout_sec_, write_timeout_usec_));
  // Closes the socket and forgets the connection however this returns.
  struct Serving {
    socket_t sock;
    explicit Serving(socket_t s, const ConnectionStream* c) : sock(s) { current_connection = c; }
    ~Serving() {
      current_connection = nullptr;
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
    }
  } serving(sock, &conn);
  const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
    conn.Arm(Clock::now() + request_timeout_);
    if (!conn.AwaitRequest(seconds(keep_alive_timeout_sec_, 0), stopping)) break;
    bool closed = false;
    close_after_response = false;
    ok = process_request(conn, /*close_connection=*/left == 1, closed, {});
    if (!ok || closed || conn.expired() || close_after_response) break;
  }
  return ok;
}

void CloseConnectionAfterResponse() {
  if (current_connection != nullptr) close_after_response = true;
}

bool RequestDeadlinePassed() {
  return current_connection != nullptr && current_connection->expired();
}

}  // namespace wc
