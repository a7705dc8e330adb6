// The event-loop PostgreSQL probe's reading parser against hostile results: whatever answers on
// the member's port, a result that is not what the reading query yields from a real server is
// a protocol failure that drops the session, and nothing throws.
#include <catch2/catch.hpp>
#include <cstring>

#include "probes/postgres_async.h"

namespace sbd {
namespace {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// A valid reading of a streaming standby (16 columns, text values; nullptr is SQL NULL).
std::vector<const char*> StandbyRow() {
  return {"t",
          "f",
          "7713570374210613906",
          "3",
          "0/3000148",
          "50331976",
          "150004",
          "2026-12-01T00:00:00Z",
          "4242",
          "t",
          "streaming",
          "10.0.0.1",
          "5432",
          "3",
          "0/3000148",
          "2026-12-01T00:00:01Z"};
}

// A PGresult with one column per value, as libpq builds one from the wire.
ResultPtr Result(const std::vector<const char*>& row, int rows = 1) {
  ResultPtr result(PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK));
  std::vector<PGresAttDesc> columns(row.size());
  std::vector<std::string> names(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    names[i] = "c" + std::to_string(i);
    columns[i] = PGresAttDesc{};
    columns[i].name = names[i].data();
    columns[i].typlen = -1;
  }
  REQUIRE(PQsetResultAttrs(result.get(), static_cast<int>(columns.size()), columns.data()) == 1);
  for (int r = 0; r < rows; ++r) {
    for (size_t i = 0; i < row.size(); ++i) {
      char* value = const_cast<char*>(row[i]);
      const int length = value == nullptr ? -1 : static_cast<int>(std::strlen(value));
      REQUIRE(PQsetvalue(result.get(), r, static_cast<int>(i), value, length) == 1);
    }
  }
  return result;
}

ProbeFailure MustFail(const std::vector<const char*>& row, int rows = 1) {
  bool drop = false;
  auto parsed = ParseReadingResult(Result(row, rows).get(), &drop);
  REQUIRE(std::holds_alternative<ProbeFailure>(parsed));
  CHECK(drop);
  return std::get<ProbeFailure>(parsed);
}

}  // namespace

TEST_CASE("postgres result: a standby's reading is parsed with its WAL receiver", "[parse]") {
  bool drop = false;
  auto parsed = ParseReadingResult(Result(StandbyRow()).get(), &drop);
  REQUIRE(std::holds_alternative<PostgresReading>(parsed));
  CHECK_FALSE(drop);
  const auto& reading = std::get<PostgresReading>(parsed);
  CHECK(reading.in_recovery);
  CHECK_FALSE(reading.writable());
  CHECK(reading.system_identifier == "7713570374210613906");
  CHECK(reading.timeline == 3);
  CHECK(reading.wal_bytes == 50331976u);
  CHECK(reading.server_version == 150004);
  CHECK(reading.backend_pid == 4242);
  REQUIRE(reading.upstream);
  CHECK(reading.upstream->status == "streaming");
  CHECK(reading.upstream->sender_port == 5432);
}

TEST_CASE("postgres result: a receiver shown only by its pid is hidden, not guessed", "[parse]") {
  auto row = StandbyRow();
  for (int i = 10; i < 16; ++i) row[i] = nullptr;
  bool drop = false;
  auto parsed = ParseReadingResult(Result(row).get(), &drop);
  REQUIRE(std::holds_alternative<PostgresReading>(parsed));
  REQUIRE(std::get<PostgresReading>(parsed).upstream);
  CHECK(std::get<PostgresReading>(parsed).upstream->hidden);
}

TEST_CASE("postgres result: wrong shapes and values are protocol failures that drop the session",
          "[parse]") {
  CHECK(MustFail(StandbyRow(), 2).reason == ProbeFailureReason::kProtocol);
  CHECK(MustFail(std::vector<const char*>(15, "1")).reason == ProbeFailureReason::kProtocol);
  const std::vector<std::pair<int, const char*>> bad = {
      {0, "yes"},  {0, nullptr}, {1, "1"},          {3, "three"}, {3, "99999999999999999999"},
      {5, "1e3"},  {6, "-1"},    {8, "4294967296"}, {9, "x"},     {12, "70000"},
      {13, "3.5"},
  };
  for (const auto& [column, value] : bad) {
    auto row = StandbyRow();
    row[column] = value;
    INFO("column " << column << " = " << (value ? value : "NULL"));
    CHECK(MustFail(row).reason == ProbeFailureReason::kProtocol);
  }
}

TEST_CASE("postgres result: a reading without a system identifier is a protocol failure",
          "[parse]") {
  auto row = StandbyRow();
  row[2] = nullptr;
  bool drop = false;
  auto parsed = ParseReadingResult(Result(row).get(), &drop);
  REQUIRE(std::holds_alternative<ProbeFailure>(parsed));
  CHECK(std::get<ProbeFailure>(parsed).reason == ProbeFailureReason::kProtocol);
}

}  // namespace sbd
