// cpp-httplib's server with a whole-request read deadline: each request on a connection must be
// read whole (request line, headers and body) within `request_timeout` of the moment its first
// byte could be read (a worker took the connection, or the connection's previous response was
// written), besides each read waiting at most the server's read timeout (set_read_timeout).
// Past the deadline the request's reads fail: httplib answers 400, which the error handler makes
// a 408 when RequestDeadlinePassed() (once the headers were read; a request line not read in time
// gets no answer), and the connection is closed. So a client that sends one byte a second holds
// one worker for at most `request_timeout`, and the wait is on its own worker thread: nobody else
// is delayed.
//
// Why a subclass: cpp-httplib 0.11 times each read only, so a trickling client keeps its worker as
// long as it likes. Its Server::process_and_close_socket (one connection, from accept to close)
// is virtual, and the compiled libcpp-httplib calls it through the vtable from the accept loop's
// task, so the connection is served here instead: the same keep-alive loop around the library's
// own process_request (keep-alive count and idle timeout, write timeout, ending once stop() is
// called), over a Stream of our own whose reads end at the deadline.
//
// The deadline covers reading a request, never writing its reply: once a route's handler is
// entered no read of that request follows (the routes here take whole bodies), and writes wait
// only for the write timeout. A streamed reply may run as long as it runs.
#pragma once

#include <httplib.h>

#include <chrono>

namespace wc {

class DeadlineHttpServer : public httplib::Server {
 public:
  explicit DeadlineHttpServer(std::chrono::steady_clock::duration request_timeout);

  // After bind: the listening socket's backlog raised to `backlog` (the kernel caps it at
  // net.core.somaxconn). cpp-httplib 0.11 listens with a backlog of 5: a burst of connections
  // overflowed it, and past the SYN cookies some were reset (64 clients at once lost ~19).
  void SetListenBacklog(int backlog);
  // Stops accepting, whenever it is called: the listening socket is shut down and closed, so the
  // accept loop ends (or never begins) and connections in their keep-alive loop end after their
  // request. cpp-httplib 0.11's stop() does this only once the loop has set its running flag: a
  // stop() just after bind was lost, and the loop then ran for ever (or, never started, the bound
  // socket kept accepting connections nobody answered).
  void CloseListener();

 private:
  // One connection on its worker thread: requests under their deadlines until the client closes,
  // stays idle past the keep-alive timeout, a request is not read in time, or stop() is called;
  // then the socket is shut down and closed.
  bool process_and_close_socket(socket_t sock) override;

  std::chrono::steady_clock::duration request_timeout_;
};

// On a DeadlineHttpServer's worker thread while it answers a request (its error handler): whether
// that request's deadline passed before it was read whole. False on any other thread.
bool RequestDeadlinePassed();

// On a DeadlineHttpServer's worker thread while it answers a request: the connection is closed
// once this response is written (the caller sets "Connection: close" on it, so the client does
// not send another). For answers given before the request's body was read (a wrong key, a body
// too large): the unread rest of the body would otherwise be read as the next request, and a
// client reusing the connection - the openai client's shared keep-alive agent does - would get a
// reset. No-op on any other thread.
void CloseConnectionAfterResponse();

}  // namespace wc
