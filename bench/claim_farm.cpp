#include "bench/claim_farm.h"

#include <netinet/in.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace sbd::bench {

struct ClaimFarm::Connection {
  uv_tcp_t tcp{};
  ClaimFarm* farm = nullptr;
  std::string in;
};

namespace {

struct Write {
  uv_write_t req{};
  std::string bytes;
};

// GET /<lock>/<member> HTTP/1.1 -> the candidate's exposition for <lock>; anything else 404.
std::string Answer(const std::string& request_line) {
  const auto path = request_line.find(' ');
  const auto end = path == std::string::npos ? path : request_line.find(' ', path + 1);
  std::string lock;
  if (end != std::string::npos && request_line.compare(path + 1, 1, "/") == 0) {
    const std::string target = request_line.substr(path + 2, end - path - 2);
    lock = target.substr(0, target.find('/'));
  }
  if (lock.empty() || lock.find_first_of("\"\\\n") != std::string::npos) {
    return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
  }
  const std::string body =
      "# TYPE leader_election_master_status gauge\nleader_election_master_status{name=\"" + lock +
      "\",token=\"1\"} 0\n";
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void Close(uv_handle_t* handle) {
  uv_close(handle, [](uv_handle_t* h) { delete static_cast<ClaimFarm::Connection*>(h->data); });
}

}  // namespace

ClaimFarm::ClaimFarm() {
  uv_loop_init(&loop_);
  uv_tcp_init(&loop_, &server_);
  server_.data = this;
  sockaddr_in address{};
  uv_ip4_addr("127.0.0.1", 0, &address);
  if (uv_tcp_bind(&server_, reinterpret_cast<const sockaddr*>(&address), 0) != 0 ||
      uv_listen(reinterpret_cast<uv_stream_t*>(&server_), 4096, &ClaimFarm::OnConnection) != 0) {
    throw std::runtime_error("claim farm: cannot listen on 127.0.0.1");
  }
  int length = sizeof address;
  uv_tcp_getsockname(&server_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  uv_async_init(&loop_, &stop_, [](uv_async_t* async) {
    auto* farm = static_cast<ClaimFarm*>(async->data);
    uv_walk(
        async->loop,
        [](uv_handle_t* h, void* arg) {
          if (uv_is_closing(h)) return;
          const bool connection =
              h->type == UV_TCP &&
              h != reinterpret_cast<uv_handle_t*>(&static_cast<ClaimFarm*>(arg)->server_);
          if (connection) {
            Close(h);
          } else {
            uv_close(h, nullptr);
          }
        },
        farm);
  });
  stop_.data = this;
  thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
}

ClaimFarm::~ClaimFarm() {
  uv_async_send(&stop_);
  thread_.join();
  uv_loop_close(&loop_);
}

void ClaimFarm::OnConnection(uv_stream_t* server, int status) {
  if (status != 0) return;
  auto* farm = static_cast<ClaimFarm*>(server->data);
  auto* connection = new Connection;
  connection->farm = farm;
  uv_tcp_init(&farm->loop_, &connection->tcp);
  connection->tcp.data = connection;
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&connection->tcp)) != 0) {
    Close(reinterpret_cast<uv_handle_t*>(&connection->tcp));
    return;
  }
  ++farm->connections_;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&connection->tcp),
      [](uv_handle_t*, size_t, uv_buf_t* buf) {
        buf->base = static_cast<char*>(std::malloc(4096));
        buf->len = buf->base != nullptr ? 4096 : 0;
      },
      &ClaimFarm::OnRead);
}

void ClaimFarm::OnRead(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
  auto* connection = static_cast<Connection*>(stream->data);
  if (n > 0) connection->in.append(buf->base, static_cast<size_t>(n));
  std::free(buf->base);
  if (n < 0) {
    Close(reinterpret_cast<uv_handle_t*>(stream));
    return;
  }
  if (connection->in.size() > 65536) {  // no request of the detector's is that long
    Close(reinterpret_cast<uv_handle_t*>(stream));
    return;
  }
  for (auto end = connection->in.find("\r\n\r\n"); end != std::string::npos;
       end = connection->in.find("\r\n\r\n")) {
    auto* write = new Write;
    write->bytes = Answer(connection->in.substr(0, connection->in.find("\r\n")));
    connection->in.erase(0, end + 4);
    write->req.data = write;
    uv_buf_t out = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
    ++connection->farm->requests_;
    if (uv_write(&write->req, stream, &out, 1,
                 [](uv_write_t* req, int) { delete static_cast<Write*>(req->data); }) != 0) {
      delete write;
      Close(reinterpret_cast<uv_handle_t*>(stream));
      return;
    }
  }
}

}  // namespace sbd::bench
