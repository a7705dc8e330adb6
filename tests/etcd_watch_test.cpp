// The parser of etcd's /v3/watch stream (probes/etcd_watch.h), on lines as the v3 gateway of
// etcd 3.4 writes them, and on lines it never writes.
#include "probes/etcd_watch.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/common/base64.h"

namespace sbd {
namespace {

const std::string kCreated =
    R"({"result":{"header":{"cluster_id":"1","member_id":"2","revision":"1","raft_term":"2"},)"
    R"("created":true}})";

std::string PutLine(const std::string& value, int revision) {
  return R"({"result":{"header":{"revision":")" + std::to_string(revision) +
         R"("},"events":[{"kv":{"key":"L3NlcnZpY2UveC9sZWFkZXI=","mod_revision":")" +
         std::to_string(revision) + R"(","value":")" + Base64Encode(value) + R"("}}]}})";
}

std::vector<EtcdWatchMessage> FeedAll(EtcdWatchStream& stream, const std::string& bytes,
                                      bool* usable) {
  std::vector<EtcdWatchMessage> out;
  *usable = stream.Feed(bytes.data(), bytes.size(), &out);
  return out;
}

}  // namespace

TEST_CASE("etcd watch: created, put and delete messages, split anywhere in the stream",
          "[etcd_watch]") {
  const std::string bytes =
      kCreated + "\n" + PutLine("node1", 2) + "\n" +
      R"({"result":{"header":{"revision":"3"},"events":[{"type":"DELETE","kv":{"key":"eA==","mod_revision":"3"}}]}})"
      "\n";
  EtcdWatchStream stream;
  std::vector<EtcdWatchMessage> messages;
  // One byte at a time: the reader must not care where the network cuts.
  for (char c : bytes) REQUIRE(stream.Feed(&c, 1, &messages));
  REQUIRE(messages.size() == 3);
  CHECK(messages[0].created);
  CHECK(messages[0].revision == 1);
  CHECK(messages[0].values.empty());
  REQUIRE(messages[1].values.size() == 1);
  CHECK(messages[1].values[0] == std::optional<std::string>("node1"));
  CHECK(messages[1].revision == 2);
  REQUIRE(messages[2].values.size() == 1);
  CHECK_FALSE(messages[2].values[0].has_value());
  CHECK(messages[2].error.empty());
}

TEST_CASE("etcd watch: a cancelled, compacted or failed watch makes the stream unusable",
          "[etcd_watch]") {
  auto compacted = EtcdWatchStream::Parse(
      R"({"result":{"header":{"revision":"90"},"canceled":true,"compact_revision":"50"}})");
  CHECK(compacted.compacted);
  CHECK_FALSE(compacted.error.empty());
  auto cancelled = EtcdWatchStream::Parse(R"({"result":{"canceled":true}})");
  CHECK_FALSE(cancelled.compacted);
  CHECK_FALSE(cancelled.error.empty());
  auto failed = EtcdWatchStream::Parse(R"({"error":{"grpc_code":14,"message":"unavailable"}})");
  CHECK_FALSE(failed.error.empty());
}

TEST_CASE("etcd watch: bytes that are not etcd's answer are errors, never a crash",
          "[etcd_watch]") {
  for (const std::string line :
       {"not json", "[1,2]", R"({"result":7})", R"({"result":{"header":{"revision":7}}})",
        R"({"result":{"header":{"revision":"-1"}}})",
        R"({"result":{"header":{"revision":"99999999999999999999"}}})",
        R"({"result":{"events":{}}})", R"({"result":{"events":[{"type":"PUT"}]}})",
        R"({"result":{"events":[{"type":"TOUCH","kv":{}}]}})",
        R"({"result":{"events":[{"kv":{"value":"not base64!"}}]}})",
        R"({"result":{"events":[{"kv":{"value":5}}]}})"}) {
    INFO(line);
    CHECK_FALSE(EtcdWatchStream::Parse(line).error.empty());
  }
  // An empty value is omitted by etcd: a put of "".
  auto empty = EtcdWatchStream::Parse(R"({"result":{"events":[{"kv":{"key":"eA=="}}]}})");
  CHECK(empty.error.empty());
  REQUIRE(empty.values.size() == 1);
  CHECK(empty.values[0] == std::optional<std::string>(""));
}

TEST_CASE("etcd watch: a line longer than the limit stops the stream", "[etcd_watch]") {
  EtcdWatchStream stream(64);
  bool usable = true;
  auto messages = FeedAll(stream, std::string(65, 'x'), &usable);
  CHECK_FALSE(usable);
  REQUIRE(messages.size() == 1);
  CHECK_FALSE(messages[0].error.empty());
  EtcdWatchStream blank_lines;
  messages = FeedAll(blank_lines, "\n\r\n" + kCreated + "\n", &usable);
  CHECK(usable);
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].created);
}

}  // namespace sbd
