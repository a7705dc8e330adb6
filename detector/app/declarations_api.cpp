#include "detector/app/declarations_api.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detector/common/json_text.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

Exporter::Sources::Answer ErrorAnswer(int status, const std::vector<ConfigError>& errors) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : errors) list.push_back(e.file.empty() ? e.message : e.ToString());
  // Errors may quote the request: never let invalid UTF-8 make the answer throw.
  return {status, JsonText(nlohmann::json{{"errors", list}}, 2) + "\n"};
}

// The HTTP status of a refused declaration change: the caller's fault, a conflict with what
// the store holds, or the detector's fault (it could not keep it).
int RefusalStatus(StoreRefusal refusal) {
  switch (refusal) {
    case StoreRefusal::kInvalid:
      return 400;
    case StoreRefusal::kNotFound:
      return 404;
    case StoreRefusal::kNotPersisted:
      return 500;
    default:
      return 409;
  }
}

}  // namespace

void SetDeclarationsApi(std::shared_ptr<DeclarationStore> store, Exporter::Sources* sources) {
  sources->list_declarations = [store]() -> Exporter::Sources::Answer {
    nlohmann::json list = nlohmann::json::array();
    const auto now = WallClock::now();
    for (const auto& d : store->All()) list.push_back(DeclarationJson(d, now));
    return {200, JsonText(nlohmann::json{{"declarations", list}}, 2) + "\n"};
  };
  sources->add_declaration = [store](const std::string& body) -> Exporter::Sources::Answer {
    StoreRefusal refusal = StoreRefusal::kNone;
    auto added = store->Add(body, WallClock::now(), std::nullopt, &refusal);
    if (auto* errors = std::get_if<std::vector<ConfigError>>(&added)) {
      return ErrorAnswer(RefusalStatus(refusal), *errors);
    }
    return {201,
            JsonText(DeclarationJson(std::get<Declaration>(added), WallClock::now()), 2) + "\n"};
  };
  sources->remove_declaration = [store](const std::string& id) -> Exporter::Sources::Answer {
    bool not_found = false;
    StoreRefusal refusal = StoreRefusal::kNone;
    const std::string why = store->Remove(id, &not_found, &refusal);
    if (why.empty()) return {200, JsonText(nlohmann::json{{"removed", id}}) + "\n"};
    return ErrorAnswer(RefusalStatus(refusal), {{"", 0, 0, "", why}});
  };
}

}  // namespace sbd
